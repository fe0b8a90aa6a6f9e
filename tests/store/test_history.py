"""History, audit and retention on both stores, with the test's FakeClock as the store's time."""

from __future__ import annotations

from datetime import timedelta

import pytest

from duetime.clock import FakeClock
from duetime.errors import NotFound, ValidationError
from duetime.history.actor import acting_as
from duetime.history.events import HistoryFilter
from duetime.history.retention import RetentionPolicy
from duetime.states import after_attempt
from duetime.store import Store
from duetime.types import (
    AttemptOutcome,
    ClaimRequest,
    Completion,
    NewTask,
    TargetType,
    TaskPatch,
)

DAY = 86400.0
DEFAULTS = RetentionPolicy(succeeded=7 * DAY, failed=30 * DAY, cancelled=7 * DAY)


async def make(store: Store, tenant: str, n: int = 1, **fields: object) -> list[str]:
    made = await store.task_create_many(
        [NewTask(tenant_id=tenant, target={"type": "worker"}, **fields) for _ in range(n)]  # type: ignore[arg-type]
    )
    return [m.task.id for m in made]


async def finish(
    store: Store, clock: FakeClock, outcome: AttemptOutcome, *, queue: str | None = None
) -> list[str]:
    """Claim every ready worker task (of ``queue``) and end it with ``outcome``."""
    leases = await store.task_claim(
        ClaimRequest(
            worker_id="w7", limit=100, queue=queue, target_types=frozenset({TargetType.WORKER})
        )
    )
    await store.task_complete_many(
        [
            Completion(
                task_id=lease.task.id,
                lease_id=lease.lease_id,
                outcome=outcome,
                started_at=clock.now(),
                duration_ms=5.0,
                error=None if outcome is AttemptOutcome.SUCCEEDED else "boom",
                http_status=None,
                retry_delay_seconds=None,
                worker="w7",
                status=after_attempt(outcome is AttemptOutcome.SUCCEEDED, None),
            )
            for lease in leases
        ]
    )
    return [lease.task.id for lease in leases]


async def test_state_changes_and_attempts_are_recorded_with_actor(
    store: Store, clock: FakeClock
) -> None:
    tenant = (await store.tenant_create("t")).id
    (task_id,) = await make(store, tenant, name="report", labels={"team": "a"})
    with acting_as("key:k1"):
        await store.task_update(tenant, task_id, TaskPatch(priority=5))
    clock.advance(1)
    await finish(store, clock, AttemptOutcome.FAILED)
    clock.advance(1)
    with acting_as("key:k2"):
        await store.task_retry(tenant, task_id)

    found = await store.history_query(HistoryFilter(tenant_id=tenant, task_id=task_id))
    changes = [(e.from_status, e.to_status, e.actor) for e in reversed(found) if e.kind == "task"]
    assert changes == [
        (None, "ready", "api"),
        ("ready", "ready", "key:k1"),
        ("ready", "running", "worker:w7"),
        ("running", "failed", "worker:w7"),
        ("failed", "ready", "key:k2"),
    ]
    patch = next(e for e in found if e.actor == "key:k1")
    assert patch.fields == {"priority": [0, 5]}
    (attempt,) = [e for e in found if e.kind == "attempt"]
    assert (attempt.attempt, attempt.worker, attempt.error) == (1, "w7", "boom")
    assert (attempt.outcome, attempt.actor) == ("failed", "worker:w7")
    assert attempt.name == "report" and dict(attempt.labels) == {"team": "a"}


