"""The lease API: POST /v1/queues/{name}/lease (long poll), heartbeat, complete, fail and their
batch forms; fencing, retries, attempt histories and tenant isolation, on both stores."""

from __future__ import annotations

import asyncio
import time
from datetime import datetime, timedelta

import httpx
import pytest
from api_helpers import ADMIN, assert_problem, case, make_tenant
from fastapi import FastAPI
from lease_helpers import NO_JITTER, attempts, create, lease, polls_waiting, reap, task

from duetime.api.app import create_app
from duetime.clock import FakeClock
from duetime.config import Settings
from duetime.store import Store


def at(value: str) -> datetime:
    return datetime.fromisoformat(value)


# -- lease -------------------------------------------------------------------------------------


async def test_lease_hands_out_the_task_as_get_shows_it(
    api: httpx.AsyncClient, clock: FakeClock
) -> None:
    made = await create(api, name="report", payload={"n": 1}, queue="q")
    (got,) = await lease(api, "q", lease_seconds=45, worker_id="w-7")
    assert set(got) == {"lease_id", "lease_expires_at", "attempt", "traceparent", "task"}
    assert got["traceparent"] is None  # none given at create
    assert got["attempt"] == 1
    assert at(got["lease_expires_at"]) == clock.now() + timedelta(seconds=45)
    assert got["task"] == await task(api, made["id"])
    assert got["task"]["status"] == "running" and got["task"]["payload"] == {"n": 1}
    assert await lease(api, "q") == []


async def test_lease_takes_max_tasks_by_priority_and_names(api: httpx.AsyncClient) -> None:
    low = [await create(api, name="a") for _ in range(3)]
    high = await create(api, name="a", priority=9)
    other = await create(api, name="b")
    first = await lease(api, max_tasks=2, names=["a"])
    assert first[0]["task"]["id"] == high["id"]
    assert len(first) == 2
    rest = await lease(api, max_tasks=10, names=["a"])
    assert {x["task"]["id"] for x in first + rest} == {high["id"]} | {t["id"] for t in low}
    (b,) = await lease(api, names=["b", "c"])
    assert b["task"]["id"] == other["id"]


async def test_lease_defaults_and_queue_scope(api: httpx.AsyncClient, clock: FakeClock) -> None:
    await create(api, queue="elsewhere")
    many = [await create(api) for _ in range(12)]
    resp = await api.post("/v1/queues/default/lease", json={"worker_id": "w", "wait_seconds": 0})
    assert resp.status_code == 200
    got = resp.json()["leases"]
    assert len(got) == 10  # max_tasks defaults to 10
    assert {x["task"]["id"] for x in got} <= {t["id"] for t in many}
    assert all(at(x["lease_expires_at"]) == clock.now() + timedelta(seconds=30) for x in got)


async def test_lease_request_validation(api: httpx.AsyncClient) -> None:
    bad = [
        ({}, "worker_id"),
        ({"worker_id": "w", "max_tasks": 0}, "max_tasks"),
        ({"worker_id": "w", "max_tasks": 1001}, "max_tasks"),
        ({"worker_id": "w", "wait_seconds": 61}, "wait_seconds"),
        ({"worker_id": "w", "wait_seconds": -1}, "wait_seconds"),
        ({"worker_id": "w", "lease_seconds": 0}, "lease_seconds"),
        ({"worker_id": "w", "lease_seconds": 86400}, "lease_seconds"),
        ({"worker_id": "", "wait_seconds": 0}, "worker_id"),
        ({"worker_id": "w", "names": []}, "names"),
        ({"worker_id": "w", "max_tasks": "5"}, "max_tasks"),
        ({"worker_id": "w", "queue": "x"}, "queue"),
    ]
    for body, field in bad:
        with case(body):
            resp = await api.post("/v1/queues/default/lease", json=body)
            assert_problem(resp, 422, field)
    resp = await api.post("/v1/queues/-bad/lease", json={"worker_id": "w"})
    assert_problem(resp, 422, "name")


async def test_lease_calls_need_a_key(client: httpx.AsyncClient) -> None:
    calls = [
        ("/v1/queues/default/lease", {"worker_id": "w"}),
        ("/v1/leases/00000000-0000-4000-8000-000000000000/heartbeat", {}),
        ("/v1/leases/00000000-0000-4000-8000-000000000000/complete", {}),
        ("/v1/leases/00000000-0000-4000-8000-000000000000/fail", {"error": "x"}),
        ("/v1/leases/complete", {"items": []}),
        ("/v1/leases/fail", {"items": []}),
    ]
    for path, body in calls:
        with case(path):
            assert_problem(await client.post(path, json=body), 401)


