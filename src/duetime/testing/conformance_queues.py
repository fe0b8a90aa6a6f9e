"""Store conformance for queues and pull workers: the contracts of ``task_claim`` (tenant,
paused queues, ``max_concurrency``), ``task_leases_get``, ``queue_*`` and ``worker_*`` in
:mod:`duetime.store.protocols`, run unchanged against every backend.

Use it like :mod:`duetime.testing.conformance`, given ``store`` and ``clock`` fixtures::

    from duetime.testing.conformance_queues import *  # noqa: F403
"""

from __future__ import annotations

import asyncio
from typing import Any

from duetime.clock import FakeClock
from duetime.store.protocols import Store
from duetime.target_types import PUSH_TYPES
from duetime.testing.conformance import (
    ALL_TYPES,
    HTTP,
    _claim,
    _complete,
    _completion,
    _create,
    _drain,
    _get,
    _secs,
    _succeed,
    _tenant,
)
from duetime.types import (
    ClaimRequest,
    Lease,
    QueueSettings,
    TargetType,
    Task,
    TaskStatus,
)

S = TaskStatus
WORKER_ONLY = frozenset({TargetType.WORKER})


async def _lease_for(
    store: Store,
    tenant_id: str,
    queue: str,
    limit: int = 100,
    *,
    names: list[str] | None = None,
) -> list[Lease]:
    """A claim shaped like the lease API's: one tenant, one queue, worker tasks."""
    return await store.task_claim(
        ClaimRequest(
            worker_id="w1",
            limit=limit,
            target_types=WORKER_ONLY,
            lease_seconds=30.0,
            queue=queue,
            names=names,
            tenant_id=tenant_id,
        )
    )


async def _dispatch(store: Store, limit: int = 100) -> list[Lease]:
    """A claim shaped like the dispatcher's: every tenant and queue, push targets."""
    return await _claim(store, limit, types=PUSH_TYPES)


def _ids(leases: list[Lease]) -> set[str]:
    return {lease.task.id for lease in leases}


async def _tasks(store: Store, tenant_id: str, n: int, **fields: Any) -> list[Task]:
    return [await _create(store, tenant_id, **fields) for _ in range(n)]


# -- signals: many waiters -------------------------------------------------------------------------


async def test_signal_wait_after_serves_many_waiters(store: Store, clock: FakeClock) -> None:
    """Signal.wait_after: True once the generation moved past the one read, False after the
    timeout; every waiter wakes on one notify, and nothing is consumed (``wait`` still sees the
    notification)."""
    signal = store.ready_signal
    await _drain(signal)
    seen = signal.generation
    assert await signal.wait_after(seen, 0.05) is False
    waiters = [asyncio.ensure_future(signal.wait_after(seen, 5.0)) for _ in range(3)]
    await asyncio.sleep(0.01)
    assert not any(w.done() for w in waiters)
    a = await _tenant(store)
    await _create(store, a, target=HTTP)  # makes a ready push task: fires ready_signal
    assert await asyncio.wait_for(asyncio.gather(*waiters), 5.0) == [True, True, True]
    assert signal.generation != seen
    assert await signal.wait_after(seen, 0) is True  # already moved: no waiting
    assert await signal.wait(0.05) is True  # the flag of ``wait`` was left alone
    before = signal.generation
    signal.notify()
    assert signal.generation != before


# -- claims: tenant --------------------------------------------------------------------------------


async def test_claim_narrows_to_one_tenant(store: Store, clock: FakeClock) -> None:
    """task_claim: tenant_id narrows the claim; None claims for every tenant."""
    a, b = await _tenant(store, "a"), await _tenant(store, "b")
    a1 = await _create(store, a, queue="q")
    b1 = await _create(store, b, queue="q")
    a2 = await _create(store, a, queue="q", target=HTTP)
    assert _ids(await _lease_for(store, b, "q")) == {b1.id}
    assert _ids(await _lease_for(store, b, "q")) == set()
    mine = await store.task_claim(
        ClaimRequest(worker_id="w", limit=10, target_types=ALL_TYPES, tenant_id=a)
    )
    assert _ids(mine) == {a1.id, a2.id}
    assert all(lease.task.tenant_id == a for lease in mine)


