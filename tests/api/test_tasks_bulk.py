"""Bulk replay and cancel by filter (``POST /v1/tasks/replay``, ``POST /v1/tasks/cancel``), on
both stores, and the throttle of :func:`duetime.api.bulk.bulk_change`."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import orjson
from api_helpers import assert_problem, make_tenant
from fastapi import FastAPI
from starlette.types import Message

from duetime.api.bulk import bulk_change
from duetime.clock import FakeClock
from duetime.store import Store
from duetime.types import (
    AttemptOutcome,
    ClaimRequest,
    Completion,
    NewTask,
    TargetType,
    TaskFilter,
    TaskStatus,
)

WORKER = {"type": "worker"}


async def create(api: httpx.AsyncClient, **fields: Any) -> str:
    resp = await api.post("/v1/tasks", json={"target": WORKER, **fields})
    assert resp.status_code == 201, resp.text
    return str(resp.json()["id"])


async def fail_all(store: Store, clock: FakeClock) -> int:
    """Claim and fail (not retryable) every ready worker task."""
    leases = await store.task_claim(
        ClaimRequest(worker_id="w1", limit=1000, target_types=frozenset({TargetType.WORKER}))
    )
    await store.task_complete_many(
        [
            Completion(
                task_id=lease.task.id,
                lease_id=lease.lease_id,
                outcome=AttemptOutcome.FAILED,
                started_at=clock.now(),
                duration_ms=1.0,
                error="down",
                http_status=503,
                retry_delay_seconds=None,
                worker="w1",
                status=TaskStatus.FAILED,
            )
            for lease in leases
        ]
    )
    return len(leases)


async def statuses(api: httpx.AsyncClient, ids: list[str]) -> list[str]:
    return [(await api.get(f"/v1/tasks/{i}")).json()["status"] for i in ids]


async def test_replay_dead_letter_set_by_filter(
    api: httpx.AsyncClient, store: Store, clock: FakeClock
) -> None:
    billing = [await create(api, queue="billing", labels={"team": "a"}) for _ in range(3)]
    other = [await create(api, queue="other") for _ in range(2)]
    assert await fail_all(store, clock) == 5

    resp = await api.post("/v1/tasks/replay", json={"queue": "billing", "rate_per_second": 1000})
    assert resp.status_code == 200, resp.text
    assert resp.json() == {"matched": 3, "changed": 3}
    assert await statuses(api, billing) == ["ready"] * 3
    assert await statuses(api, other) == ["failed"] * 2

    # Nothing failed is left in billing: a repeat matches nothing.
    again = await api.post("/v1/tasks/replay", json={"queue": "billing"})
    assert again.json() == {"matched": 0, "changed": 0}

    # max_tasks bounds the walk (newest first).
    limited = await api.post("/v1/tasks/replay", json={"max_tasks": 1, "queue": "other"})
    assert limited.json() == {"matched": 1, "changed": 1}
    assert sorted(await statuses(api, other)) == ["failed", "ready"]


async def test_replay_by_label_and_name(
    api: httpx.AsyncClient, store: Store, clock: FakeClock
) -> None:
    wanted = await create(api, name="report", labels={"team": "a"})
    await create(api, name="report", labels={"team": "b"})
    await create(api, name="other", labels={"team": "a"})
    await fail_all(store, clock)
    resp = await api.post("/v1/tasks/replay", json={"name": "report", "labels": {"team": "a"}})
    assert resp.json() == {"matched": 1, "changed": 1}
    assert await statuses(api, [wanted]) == ["ready"]


async def test_cancel_by_filter_leaves_finished_and_other_tenants_alone(
    client: httpx.AsyncClient, api: httpx.AsyncClient, store: Store, clock: FakeClock
) -> None:
    waiting = [await create(api, run_at="2031-01-01T00:00:00Z") for _ in range(3)]
    ready = await create(api)
    other = await make_tenant(client, "other")
    theirs = await client.post(
        "/v1/tasks", json={"target": WORKER, "run_at": "2031-01-01T00:00:00Z"},
        headers=other.headers,
    )  # fmt: skip
    resp = await api.post("/v1/tasks/cancel", json={"status": ["scheduled"]})
    assert resp.json() == {"matched": 3, "changed": 3}
    assert await statuses(api, waiting) == ["cancelled"] * 3
    assert await statuses(api, [ready]) == ["ready"]
    mine = await client.get(f"/v1/tasks/{theirs.json()['id']}", headers=other.headers)
    assert mine.json()["status"] == "scheduled"

    # Default: every unfinished status; cancelled ones are not touched again.
    resp = await api.post("/v1/tasks/cancel", json={})
    assert resp.json() == {"matched": 1, "changed": 1}


async def test_bad_bulk_input_is_422_and_changes_nothing(
    api: httpx.AsyncClient, store: Store, clock: FakeClock
) -> None:
    task = await create(api)
    await fail_all(store, clock)
    # Each call's document lists the statuses it may change (what the replay or cancel of one
    # task allows), and the refusal names the one at fault.
    wrong = await api.post("/v1/tasks/replay", json={"status": ["failed", "ready"]})
    assert "'failed' or 'cancelled'" in assert_problem(wrong, 422, "status.1")["detail"]
    wrong = await api.post("/v1/tasks/cancel", json={"status": ["failed"]})
    assert "'retrying'" in assert_problem(wrong, 422, "status.0")["detail"]
    document = (await api.get("/openapi.json")).json()["components"]["schemas"]
    assert document["ReplayIn"]["properties"]["status"]["anyOf"][0]["items"]["enum"] == [
        "failed", "cancelled",
    ]  # fmt: skip
    assert_problem(await api.post("/v1/tasks/replay", json={"max_tasks": 0}), 422, "max_tasks")
    for rate in (0, 0.5, 0.001):  # under 1 a second, a walk of max_tasks could last days
        assert_problem(
            await api.post("/v1/tasks/replay", json={"rate_per_second": rate}),
            422,
            "rate_per_second",
        )
    assert_problem(await api.post("/v1/tasks/replay", json={"bogus": 1}), 422, "bogus")
    assert_problem(
        await api.post(
            "/v1/tasks/replay",
            json={"run_after": "2030-02-01T00:00:00Z", "run_before": "2030-01-01T00:00:00Z"},
        ),
        422,
        "run_before",
    )
    assert await statuses(api, [task]) == ["failed"]


async def test_bulk_change_is_throttled(store: Store, clock: FakeClock) -> None:
    """The n-th change waits until n / rate seconds after the first."""
    tenant = await store.tenant_create("t")
    await store.task_create_many(
        [NewTask(tenant_id=tenant.id, target={"type": "worker"}) for _ in range(5)]
    )
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock.advance(seconds)

    done = await bulk_change(
        store,
        "cancel",
        TaskFilter(tenant_id=tenant.id, statuses=(TaskStatus.READY,)),
        max_tasks=10,
        rate_per_second=2.0,
        monotonic=clock.monotonic,
        sleep=sleep,
    )
    assert (done.matched, done.changed) == (5, 5)
    assert slept == [0.5, 0.5, 0.5, 0.5]


def _bulk_scope(path: str, headers: dict[str, str], body: bytes) -> dict[str, Any]:
    raw = [(k.lower().encode(), v.encode()) for k, v in headers.items()]
    raw += [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": raw,
        "client": ("127.0.0.1", 5000),
        "server": ("127.0.0.1", 8080),
    }


async def test_a_walk_stops_when_its_caller_disconnects(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    ids = [await create(api) for _ in range(20)]
    body = orjson.dumps({"rate_per_second": 2, "max_tasks": 20})
    scope = _bulk_scope("/v1/tasks/cancel", {"Authorization": api.headers["authorization"]}, body)
    sent: list[Message] = []
    gone = asyncio.Event()

    async def receive() -> Message:
        if body_sent.is_set():
            await gone.wait()  # as a server does: the next message is the disconnect
            return {"type": "http.disconnect"}
        body_sent.set()
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: Message) -> None:
        sent.append(message)

    body_sent = asyncio.Event()
    call = asyncio.create_task(app(scope, receive, send))
    await asyncio.sleep(0.8)  # two changes at 2 a second (the first at once)
    gone.set()
    started = time.monotonic()
    await asyncio.wait_for(call, 5)
    assert time.monotonic() - started < 2  # the walk of 10 s did not go on
    cancelled = (await statuses(api, ids)).count("cancelled")
    await asyncio.sleep(1.5)
    assert (await statuses(api, ids)).count("cancelled") == cancelled
    assert 1 <= cancelled <= 3


async def test_a_node_shutting_down_stops_walks_with_a_503(
    app: FastAPI, api: httpx.AsyncClient
) -> None:
    ids = [await create(api) for _ in range(20)]
    walk = asyncio.create_task(
        api.post("/v1/tasks/cancel", json={"rate_per_second": 2, "max_tasks": 20})
    )
    await asyncio.sleep(0.8)
    app.state.services.walks.close()  # what `duetime serve` does on SIGTERM
    resp = await asyncio.wait_for(walk, 5)
    problem = assert_problem(resp, 503)
    assert resp.headers["retry-after"]
    assert "shutting down" in str(problem["detail"])
    cancelled = (await statuses(api, ids)).count("cancelled")
    assert 1 <= cancelled <= 3
    assert f"{cancelled} changed" in str(problem["detail"])
    again = await api.post("/v1/tasks/cancel", json={"max_tasks": 1})
    assert_problem(again, 503)  # a closed node starts no walk


async def test_a_batch_answers_ids_only_when_asked(api: httpx.AsyncClient) -> None:
    tasks = [{"target": WORKER, "payload": {"blob": "x" * 500}} for _ in range(3)]
    tasks.append({"target": WORKER, "idempotency_key": "once"})
    first = await api.post("/v1/tasks", json={"target": WORKER, "idempotency_key": "once"})
    resp = await api.post(
        "/v1/tasks/batch", json={"tasks": tasks}, headers={"Prefer": "return=minimal"}
    )
    assert resp.status_code == 201, resp.text
    assert resp.headers["preference-applied"] == "return=minimal"
    items = resp.json()["items"]
    assert [set(item) for item in items] == [{"id", "created"}] * 4
    assert [item["created"] for item in items] == [True, True, True, False]
    assert items[3]["id"] == first.json()["id"]
    assert len(resp.content) < 400  # not the 1.5 KB of payloads echoed back
    for item in items[:3]:
        assert (await api.get(f"/v1/tasks/{item['id']}")).json()["payload"] == {"blob": "x" * 500}
    whole = await api.post("/v1/tasks/batch", json={"tasks": tasks[:1]})
    assert "preference-applied" not in whole.headers
    assert whole.json()["items"][0]["payload"] == {"blob": "x" * 500}