@pytest.mark.usefixtures("signals_only")
async def test_long_poll_returns_as_soon_as_a_task_is_created(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    # With signals_only nothing but the store's signal wakes the poll before its 60 s run out: an
    # answer within 20 s is the create waking it, however slow a loaded machine is.
    poll = asyncio.create_task(lease(api, "live", wait_seconds=60))
    await polls_waiting(app, 1)
    assert not poll.done(), "nothing to lease: the call must wait"
    made = await create(api, queue="live")
    (got,) = await asyncio.wait_for(poll, 20)
    assert got["task"]["id"] == made["id"]


async def test_long_poll_ends_empty_when_the_wait_runs_out(api: httpx.AsyncClient) -> None:
    await create(api, queue="other")
    await create(api, queue="live", name="not-this")
    start = time.monotonic()
    assert await lease(api, "live", wait_seconds=0.3, names=["wanted"]) == []
    # At least the wait; at most far less than the 20 s default wait (generous: a loaded machine).
    assert 0.28 <= time.monotonic() - start < 10


async def test_waiting_long_polls_are_capped_per_tenant(
    app: FastAPI, api: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    from duetime.lifecycle import lease as leasing

    monkeypatch.setattr(leasing, "MAX_WAITING_POLLS_PER_TENANT", 2)
    waiting = [asyncio.create_task(lease(api, "capped", wait_seconds=60)) for _ in range(2)]
    await polls_waiting(app, 2)
    assert not any(p.done() for p in waiting)
    resp = await api.post("/v1/queues/capped/lease", json={"worker_id": "w3", "wait_seconds": 5})
    body = assert_problem(resp, 429)
    assert body["limit"] == "long_polls_per_tenant"
    assert int(resp.headers["retry-after"]) >= 1
    # A poll that does not wait is still served, and a freed place can be taken again.
    assert await lease(api, "capped", wait_seconds=0) == []
    made = await create(api, queue="capped")
    done, pending = await asyncio.wait(waiting, timeout=20, return_when=asyncio.FIRST_COMPLETED)
    assert [lease["task"]["id"] for p in done for lease in p.result()] == [made["id"]]
    (other,) = pending  # one takes it; the other goes on waiting, and is called off here
    other.cancel()
    await asyncio.gather(other, return_exceptions=True)
    assert await lease(api, "capped", wait_seconds=0.05) == []


# -- heartbeat ---------------------------------------------------------------------------------


async def test_heartbeat_extends_the_lease(
    api: httpx.AsyncClient, store: Store, clock: FakeClock
) -> None:
    made = await create(api)
    (got,) = await lease(api, lease_seconds=10)
    clock.advance(8)
    resp = await api.post(f"/v1/leases/{got['lease_id']}/heartbeat", json={"extend_seconds": 60})
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["lease_id"] == got["lease_id"]
    assert at(body["lease_expires_at"]) == clock.now() + timedelta(seconds=60)
    clock.advance(50)  # past the first expiry, not the extended one
    assert await reap(store, clock) == 0
    resp = await api.post(f"/v1/leases/{got['lease_id']}/heartbeat")  # no body: 30 s
    assert resp.status_code == 200, resp.text
    assert at(resp.json()["lease_expires_at"]) == clock.now() + timedelta(seconds=30)
    assert (await task(api, made["id"]))["status"] == "running"


async def test_heartbeat_of_a_lost_lease_is_409(
    api: httpx.AsyncClient, store: Store, clock: FakeClock
) -> None:
    await create(api)
    await create(api)
    done, expired = await lease(api, lease_seconds=5)
    assert (await api.post(f"/v1/leases/{done['lease_id']}/complete", json={})).status_code == 200
    clock.advance(6)  # expired, not yet reaped: a heartbeat can no longer save it
    for lease_id in (done["lease_id"], expired["lease_id"], "nope", str(done["task"]["id"])):
        with case(lease_id):
            resp = await api.post(f"/v1/leases/{lease_id}/heartbeat", json={})
            body = assert_problem(resp, 409)
            assert body["type"] == "urn:duetime:problem:stale-lease"
    resp = await api.post(f"/v1/leases/{done['lease_id']}/heartbeat", json={"extend_seconds": 0})
    assert_problem(resp, 422, "extend_seconds")


# -- complete and fail -------------------------------------------------------------------------


async def test_complete_succeeds_and_records_the_attempt(api: httpx.AsyncClient) -> None:
    made = await create(api)
    (got,) = await lease(api, worker_id="worker-9")
    resp = await api.post(f"/v1/leases/{got['lease_id']}/complete", json={"result": {"sent": 3}})
    assert resp.status_code == 200, resp.text
    assert resp.json() == {
        "lease_id": got["lease_id"],
        "status": "ok",
        "task_id": made["id"],
        "task_status": "succeeded",
    }
    after = await task(api, made["id"])
    assert after["status"] == "succeeded" and after["result"] == {"sent": 3}
    (attempt,) = await attempts(api, made["id"])
    assert attempt["outcome"] == "succeeded" and attempt["worker"] == "worker-9"
    assert attempt["number"] == 1
    again = await api.post(f"/v1/leases/{got['lease_id']}/complete", json={"result": 1})
    assert_problem(again, 409)
    assert (await task(api, made["id"]))["result"] == {"sent": 3}


async def test_complete_after_expiry_and_reap_is_fenced(
    api: httpx.AsyncClient, store: Store, clock: FakeClock
) -> None:
    made = await create(api, retry=NO_JITTER)
    (got,) = await lease(api, lease_seconds=5, worker_id="slow")
    clock.advance(6)
    assert await reap(store, clock) == 1
    before = await task(api, made["id"])
    assert before["status"] == "retrying"
    for path, body in (("complete", {"result": "late"}), ("fail", {"error": "late"})):
        with case(path):
            resp = await api.post(f"/v1/leases/{got['lease_id']}/{path}", json=body)
            assert_problem(resp, 409)
    assert await task(api, made["id"]) == before
    (attempt,) = await attempts(api, made["id"])
    assert attempt["outcome"] == "lease_expired" and attempt["worker"] == "slow"
    # The task comes back with a fresh lease and a second attempt.
    clock.advance(1)
    await store.task_promote_due(10)
    (second,) = await lease(api)
    assert second["attempt"] == 2 and second["lease_id"] != got["lease_id"]


async def test_fail_retries_after_the_backoff_or_retry_after(
    api: httpx.AsyncClient, store: Store, clock: FakeClock
) -> None:
    made = await create(api, retry=NO_JITTER)
    (first,) = await lease(api)
    resp = await api.post(f"/v1/leases/{first['lease_id']}/fail", json={"error": "flaky"})
    assert resp.status_code == 200, resp.text
    assert resp.json()["task_status"] == "retrying"
    after = await task(api, made["id"])
    assert after["last_error"] == "flaky"
    assert at(after["next_attempt_at"]) == clock.now() + timedelta(seconds=1)  # backoff: 1 s

    clock.advance(1)
    assert await lease(api) == []  # retrying until the promoter makes it ready
    assert await store.task_promote_due(100) == 1
    (second,) = await lease(api)
    assert second["attempt"] == 2
    body = {"error": "slow down", "retry_after_seconds": 120}
    resp = await api.post(f"/v1/leases/{second['lease_id']}/fail", json=body)
    assert resp.json()["task_status"] == "retrying"
    after = await task(api, made["id"])
    assert at(after["next_attempt_at"]) == clock.now() + timedelta(seconds=120)
    history = await attempts(api, made["id"])
    assert [a["outcome"] for a in history] == ["failed", "failed"]
    assert [a["error"] for a in history] == ["flaky", "slow down"]
    assert all(a["worker"] == "w1" for a in history)


async def test_fail_non_retryable_or_exhausted_fails_the_task(
    api: httpx.AsyncClient, clock: FakeClock
) -> None:
    fatal = await create(api, name="fatal", retry=NO_JITTER)
    (got,) = await lease(api, names=["fatal"])
    body = {"error": "bad input", "retryable": False}
    resp = await api.post(f"/v1/leases/{got['lease_id']}/fail", json=body)
    assert resp.json()["task_status"] == "failed"
    after = await task(api, fatal["id"])
    assert after["status"] == "failed" and after["last_error"] == "bad input"

    last = await create(api, name="once", retry={"max_attempts": 1})
    (got,) = await lease(api, names=["once"])
    resp = await api.post(f"/v1/leases/{got['lease_id']}/fail", json={"error": "boom"})
    assert resp.json()["task_status"] == "failed"
    assert (await task(api, last["id"]))["status"] == "failed"


async def test_fail_of_a_cancel_requested_task_ends_cancelled(api: httpx.AsyncClient) -> None:
    made = await create(api)
    (got,) = await lease(api)
    assert (await api.post(f"/v1/tasks/{made['id']}/cancel")).status_code == 200
    resp = await api.post(f"/v1/leases/{got['lease_id']}/fail", json={"error": "stopped"})
    assert resp.json()["task_status"] == "cancelled"


async def test_ack_bodies_are_checked(api: httpx.AsyncClient) -> None:
    await create(api)
    (got,) = await lease(api)
    base = f"/v1/leases/{got['lease_id']}"
    assert_problem(await api.post(f"{base}/fail", json={}), 422, "error")
    assert_problem(await api.post(f"{base}/fail", json={"error": 1}), 422, "error")
    body = {"error": "x", "retry_after_seconds": -1}
    assert_problem(await api.post(f"{base}/fail", json=body), 422, "retry_after_seconds")
    assert_problem(await api.post(f"{base}/complete", json={"extra": 1}), 422, "extra")
    big = {"result": "x" * 2000}  # the test server's payload limit is 1 KiB
    assert_problem(await api.post(f"{base}/complete", json=big), 413, "result")
    assert_problem(await api.post("/v1/leases/complete", json={"items": []}), 422, "items")
    many = {"items": [{"lease_id": "x", "error": "e"}] * 1001}
    assert_problem(await api.post("/v1/leases/fail", json=many), 422, "items")
    items = {"items": [{"lease_id": got["lease_id"], "result": "x" * 2000}]}
    assert_problem(await api.post("/v1/leases/complete", json=items), 413, "items.0.result")
    # Nothing above touched the lease.
    assert (await api.post(f"{base}/complete", json={"result": 1})).status_code == 200


async def test_a_long_error_is_cut_not_refused(api: httpx.AsyncClient) -> None:
    made = await create(api, retry={"max_attempts": 1})
    (got,) = await lease(api)
    resp = await api.post(f"/v1/leases/{got['lease_id']}/fail", json={"error": "e" * 10_000})
    assert resp.status_code == 200, resp.text
    last_error = (await task(api, made["id"]))["last_error"]
    assert 1000 < len(last_error) <= 4096


# -- batches -----------------------------------------------------------------------------------


async def test_batch_complete_mixes_ok_and_stale(api: httpx.AsyncClient) -> None:
    made = [await create(api) for _ in range(3)]
    l1, l2, l3 = await lease(api)
    assert (await api.post(f"/v1/leases/{l1['lease_id']}/complete")).status_code == 200
    items = [
        {"lease_id": l1["lease_id"], "result": "again"},
        {"lease_id": l2["lease_id"], "result": 2},
        {"lease_id": "not-a-lease"},
        {"lease_id": l3["lease_id"], "result": [3]},
        {"lease_id": l2["lease_id"], "result": "twice"},
    ]
    resp = await api.post("/v1/leases/complete", json={"items": items})
    assert resp.status_code == 200, resp.text
    out = resp.json()["items"]
    assert [i["lease_id"] for i in out] == [i["lease_id"] for i in items]
    assert [i["status"] for i in out] == ["stale", "ok", "stale", "ok", "stale"]
    assert [i["task_status"] for i in out] == [None, "succeeded", None, "succeeded", None]
    assert out[1]["task_id"] == l2["task"]["id"] and out[2]["task_id"] is None
    results = {t["id"]: (await task(api, t["id"]))["result"] for t in made}
    assert results == {l1["task"]["id"]: None, l2["task"]["id"]: 2, l3["task"]["id"]: [3]}


async def test_batch_fail_mixes_ok_and_stale(api: httpx.AsyncClient) -> None:
    await create(api, retry=NO_JITTER)
    await create(api, retry=NO_JITTER)
    a, b = await lease(api)
    assert (await api.post(f"/v1/leases/{a['lease_id']}/complete")).status_code == 200
    items = [
        {"lease_id": a["lease_id"], "error": "late"},
        {"lease_id": b["lease_id"], "error": "fatal", "retryable": False},
    ]
    resp = await api.post("/v1/leases/fail", json={"items": items})
    out = resp.json()["items"]
    assert [(i["status"], i["task_status"]) for i in out] == [("stale", None), ("ok", "failed")]
    assert (await task(api, a["task"]["id"]))["status"] == "succeeded"
    after = await task(api, b["task"]["id"])
    assert after["status"] == "failed" and after["last_error"] == "fatal"


# -- tenants -----------------------------------------------------------------------------------


async def test_another_tenants_lease_is_stale_and_untouched(
    api: httpx.AsyncClient, client: httpx.AsyncClient
) -> None:
    mine = await create(api, queue="shared")
    other = await make_tenant(client, "other")
    theirs = {"Authorization": other.headers["Authorization"]}
    (got,) = await lease(api, "shared")
    lease_id = got["lease_id"]
    calls = [
        (f"/v1/leases/{lease_id}/heartbeat", {"extend_seconds": 600}),
        (f"/v1/leases/{lease_id}/complete", {"result": "stolen"}),
        (f"/v1/leases/{lease_id}/fail", {"error": "stolen", "retryable": False}),
    ]
    for path, body in calls:
        with case(path):
            assert_problem(await client.post(path, json=body, headers=theirs), 409)
    for path, item in (("complete", {"result": 1}), ("fail", {"error": "x"})):
        body = {"items": [{"lease_id": lease_id, **item}]}
        resp = await client.post(f"/v1/leases/{path}", json=body, headers=theirs)
        assert resp.json()["items"] == [
            {"lease_id": lease_id, "status": "stale", "task_id": None, "task_status": None}
        ]
    after = await task(api, mine["id"])
    assert after["status"] == "running" and after["result"] is None
    assert after == got["task"] | {"updated_at": after["updated_at"]}
    # The other tenant's poll of the same queue name finds none of our tasks.
    await create(api, queue="shared")
    resp = await client.post(
        "/v1/queues/shared/lease", json={"worker_id": "x", "wait_seconds": 0}, headers=theirs
    )
    assert resp.json() == {"leases": []}


async def test_lease_metrics(api: httpx.AsyncClient) -> None:
    await create(api, queue="metered")
    (got,) = await lease(api, "metered")
    await api.post(f"/v1/leases/{got['lease_id']}/heartbeat")
    await api.post(f"/v1/leases/{got['lease_id']}/complete")
    await api.post(f"/v1/leases/{got['lease_id']}/complete")
    text = (await api.get("/metrics", headers=ADMIN)).text
    assert 'duetime_leases_granted_total{queue="metered"}' in text
    assert 'duetime_lease_heartbeats_total{result="ok"}' in text
    assert 'duetime_stale_completions_total{source="lease_api"}' in text
    assert 'duetime_due_lag_seconds_count{queue="metered"}' in text


@pytest.mark.usefixtures("signals_only")
async def test_shutdown_ends_long_polls(settings: Settings, store: Store) -> None:
    # With signals_only a poll wakes only on a signal or on shutdown: answers well within the
    # 60 s waits are the shutdown ending them (bounds generous for a loaded machine).
    app = create_app(settings, store)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://duetime.test") as c:
        c.headers.update((await make_tenant(c, "acme")).headers)
        poll = asyncio.create_task(lease(c, "idle", wait_seconds=60))
        await polls_waiting(app, 1)
        app.state.services.leases.close()
        assert await asyncio.wait_for(poll, 20) == []
        # Later calls during shutdown answer at once too.
        assert await asyncio.wait_for(lease(c, "idle", wait_seconds=60), 20) == []


@pytest.mark.usefixtures("signals_only")
async def test_shutdown_before_the_first_lease_call_still_ends_its_poll(
    settings: Settings, store: Store
) -> None:
    app = create_app(settings, store)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://duetime.test") as c:
        c.headers.update((await make_tenant(c, "acme")).headers)
        app.state.services.leases.close()  # before any lease call
        # signals_only: nothing but the shutdown ends this 60 s wait within 20 s.
        assert await asyncio.wait_for(lease(c, "idle", wait_seconds=60), 20) == []


async def test_fail_with_timed_out_records_a_timed_out_attempt(api: httpx.AsyncClient) -> None:
    made = await create(api, name="slow", retry=NO_JITTER)
    (got,) = await lease(api, names=["slow"])
    body = {"error": "timed out after 1s", "timed_out": True}
    resp = await api.post(f"/v1/leases/{got['lease_id']}/fail", json=body)
    assert resp.status_code == 200 and resp.json()["task_status"] == "retrying"
    (attempt,) = await attempts(api, made["id"])
    assert attempt["outcome"] == "timed_out" and attempt["error"] == "timed out after 1s"