# -- claims: paused queues -------------------------------------------------------------------------


async def test_paused_queue_is_neither_dispatched_nor_leased(
    store: Store, clock: FakeClock
) -> None:
    """task_claim: no task of a paused queue is claimed, by any kind of claim; the same queue
    name of another tenant, and the tenant's other queues, are unaffected."""
    a, b = await _tenant(store, "a"), await _tenant(store, "b")
    await store.queue_put(a, "q", QueueSettings(paused=True))
    held_worker = await _create(store, a, queue="q")
    held_http = await _create(store, a, queue="q", target=HTTP)
    other_queue = await _create(store, a, queue="r", target=HTTP)
    other_tenant = await _create(store, b, queue="q", target=HTTP)

    assert await _lease_for(store, a, "q") == []
    assert _ids(await _dispatch(store)) == {other_queue.id, other_tenant.id}
    assert await _claim(store, 100) == []  # every type, every queue
    for task in (held_worker, held_http):
        assert (await _get(store, task)).status is S.READY


async def test_resuming_a_queue_releases_its_tasks(store: Store, clock: FakeClock) -> None:
    """queue_put: claims made after it returns honour the new settings (a resumed queue's
    tasks are claimable again); it fires ready_signal since waiting tasks may now run."""
    a = await _tenant(store)
    await store.queue_put(a, "q", QueueSettings(paused=True))
    task = await _create(store, a, queue="q")
    assert await _lease_for(store, a, "q") == []
    await _drain(store.ready_signal)
    await store.queue_put(a, "q", QueueSettings(paused=False))
    assert await store.ready_signal.wait(5.0)
    assert _ids(await _lease_for(store, a, "q")) == {task.id}


# -- claims: max_concurrency -----------------------------------------------------------------------


async def test_max_concurrency_caps_running_tasks(store: Store, clock: FakeClock) -> None:
    """task_claim: a claim never makes a queue's running tasks exceed max_concurrency; a slot
    freed by a completion can be claimed again; priority order holds within the queue."""
    a = await _tenant(store)
    await store.queue_put(a, "q", QueueSettings(max_concurrency=2))
    low = await _tasks(store, a, 3, queue="q")
    high = await _create(store, a, queue="q", priority=5)
    first = await _lease_for(store, a, "q", 10)
    assert len(first) == 2
    assert first[0].task.id == high.id
    assert await _lease_for(store, a, "q", 10) == []
    await _succeed(store, first[0])
    again = await _lease_for(store, a, "q", 10)
    assert len(again) == 1
    assert _ids(first[1:] + again) <= {t.id for t in low}


async def test_max_concurrency_counts_every_kind_of_claim(store: Store, clock: FakeClock) -> None:
    """task_claim: running tasks of every target type count against the limit, and claims of
    every shape (dispatcher: any tenant, push; lease API: one tenant, worker) honour it; the same
    queue name of another tenant has no limit."""
    a, b = await _tenant(store, "a"), await _tenant(store, "b")
    await store.queue_put(a, "q", QueueSettings(max_concurrency=3))
    pushed = await _tasks(store, a, 2, queue="q", target=HTTP)
    pulled = await _tasks(store, a, 3, queue="q")
    free = await _tasks(store, b, 4, queue="q")
    dispatched = await _dispatch(store)
    assert _ids(dispatched) == {t.id for t in pushed}
    leased = await _lease_for(store, a, "q")
    assert len(leased) == 1 and _ids(leased) <= {t.id for t in pulled}
    everything = await _claim(store, 100, types=ALL_TYPES, queue="q")
    assert _ids(everything) == {t.id for t in free}  # a's queue is full, b's has no limit
    running = [t for t in pulled if (await _get(store, t)).status is S.RUNNING]
    assert len(running) == 1


