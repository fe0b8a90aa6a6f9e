"""Store conformance for flow control (SPEC §7): the rate limit's token bucket, the per-key
limit's serial order, the wake-up a limited queue's finished task owes its claimers, and push
claims shared across tenants by weight. Run unchanged against every backend, given ``store``
and ``clock`` fixtures::

    from duetime.testing.conformance_flow import *  # noqa: F403
"""

from __future__ import annotations

from collections import Counter

from duetime.clock import FakeClock
from duetime.store.protocols import Store
from duetime.target_types import PUSH_TYPES
from duetime.testing.conformance import HTTP, _create, _drain, _succeed, _tenant
from duetime.testing.conformance_queues import _dispatch, _ids, _lease_for, _tasks
from duetime.types import ClaimRequest, Lease, QueueSettings, Task, TenantQuotas


def _ids_of(tasks: list[Task]) -> set[str]:
    return {t.id for t in tasks}


def _tenants(leases: list[Lease]) -> Counter[str]:
    return Counter(lease.task.tenant_id for lease in leases)


# -- rate limit: a token bucket in the queue's row ----------------------------------------------


async def test_rate_limit_takes_tokens_and_refills_with_time(
    store: Store, clock: FakeClock
) -> None:
    """task_claim: a rate-limited queue hands out at most ``burst`` at once, then one per
    1/rate seconds of the store's clock; lease and dispatcher claims take from one bucket."""
    a = await _tenant(store)
    await store.queue_put(a, "q", QueueSettings(rate_limit_per_second=2.0, burst=3))
    await _tasks(store, a, 10, queue="q")
    await _tasks(store, a, 4, queue="q", target=HTTP)
    assert len(await _lease_for(store, a, "q", 10)) == 3
    assert await _lease_for(store, a, "q", 10) == []
    assert await _dispatch(store) == []
    clock.advance(1.0)  # two tokens
    assert len(await _dispatch(store)) == 2
    clock.advance(0.25)  # half a token
    assert await _lease_for(store, a, "q", 10) == []
    clock.advance(0.25)
    assert len(await _lease_for(store, a, "q", 10)) == 1
    clock.advance(60)  # the bucket holds burst tokens at most
    assert len(await _lease_for(store, a, "q", 10)) == 3


async def test_rate_limit_default_burst_is_one_second(store: Store, clock: FakeClock) -> None:
    """task_claim: without ``burst`` the bucket holds one second's worth (at least one); a new
    rate starts from a full bucket."""
    a = await _tenant(store)
    await store.queue_put(a, "q", QueueSettings(rate_limit_per_second=4.0))
    await _tasks(store, a, 20, queue="q")
    assert len(await _lease_for(store, a, "q", 20)) == 4
    await store.queue_put(a, "q", QueueSettings(rate_limit_per_second=0.5))
    assert len(await _lease_for(store, a, "q", 20)) == 1
    assert await _lease_for(store, a, "q", 20) == []
    clock.advance(2.0)
    assert len(await _lease_for(store, a, "q", 20)) == 1
    # The same settings again keep the bucket as it is.
    await store.queue_put(a, "q", QueueSettings(rate_limit_per_second=0.5))
    assert await _lease_for(store, a, "q", 20) == []


# -- max_concurrency_per_key -------------------------------------------------------------------


async def test_per_key_limit_runs_a_keys_tasks_one_at_a_time_in_order(
    store: Store, clock: FakeClock
) -> None:
    """task_claim: with ``max_concurrency_per_key=1`` each key has at most one task running,
    taken in priority, due, creation order; other keys and tasks without a key run alongside."""
    a = await _tenant(store)
    await store.queue_put(a, "q", QueueSettings(max_concurrency_per_key=1))
    k1 = [await _create(store, a, queue="q", concurrency_key="k1") for _ in range(3)]
    urgent = await _create(store, a, queue="q", concurrency_key="k1", priority=5)
    k2 = [await _create(store, a, queue="q", concurrency_key="k2") for _ in range(2)]
    free = await _tasks(store, a, 2, queue="q")
    first = await _lease_for(store, a, "q", 100)
    assert _ids(first) == {urgent.id, k2[0].id, *(t.id for t in free)}
    assert await _lease_for(store, a, "q", 100) == []
    head = next(lease for lease in first if lease.task.id == urgent.id)
    for task in k1:  # each end of k1's running task lets exactly its next one start
        await _succeed(store, head)
        (head,) = await _lease_for(store, a, "q", 100)
        assert head.task.id == task.id
    await _succeed(store, head)
    assert await _lease_for(store, a, "q", 100) == []


async def test_per_key_limit_with_max_concurrency(store: Store, clock: FakeClock) -> None:
    """task_claim: both limits hold together, for push claims too."""
    a = await _tenant(store)
    await store.queue_put(a, "q", QueueSettings(max_concurrency=3, max_concurrency_per_key=2))
    for key in ("x", "y"):
        await _tasks(store, a, 3, queue="q", concurrency_key=key, target=HTTP)
    got = await _dispatch(store)
    assert len(got) == 3
    assert max(Counter(lease.task.concurrency_key for lease in got).values()) == 2
    await _succeed(store, got[0])
    more = await _dispatch(store)
    assert len(more) == 1
    running = [*got[1:], *more]
    assert max(Counter(lease.task.concurrency_key for lease in running).values()) <= 2


# -- a limited queue flows ---------------------------------------------------------------------


async def test_a_limited_queues_finished_task_wakes_claimers(
    store: Store, clock: FakeClock
) -> None:
    """complete: when a task of a limited queue stops running, ready_signal fires (its next
    task may start now, not on the next poll)."""
    a = await _tenant(store)
    await store.queue_put(a, "q", QueueSettings(max_concurrency=1))
    await _tasks(store, a, 2, queue="q")
    (lease,) = await _lease_for(store, a, "q")
    await _drain(store.ready_signal)
    await _succeed(store, lease)
    assert await store.ready_signal.wait(5.0)
    assert len(await _lease_for(store, a, "q")) == 1