async def test_history_filters_paging_and_tenant_isolation(store: Store, clock: FakeClock) -> None:
    a = (await store.tenant_create("a")).id
    b = (await store.tenant_create("b")).id
    await make(store, a, 3, name="x")
    await make(store, b, 2, name="x")
    clock.advance(10)
    await finish(store, clock, AttemptOutcome.FAILED)

    failed_a = await store.history_query(
        HistoryFilter(tenant_id=a, name="x", kinds=("attempt",), outcomes=("failed",))
    )
    assert len(failed_a) == 3
    assert len(await store.history_query(HistoryFilter(tenant_id=b, kinds=("attempt",)))) == 2
    assert await store.history_query(HistoryFilter(tenant_id="nobody")) == []

    # Cursor paging walks every record once, newest first.
    everything = await store.history_query(HistoryFilter(tenant_id=a, limit=1000))
    pages, cursor = [], None
    while True:
        page = await store.history_query(HistoryFilter(tenant_id=a, limit=4, cursor=cursor))
        pages += page
        if len(page) < 4:
            break
        cursor = (page[-1].at, page[-1].id)
    assert [e.id for e in pages] == [e.id for e in everything]
    assert [(e.at, e.id) for e in everything] == sorted(
        ((e.at, e.id) for e in everything), reverse=True
    )

    # Time range: only the attempts happened after the clock moved.
    since = clock.now() - timedelta(seconds=1)
    late = await store.history_query(HistoryFilter(tenant_id=a, since=since, kinds=("attempt",)))
    assert len(late) == 3
    early = await store.history_query(HistoryFilter(tenant_id=a, until=since))
    assert {e.to_status for e in early} == {"ready"}

    with pytest.raises(ValidationError):
        await store.history_query(HistoryFilter(tenant_id=a, kinds=("bogus",)))


async def test_retention_sweeps_finished_tasks_per_queue(store: Store, clock: FakeClock) -> None:
    tenant = (await store.tenant_create("t")).id
    kept_queue = await make(store, tenant, 2, queue="keep")
    fast_queue = await make(store, tenant, 2, queue="fast")
    waiting = await make(store, tenant, 1, queue="fast", run_at=clock.now() + timedelta(days=90))
    await store.queue_retention_put(tenant, "fast", RetentionPolicy(succeeded=DAY))
    assert await store.queue_retention_get(tenant, "fast") == RetentionPolicy(succeeded=DAY)
    assert await store.queue_retention_get(tenant, "keep") == RetentionPolicy()
    await finish(store, clock, AttemptOutcome.SUCCEEDED)

    clock.advance(2 * DAY)  # past fast's 1 day, within the 7-day default
    assert await store.task_retention_sweep(DEFAULTS, limit=1) == 1  # bounded batches
    assert await store.task_retention_sweep(DEFAULTS, limit=100) == 1
    assert await store.task_retention_sweep(DEFAULTS, limit=100) == 0
    for task_id in fast_queue:
        assert await store.task_get(tenant, task_id) is None
    for task_id in kept_queue + waiting:
        assert await store.task_get(tenant, task_id) is not None

    # Their history stays, and so do their attempts.
    attempts = await store.history_attempts(tenant, fast_queue[0])
    assert [(a.number, a.outcome) for a in attempts] == [(1, AttemptOutcome.SUCCEEDED)]
    with pytest.raises(NotFound):
        await store.history_attempts("someone-else", fast_queue[0])

    clock.advance(6 * DAY)  # the default 7 days have passed for the other queue
    assert await store.task_retention_sweep(DEFAULTS, limit=100) == 2
    assert await store.task_get(tenant, waiting[0]) is not None  # never finished: stays

    await store.queue_retention_put(tenant, "fast", None)
    assert await store.queue_retention_get(tenant, "fast") == RetentionPolicy()


async def test_retention_keeps_failed_longer(store: Store, clock: FakeClock) -> None:
    tenant = (await store.tenant_create("t")).id
    (failed,) = await make(store, tenant)
    await finish(store, clock, AttemptOutcome.FAILED)
    clock.advance(8 * DAY)
    assert await store.task_retention_sweep(DEFAULTS, limit=100) == 0
    clock.advance(23 * DAY)
    assert await store.task_retention_sweep(DEFAULTS, limit=100) == 1
    assert await store.task_get(tenant, failed) is None