async def test_max_concurrency_holds_under_concurrent_claimers(
    store: Store, clock: FakeClock
) -> None:
    """task_claim: the limit holds when many claimers race (and no task is claimed twice)."""
    a = await _tenant(store)
    await store.queue_put(a, "q", QueueSettings(max_concurrency=3))
    await _tasks(store, a, 12, queue="q")
    batches = await asyncio.gather(*(_lease_for(store, a, "q", 2) for _ in range(6)))
    claimed = [lease for batch in batches for lease in batch]
    assert len(claimed) == 3
    assert len(_ids(claimed)) == 3
    dispatcher_too = await asyncio.gather(*(_claim(store, 5) for _ in range(3)))
    assert all(batch == [] for batch in dispatcher_too)


async def test_max_concurrency_with_names_and_limit_removed(store: Store, clock: FakeClock) -> None:
    """task_claim: names narrow a claim on a limited queue too; removing the limit (queue_put
    with max_concurrency None) makes every ready task claimable again."""
    a = await _tenant(store)
    await store.queue_put(a, "q", QueueSettings(max_concurrency=1))
    x = await _create(store, a, queue="q", name="x")
    await _create(store, a, queue="q", name="y")
    await _create(store, a, queue="q", name="y")
    got = await _lease_for(store, a, "q", names=["x"])
    assert _ids(got) == {x.id}
    assert await _lease_for(store, a, "q", names=["y"]) == []
    await store.queue_put(a, "q", QueueSettings())
    assert len(await _lease_for(store, a, "q")) == 2


# -- task_leases_get -------------------------------------------------------------------------------


async def test_leases_get_returns_current_leases_only(store: Store, clock: FakeClock) -> None:
    """task_leases_get: leases of running tasks (expired ones too, until ended), per tenant
    when asked; ended, unknown and malformed ids are absent."""
    a, b = await _tenant(store, "a"), await _tenant(store, "b")
    await _tasks(store, a, 3, queue="q")
    other = await _create(store, b, queue="q")
    leases = await _lease_for(store, a, "q")
    (theirs,) = await _lease_for(store, b, "q")
    assert theirs.task.id == other.id
    ended, expired, live = leases
    await _succeed(store, ended)
    ids = [lease.lease_id for lease in leases] + [theirs.lease_id, "not-a-uuid"]
    ids.append("00000000-0000-4000-8000-000000000000")
    clock.advance(31)  # every lease has expired; none was reaped
    found = await store.task_leases_get(ids)
    assert set(found) == {expired.lease_id, live.lease_id, theirs.lease_id}
    got = found[live.lease_id]
    assert got.task.id == live.task.id and got.attempt == 1
    assert got.lease_expires_at == live.lease_expires_at
    assert got.task.status is S.RUNNING and got.task.worker_id == "w1"
    mine = await store.task_leases_get(ids, tenant_id=a)
    assert set(mine) == {expired.lease_id, live.lease_id}
    assert await store.task_leases_get([], tenant_id=a) == {}


# -- queues ----------------------------------------------------------------------------------------


async def test_queue_put_get_list(store: Store, clock: FakeClock) -> None:
    """queue_put: creates or replaces every setting, updated_at = now; queue_get: None when
    never configured; queue_list: the tenant's configured queues by name."""
    a, b = await _tenant(store, "a"), await _tenant(store, "b")
    assert await store.queue_get(a, "q") is None
    settings = QueueSettings(
        rate_limit_per_second=2.5,
        burst=10,
        max_concurrency=4,
        max_concurrency_per_key=1,
        paused=True,
    )
    made = await store.queue_put(a, "q", settings)
    assert (made.tenant_id, made.name, made.settings) == (a, "q", settings)
    assert made.updated_at == clock.now()
    assert await store.queue_get(a, "q") == made
    clock.advance(5)
    replaced = await store.queue_put(a, "q", QueueSettings(max_concurrency=7))
    assert replaced.settings == QueueSettings(max_concurrency=7)
    assert replaced.updated_at == clock.now()
    await store.queue_put(a, "a-first", QueueSettings())
    await store.queue_put(b, "q", QueueSettings(paused=True))
    assert [q.name for q in await store.queue_list(a)] == ["a-first", "q"]
    assert (await store.queue_get(a, "q")) == replaced
    assert [q.settings.paused for q in await store.queue_list(b)] == [True]


