"""PUT/GET /v1/queues (settings and live figures, paused and max_concurrency enforced by every
claim) and GET /v1/workers, on both stores."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from api_helpers import assert_problem, case, make_tenant
from fastapi import FastAPI
from lease_helpers import HTTP, create, lease, polls_waiting

from duetime.clock import FakeClock
from duetime.engine.dispatcher import Dispatcher
from duetime.store import Store
from duetime.testing.fakes import FakeDeliverer
from duetime.types import TargetType

STATUSES = ("scheduled", "blocked", "ready", "running", "retrying", "succeeded", "failed")


async def put(api: httpx.AsyncClient, name: str, **settings: object) -> dict[str, object]:
    resp = await api.put(f"/v1/queues/{name}", json=settings)
    assert resp.status_code == 200, resp.text
    return dict(resp.json())


async def dispatch_once(store: Store, clock: FakeClock) -> int:
    """One round of the real dispatcher (push tasks), its deliveries finished."""
    d = Dispatcher(
        store,
        {TargetType.HTTP: FakeDeliverer()},
        clock,
        node_id="node-a",
        concurrency=16,
        batch=16,
        poll_interval=0.01,
        lease_grace=5,
    )
    await d.start()
    claimed = await d.run_once()
    await d.drain(grace=5)
    return claimed


# -- settings ----------------------------------------------------------------------------------


async def test_put_and_get_a_queue(api: httpx.AsyncClient, clock: FakeClock) -> None:
    body = await put(api, "emails", max_concurrency=5, paused=True)
    assert body["name"] == "emails" and body["configured"] is True
    assert (body["max_concurrency"], body["paused"]) == (5, True)
    assert body["rate_limit_per_second"] is None and body["burst"] is None
    assert body["max_concurrency_per_key"] is None
    assert body["updated_at"] == clock.now().isoformat().replace("+00:00", "Z")
    assert body["counts"] == dict.fromkeys((*STATUSES, "cancelled"), 0)
    assert body["running"] == 0 and body["oldest_due_lag_seconds"] is None
    got = await api.get("/v1/queues/emails")
    assert got.status_code == 200 and got.json() == body
    # PUT replaces every setting: what is left out takes its default.
    replaced = await put(api, "emails")
    assert (replaced["max_concurrency"], replaced["paused"]) == (None, False)


async def test_flow_control_settings_are_stored_and_checked(api: httpx.AsyncClient) -> None:
    body = await put(
        api, "q", rate_limit_per_second=2.5, burst=10, max_concurrency=4, max_concurrency_per_key=1
    )
    assert body["rate_limit_per_second"] == 2.5 and body["burst"] == 10
    assert (body["max_concurrency"], body["max_concurrency_per_key"]) == (4, 1)
    # A burst sizes the rate's bucket: alone it is refused, naming it.
    assert_problem(await api.put("/v1/queues/q", json={"burst": 10}), 422, "burst")
    assert (await api.get("/v1/queues/q")).json()["burst"] == 10  # nothing changed
    nulls = {"rate_limit_per_second": None, "burst": None, "max_concurrency_per_key": None}
    assert (await api.put("/v1/queues/q", json=nulls)).status_code == 200
    bad = [
        ({"max_concurrency": 0}, "max_concurrency"),
        ({"max_concurrency": 1.5}, "max_concurrency"),
        ({"paused": "yes"}, "paused"),
        ({"priority": 1}, "priority"),
        ({"rate_limit_per_second": 0}, "rate_limit_per_second"),
        ({"rate_limit_per_second": "fast"}, "rate_limit_per_second"),
        ({"max_concurrency_per_key": 0}, "max_concurrency_per_key"),
        ({"burst": 0, "rate_limit_per_second": 1}, "burst"),
    ]
    for body, field in bad:
        with case(body):
            assert_problem(await api.put("/v1/queues/q", json=body), 422, field)
    assert_problem(await api.put("/v1/queues/bad%20name", json={}), 422, "name")
    assert (await api.get("/v1/queues/q")).json()["configured"] is True


async def test_queues_exist_through_their_tasks(api: httpx.AsyncClient, clock: FakeClock) -> None:
    assert_problem(await api.get("/v1/queues/nothing-here"), 404)
    await create(api, queue="implicit")
    await create(api, queue="implicit")
    await create(api, queue="implicit", delay_seconds=60)
    await create(api, queue="implicit", name="run")
    await lease(api, "implicit", names=["run"])
    await put(api, "configured", max_concurrency=1)
    clock.advance(4)

    got = (await api.get("/v1/queues/implicit")).json()
    assert got["configured"] is False and got["updated_at"] is None
    assert got["paused"] is False and got["max_concurrency"] is None
    assert (got["counts"]["ready"], got["counts"]["scheduled"], got["running"]) == (2, 1, 1)
    assert abs(got["oldest_due_lag_seconds"] - 4) < 1e-3
    listed = (await api.get("/v1/queues")).json()["items"]
    assert [q["name"] for q in listed] == ["configured", "implicit"]
    assert listed[1] == got


async def test_queues_are_per_tenant(api: httpx.AsyncClient, client: httpx.AsyncClient) -> None:
    await put(api, "q", paused=True)
    other = await make_tenant(client, "other")
    assert_problem(await client.get("/v1/queues/q", headers=other.headers), 404)
    assert (await client.get("/v1/queues", headers=other.headers)).json() == {"items": []}
    resp = await client.post(
        "/v1/tasks", json={"target": {"type": "worker"}, "queue": "q"}, headers=other.headers
    )
    assert resp.status_code == 201
    # Their "q" is not paused: only ours is.
    resp = await client.post(
        "/v1/queues/q/lease", json={"worker_id": "w", "wait_seconds": 0}, headers=other.headers
    )
    assert len(resp.json()["leases"]) == 1


# -- enforcement -------------------------------------------------------------------------------


@pytest.mark.usefixtures("signals_only")
async def test_paused_queue_is_neither_leased_nor_dispatched(
    app: FastAPI, api: httpx.AsyncClient, store: Store, clock: FakeClock
) -> None:
    await put(api, "held", paused=True)
    pulled = await create(api, queue="held")
    pushed = await create(api, queue="held", target=HTTP)
    free = await create(api, queue="free", target=HTTP)
    assert await lease(api, "held") == []
    assert await dispatch_once(store, clock) == 1  # only the other queue's task
    assert (await api.get(f"/v1/tasks/{free['id']}")).json()["status"] == "succeeded"
    assert (await api.get(f"/v1/tasks/{pushed['id']}")).json()["status"] == "ready"

    # A long poll waiting on the paused queue wakes when it is resumed (signals_only: nothing
    # else wakes it before its 60 s run out, so no tighter bound is needed).
    poll = asyncio.create_task(lease(api, "held", wait_seconds=60))
    await polls_waiting(app, 1)
    assert not poll.done()
    await put(api, "held", paused=False)
    (got,) = await asyncio.wait_for(poll, 20)
    assert got["task"]["id"] == pulled["id"]
    assert await dispatch_once(store, clock) == 1
    assert (await api.get(f"/v1/tasks/{pushed['id']}")).json()["status"] == "succeeded"


@pytest.mark.usefixtures("signals_only")
async def test_max_concurrency_holds_under_concurrent_lease_calls(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    await put(api, "narrow", max_concurrency=2)
    for _ in range(6):
        await create(api, queue="narrow")
    batches = await asyncio.gather(
        lease(api, "narrow", max_tasks=5, worker_id="a"),
        lease(api, "narrow", max_tasks=5, worker_id="b"),
    )
    held = [x for batch in batches for x in batch]
    assert len(held) == 2
    assert await lease(api, "narrow") == []
    assert (await api.get("/v1/queues/narrow")).json()["running"] == 2

    # A poll waiting for room wakes as soon as a slot is freed (signals_only: only the
    # completion's signal can wake it before its 60 s run out).
    poll = asyncio.create_task(lease(api, "narrow", max_tasks=5, wait_seconds=60))
    await polls_waiting(app, 1)
    assert not poll.done()
    resp = await api.post(f"/v1/leases/{held[0]['lease_id']}/complete")
    assert resp.status_code == 200
    got = await asyncio.wait_for(poll, 20)
    assert len(got) == 1
    assert (await api.get("/v1/queues/narrow")).json()["running"] == 2


# -- workers -----------------------------------------------------------------------------------


async def test_workers_are_listed_with_their_leases(
    api: httpx.AsyncClient, client: httpx.AsyncClient, clock: FakeClock
) -> None:
    assert (await api.get("/v1/workers")).json() == {"items": []}
    for _ in range(3):
        await create(api, queue="a")
    await lease(api, "a", max_tasks=2, worker_id="w1")
    await lease(api, "b", worker_id="w1")
    await lease(api, "a", worker_id="w2")
    first_seen = clock.now()
    clock.advance(30)
    assert await lease(api, "a", worker_id="late") == []  # w1 and w2 hold every task
    items = (await api.get("/v1/workers")).json()["items"]
    assert [w["worker_id"] for w in items] == ["late", "w1", "w2"]
    late, w1, w2 = items
    assert w1["queues"] == ["a", "b"] and w1["leases"] == 2
    assert w2["leases"] == 1 and late["leases"] == 0
    assert w1["first_seen_at"] == first_seen.isoformat().replace("+00:00", "Z")
    assert set(w1) == {"worker_id", "queues", "first_seen_at", "last_seen_at", "leases"}
    recent = (await api.get("/v1/workers", params={"live_within_seconds": 10})).json()
    assert [w["worker_id"] for w in recent["items"]] == ["late"]
    assert_problem(await api.get("/v1/workers", params={"live_within_seconds": 0}), 422)
    other = await make_tenant(client, "other")
    assert (await client.get("/v1/workers", headers=other.headers)).json() == {"items": []}


async def test_heartbeat_keeps_a_worker_live(
    api: httpx.AsyncClient, app: FastAPI, clock: FakeClock
) -> None:
    # A node records a worker at most once a (real) second; this test's calls come faster.
    app.state.services.leases._sightings.ttl = 0.0
    await create(api, queue="a")
    (got,) = await lease(api, "a", worker_id="busy", lease_seconds=300)
    clock.advance(100)
    assert (await api.get("/v1/workers")).json() == {"items": []}
    resp = await api.post(f"/v1/leases/{got['lease_id']}/heartbeat", json={"extend_seconds": 60})
    assert resp.status_code == 200, resp.text
    (busy,) = (await api.get("/v1/workers")).json()["items"]
    assert busy["worker_id"] == "busy" and busy["leases"] == 1
    assert busy["last_seen_at"] == clock.now().isoformat().replace("+00:00", "Z")


@pytest.mark.usefixtures("signals_only")
async def test_long_polls_leave_the_dispatchers_wake_ups_alone(
    app: FastAPI, api: httpx.AsyncClient, store: Store, clock: FakeClock
) -> None:
    """Pull workers waiting on the store's ready signal must not take its wake-ups from the
    dispatcher (which here polls only every 300 s): pushed tasks still go out at once."""
    deliverer = FakeDeliverer()
    d = Dispatcher(
        store,
        {TargetType.HTTP: deliverer},
        clock,
        node_id="node-a",
        concurrency=4,
        batch=4,
        poll_interval=300,
        lease_grace=5,
    )
    await d.start()
    running = asyncio.create_task(d.run())
    polls = [asyncio.create_task(lease(api, "pull", wait_seconds=60)) for _ in range(3)]
    try:
        await polls_waiting(app, 3)
        # Only the ready signal wakes the dispatcher within its 300 s poll, so a delivery within
        # 20 s proves the wake-up reached it (the bound is generous for a loaded machine).
        for n in range(1, 6):
            deliverer.delivered.clear()
            await create(api, queue="push", target=HTTP)
            await asyncio.wait_for(deliverer.delivered.wait(), 20)
            assert len(deliverer.deliveries) == n, f"delivery {n} waited for the poll"
        assert not any(p.done() for p in polls)
        made = await create(api, queue="pull")
        done, _ = await asyncio.wait(polls, timeout=20, return_when=asyncio.FIRST_COMPLETED)
        assert [x["task"]["id"] for p in done for x in p.result()] == [made["id"]]
    finally:
        for p in polls:
            p.cancel()
        d.stop()
        running.cancel()
        await d.drain(grace=1)


async def test_queue_figures_say_what_holds_work_back(
    api: httpx.AsyncClient, clock: FakeClock
) -> None:
    """GET /v1/queues/{name}: ``tokens`` (the bucket now) and ``held_by`` (which limit keeps
    ready tasks waiting)."""
    await put(api, "q", rate_limit_per_second=1.0, burst=2, max_concurrency=5)
    assert (await api.get("/v1/queues/q")).json()["held_by"] == []  # nothing waits
    for _ in range(4):
        await create(api, queue="q")
    got = (await api.get("/v1/queues/q")).json()
    assert got["tokens"] == 2.0 and got["held_by"] == []
    assert len(await lease(api, "q", max_tasks=10)) == 2  # the bucket's two tokens
    got = (await api.get("/v1/queues/q")).json()
    assert got["tokens"] == 0.0 and got["held_by"] == ["rate_limit_per_second"]
    clock.advance(0.5)
    assert (await api.get("/v1/queues/q")).json()["tokens"] == 0.5
    await put(api, "q", max_concurrency=2, paused=True)
    got = (await api.get("/v1/queues/q")).json()
    assert got["tokens"] is None and got["held_by"] == ["paused", "max_concurrency"]