# -- tenant fairness -----------------------------------------------------------------------------


async def test_push_claims_are_shared_across_tenants(store: Store, clock: FakeClock) -> None:
    """task_claim (push): tenants with ready work share a claim equally, whatever the other's
    backlog or priorities; a short backlog leaves its share to the others."""
    a, b, c = await _tenant(store, "a"), await _tenant(store, "b"), await _tenant(store, "c")
    await _tasks(store, a, 40, target=HTTP, priority=100)
    await _tasks(store, b, 40, target=HTTP)
    await _tasks(store, c, 2, target=HTTP)
    got = _tenants(await _dispatch(store, 20))
    # c's two leave the rest to a and b, split evenly (an odd one goes to either).
    assert (got[c], got[a] + got[b]) == (2, 18) and abs(got[a] - got[b]) <= 1, got


async def test_push_claims_follow_tenant_weights(store: Store, clock: FakeClock) -> None:
    """task_claim (push): shares follow the tenants' weights; excluded tenants get none."""
    a, b = await _tenant(store, "a"), await _tenant(store, "b")
    await store.tenant_quotas_put(b, TenantQuotas(weight=3))
    await _tasks(store, a, 40, target=HTTP, priority=100)
    await _tasks(store, b, 40, target=HTTP)
    assert _tenants(await _dispatch(store, 8)) == {a: 2, b: 6}
    only_b = await store.task_claim(
        ClaimRequest(worker_id="w", limit=8, target_types=PUSH_TYPES, tenant_room={a: 0})
    )
    assert _tenants(only_b) == {b: 8}
    # A tenant's room bounds its part; the rest goes to the others.
    capped = await store.task_claim(
        ClaimRequest(worker_id="w", limit=8, target_types=PUSH_TYPES, tenant_room={b: 1})
    )
    assert _tenants(capped) == {a: 7, b: 1}
    none_new = await store.task_claim(
        ClaimRequest(worker_id="w", limit=8, target_types=PUSH_TYPES, other_tenant_room=0)
    )
    assert none_new == []
    # Within a tenant, priority and due order still hold.
    top = await _create(store, b, target=HTTP, priority=9)
    assert top.id in _ids(await _dispatch(store, 2))


async def test_push_claims_keep_priority_across_a_tenants_queues(
    store: Store, clock: FakeClock
) -> None:
    """task_claim (push): a tenant's share is taken in priority and due order across all its
    queues; the backlog of its paused and limited queues does not stand in the way, and a
    limited queue still gets its room."""
    a = await _tenant(store, "a")
    await store.queue_put(a, "held", QueueSettings(paused=True))
    await store.queue_put(a, "limited", QueueSettings(max_concurrency=2))
    await _tasks(store, a, 30, queue="held", target=HTTP, priority=50)
    await _tasks(store, a, 30, queue="limited", target=HTTP, priority=50)
    low = await _tasks(store, a, 3, queue="x", target=HTTP, priority=1)
    high = await _tasks(store, a, 2, queue="y", target=HTTP, priority=7)
    mid = await _tasks(store, a, 2, queue="z", target=HTTP, priority=3)
    got = await _dispatch(store, 4)
    ids = [lease.task.id for lease in got]
    assert [set(ids[:2]), set(ids[2:])] == [_ids_of(high), _ids_of(mid)]  # in claim order
    rest = await _dispatch(store, 10)
    assert {lease.task.id for lease in rest if lease.task.queue == "x"} == _ids_of(low)
    assert [lease.task.queue for lease in rest].count("limited") == 2
    assert len(rest) == 5


# -- tenant quota: max_concurrency ---------------------------------------------------------------


async def test_a_new_tenant_quota_bounds_the_next_claim(store: Store, clock: FakeClock) -> None:
    """tenant_quotas_put: the very next claim on this node follows a new ``max_concurrency``
    (no cache of quota-holding tenants outlives the change)."""
    a = await _tenant(store, "a")
    await _tasks(store, a, 6, target=HTTP)
    assert len(await _dispatch(store, 1)) == 1  # the store has looked for quotas: none
    await store.tenant_quotas_put(a, TenantQuotas(max_concurrency=2))
    assert len(await _dispatch(store)) == 1  # one already runs


async def test_tenant_max_concurrency_bounds_every_claim(store: Store, clock: FakeClock) -> None:
    """task_claim: a tenant's ``max_concurrency`` quota bounds its running tasks over push
    claims, leases and limited queues alike; another tenant is not bound; a finished task of
    the tenant wakes claimers."""
    a, b = await _tenant(store, "a"), await _tenant(store, "b")
    await store.tenant_quotas_put(a, TenantQuotas(max_concurrency=3))
    await store.queue_put(a, "limited", QueueSettings(max_concurrency=10))
    await _tasks(store, a, 2, target=HTTP)
    await _tasks(store, a, 2, queue="q")
    await _tasks(store, a, 2, queue="limited", target=HTTP)
    await _tasks(store, b, 5, target=HTTP)
    pushed = await _dispatch(store)
    assert _tenants(pushed) == {a: 3, b: 5}
    assert await _lease_for(store, a, "q") == []
    await _drain(store.ready_signal)
    mine = next(lease for lease in pushed if lease.task.tenant_id == a)
    await _succeed(store, mine)
    assert await store.ready_signal.wait(5.0)
    assert len(await _lease_for(store, a, "q")) == 1
    assert await _dispatch(store) == []