async def test_queue_stats(store: Store, clock: FakeClock) -> None:
    """queue_stats: counts by status of the tenant's queues that hold tasks, by name; running;
    the oldest ready task's lag by the store's clock (None with nothing ready); one queue."""
    a, b = await _tenant(store, "a"), await _tenant(store, "b")
    t0 = clock.now()
    await _tasks(store, a, 2, queue="q")
    await _create(store, a, queue="q", run_at=t0 + _secs(60))
    (lease,) = await _lease_for(store, a, "q", 1)
    await _create(store, a, queue="r", run_at=t0 + _secs(60))
    await _create(store, b, queue="q")
    await store.queue_put(a, "configured-only", QueueSettings())
    clock.advance(2.5)
    await _create(store, a, queue="q")  # due now: the older one is still the oldest

    q, r = await store.queue_stats(a)
    assert (q.tenant_id, q.name, r.name) == (a, "q", "r")
    assert dict(q.counts) == {S.READY: 2, S.SCHEDULED: 1, S.RUNNING: 1}
    assert q.running == 1
    assert q.oldest_due_lag_seconds is not None
    assert abs(q.oldest_due_lag_seconds - 2.5) < 1e-3
    assert dict(r.counts) == {S.SCHEDULED: 1} and r.oldest_due_lag_seconds is None
    assert r.running == 0
    await _complete(store, _completion(lease))
    (only,) = await store.queue_stats(a, "q")
    assert dict(only.counts) == {S.READY: 2, S.SCHEDULED: 1, S.SUCCEEDED: 1}
    assert await store.queue_stats(a, "configured-only") == []
    assert [s.name for s in await store.queue_stats(b)] == ["q"]


# -- workers ---------------------------------------------------------------------------------------


async def test_workers_seen_and_listed(store: Store, clock: FakeClock) -> None:
    """worker_seen/worker_list: first and last seen, the queues polled (accumulated), held
    leases = the tenant's running tasks under the worker id; only workers seen within the
    window; per tenant."""
    a, b = await _tenant(store, "a"), await _tenant(store, "b")
    t0 = clock.now()
    await store.worker_seen(a, "w1", ["emails"])
    await store.worker_seen(a, "gone", ["emails"])
    await store.worker_seen(b, "w1", ["other"])
    clock.advance(100)
    await store.worker_seen(a, "w1", ["default", "emails"])
    await store.worker_seen(a, "w2", [])
    await _tasks(store, a, 3, queue="default")
    await _lease_for(store, a, "default", 2)  # worker id "w1"
    await _create(store, a, queue="default", target=HTTP)
    await _claim(store, 10, types=PUSH_TYPES, worker="w2")  # a push claim is no worker lease

    w1, w2 = await store.worker_list(a, live_within_seconds=60)
    assert (w1.tenant_id, w1.worker_id, w2.worker_id) == (a, "w1", "w2")
    assert w1.queues == ("default", "emails") and w2.queues == ()
    assert w1.first_seen_at == t0 and w1.last_seen_at == clock.now()
    assert (w1.leases, w2.leases) == (2, 0)
    everyone = await store.worker_list(a, live_within_seconds=1000)
    assert [w.worker_id for w in everyone] == ["gone", "w1", "w2"]
    (theirs,) = await store.worker_list(b, live_within_seconds=1000)
    assert theirs.queues == ("other",) and theirs.leases == 0


__all__ = [name for name in dir() if name.startswith("test_")]
