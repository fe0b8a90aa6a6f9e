"""Bulk replay and cancel by filter (``POST /v1/tasks/replay``, ``POST /v1/tasks/cancel``), on
both stores, and the throttle of :func:`duetime.api.bulk.bulk_change`."""

from __future__ import annotations

from typing import Any

import httpx
from api_helpers import assert_problem, make_tenant

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
    assert_problem(await api.post("/v1/tasks/replay", json={"status": ["ready"]}), 422, "status")
    assert_problem(await api.post("/v1/tasks/cancel", json={"status": ["failed"]}), 422, "status")
    assert_problem(await api.post("/v1/tasks/replay", json={"max_tasks": 0}), 422, "max_tasks")
    assert_problem(
        await api.post("/v1/tasks/replay", json={"rate_per_second": 0}), 422, "rate_per_second"
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
