"""Store conformance for the maintained task counts: ``task_count_by_status``, ``queue_stats``,
``task_counts_fold`` and ``task_counts_reconcile`` (:mod:`duetime.store.protocols`) agree with
the tasks themselves after every kind of transition, on every backend.

Use it like :mod:`duetime.testing.conformance`, given ``store`` and ``clock`` fixtures::

    from duetime.testing.conformance_counters import *  # noqa: F403
"""

from __future__ import annotations

from collections import Counter

from duetime.clock import FakeClock
from duetime.store.counters import CountKey
from duetime.store.protocols import Store
from duetime.testing.conformance import (
    _claim,
    _claim_one,
    _complete,
    _completion,
    _create,
    _fail,
    _in_status,
    _secs,
    _succeed,
    _tenant,
    new_task,
)
from duetime.types import AttemptOutcome, QueueSettings, TaskFilter, TaskPatch, TaskStatus

S = TaskStatus


async def _real(store: Store, *tenants: str) -> dict[tuple[str, str, TaskStatus], int]:
    """Counts made by listing every task (the tests keep well under a page)."""
    found: Counter[tuple[str, str, TaskStatus]] = Counter()
    for tenant_id in tenants:
        for task in await store.task_list(TaskFilter(tenant_id=tenant_id, limit=1000)):
            found[(tenant_id, task.queue, task.status)] += 1
    return dict(found)


async def _counted(store: Store) -> dict[tuple[str, str, TaskStatus], int]:
    return {(c.tenant_id, c.queue, c.status): c.count for c in await store.task_count_by_status()}


async def _agree(store: Store, *tenants: str) -> None:
    real = await _real(store, *tenants)
    assert await _counted(store) == real
    for tenant_id in tenants:
        stats = {
            (tenant_id, s.name, status): n
            for s in await store.queue_stats(tenant_id)
            for status, n in s.counts.items()
        }
        assert stats == {k: n for k, n in real.items() if k[0] == tenant_id}
    # Folding changes where the figures are kept, never the figures.
    await store.task_counts_fold(10_000)
    assert await _counted(store) == real


async def test_counts_follow_every_transition(store: Store, clock: FakeClock) -> None:
    """task_count_by_status and queue_stats equal a real count after creates (one and batch),
    claims, completions (success, retry, failure), cancel, retry, patch, promotion and a
    dependency release; a fold leaves them unchanged."""
    a, b = await _tenant(store, "a"), await _tenant(store, "b")
    await store.task_create_many([new_task(a, queue="q") for _ in range(5)])
    await store.task_create_many([new_task(b, queue="q"), new_task(b, queue="r")])
    await _agree(store, a, b)
    leases = await _claim(store, 3)
    await _agree(store, a, b)
    await _succeed(store, leases[0])
    await _fail(store, leases[1], delay=60)  # retrying
    await _fail(store, leases[2])  # failed
    await _agree(store, a, b)
    for status in (S.SCHEDULED, S.BLOCKED, S.CANCELLED, S.SUCCEEDED, S.FAILED):
        await _in_status(store, a, status, queue="life")
    await _agree(store, a, b)
    failed = await store.task_list(TaskFilter(tenant_id=a, statuses=(S.FAILED,), limit=10))
    await store.task_retry(a, failed[0].id)
    later = await _create(store, a, queue="moved", run_at=clock.now() + _secs(30))
    await store.task_update(a, later.id, TaskPatch(run_at=clock.now()))
    await _agree(store, a, b)
    clock.advance(3600)
    await store.task_promote_due(1000)
    await _agree(store, a, b)
    parent = await _create(store, a, queue="deps")
    await _create(store, a, queue="deps", depends_on=(parent.id,))
    await _complete(store, _completion(await _claim_one(store, parent)))
    await _agree(store, a, b)


async def test_counts_of_lease_expiry(store: Store, clock: FakeClock) -> None:
    """A lease ended by the reaper (``lease_expired``) moves the counts like any completion."""
    a = await _tenant(store, "a")
    task = await _create(store, a, queue="q")
    lease = await _claim_one(store, task, lease_seconds=5)
    clock.set(lease.lease_expires_at + _secs(20))
    (expired,) = await store.task_expired_leases(10)
    await _complete(store, _completion(expired, AttemptOutcome.LEASE_EXPIRED, delay=1))
    await _agree(store, a)


async def test_reconcile_walks_every_queue_and_wraps(store: Store, clock: FakeClock) -> None:
    """task_counts_reconcile: one (tenant, queue) per call in key order, configured queues
    included; None past the last; nothing corrected when the counts are right; a queue over
    ``max_rows`` is skipped."""
    a, b = await _tenant(store, "a"), await _tenant(store, "b")
    await store.task_create_many([new_task(a, queue="q") for _ in range(3)])
    await _create(store, b, queue="p")
    await store.queue_put(a, "configured", QueueSettings())
    keys = []
    after: CountKey | None = None
    while (done := await store.task_counts_reconcile(after, 100)) is not None:
        assert done.corrected == 0 and not done.skipped
        keys.append(done.key)
        after = done.key
    assert keys == sorted([CountKey(a, "q"), CountKey(a, "configured"), CountKey(b, "p")])
    big = await store.task_counts_reconcile(CountKey(a, "configured"), 2)
    assert big is not None and big.key == CountKey(a, "q") and big.skipped
    assert await store.task_counts_reconcile(None, 2) == await store.task_counts_reconcile(None, 2)
    await _agree(store, a, b)


__all__ = sorted(name for name in dir() if name.startswith("test_"))
