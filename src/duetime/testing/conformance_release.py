"""Store conformance for handing a lease back without an attempt (``task_release`` in
:mod:`duetime.store.protocols`), run unchanged against every backend.

Use it like :mod:`duetime.testing.conformance`, given ``store`` and ``clock`` fixtures::

    from duetime.testing.conformance_release import *  # noqa: F403
"""

from __future__ import annotations

from duetime.clock import FakeClock
from duetime.lifecycle.release import release
from duetime.store.protocols import Store
from duetime.testing.conformance import (
    _claim_one,
    _complete,
    _completion,
    _create,
    _get,
    _tenant,
)
from duetime.types import TaskStatus

S = TaskStatus


async def test_release_hands_the_task_back_without_spending_the_attempt(store: Store) -> None:
    tenant = await _tenant(store)
    task = await _create(store, tenant, name="a")
    lease = await _claim_one(store, task)
    assert (await _get(store, task)).attempts == 1
    released = await release(store, [lease.lease_id])
    assert released[lease.lease_id].task_id == task.id
    assert released[lease.lease_id].status is S.READY
    after = await _get(store, task)
    assert (after.status, after.attempts, after.lease_id, after.worker_id) == (
        S.READY,
        0,
        None,
        None,
    )
    assert await store.attempt_list(tenant, task.id) == []  # no attempt was recorded
    # The lease is stale now: a second release or a completion under it changes nothing.
    assert await release(store, [lease.lease_id]) == {}
    assert not (await _complete(store, _completion(lease))).accepted
    again = await _claim_one(store, task)
    assert again.attempt == 1 and again.lease_id != lease.lease_id


async def test_release_with_a_delay_waits_until_then(store: Store, clock: FakeClock) -> None:
    tenant = await _tenant(store)
    task = await _create(store, tenant, name="b")
    lease = await _claim_one(store, task)
    released = await release(store, [lease.lease_id], 30)
    assert released[lease.lease_id].status is S.SCHEDULED
    after = await _get(store, task)
    assert after.status is S.SCHEDULED and after.attempts == 0
    assert (after.due_at - clock.now()).total_seconds() == 30
    assert await store.task_promote_due(100) == 0
    clock.advance(30)
    assert await store.task_promote_due(100) == 1
    assert (await _get(store, task)).status is S.READY


async def test_release_is_fenced_by_lease_and_tenant(store: Store) -> None:
    tenant = await _tenant(store)
    other = await _tenant(store, "other")
    task = await _create(store, tenant, name="c")
    lease = await _claim_one(store, task)
    assert await release(store, [lease.lease_id], tenant_id=other) == {}
    assert await release(store, ["not-a-uuid", "0190c6f2-0000-7000-8000-000000000000"]) == {}
    assert (await _get(store, task)).status is S.RUNNING
    assert set(await release(store, [lease.lease_id, lease.lease_id], tenant_id=tenant)) == {
        lease.lease_id
    }


async def test_a_task_whose_cancel_was_requested_is_not_handed_back(store: Store) -> None:
    tenant = await _tenant(store)
    task = await _create(store, tenant, name="d")
    lease = await _claim_one(store, task)
    await store.task_cancel(tenant, task.id)
    assert await release(store, [lease.lease_id]) == {}
    assert (await _get(store, task)).status is S.RUNNING


async def test_release_takes_one_delay_per_lease(store: Store, clock: FakeClock) -> None:
    tenant = await _tenant(store)
    tasks = [await _create(store, tenant, name=f"e{i}") for i in range(2)]
    leases = [await _claim_one(store, t) for t in tasks]
    released = await release(store, [lease.lease_id for lease in leases], [0, 5])
    assert [released[lease.lease_id].status for lease in leases] == [S.READY, S.SCHEDULED]
    assert ((await _get(store, tasks[1])).due_at - clock.now()).total_seconds() == 5


async def test_release_of_many_leases_in_one_call(store: Store, clock: FakeClock) -> None:
    """task_release: a batch hands back every live lease at its own delay and skips the rest
    (ended, repeated, not a UUID), keyed by the lease ids as given (any letter case)."""
    tenant = await _tenant(store)
    tasks = [await _create(store, tenant, name=f"m{i}") for i in range(5)]
    leases = [await _claim_one(store, t) for t in tasks]
    await _complete(store, _completion(leases[4]))  # ended: stale
    asked = [lease.lease_id for lease in leases[:3]] + [leases[3].lease_id.upper()]
    asked += [leases[4].lease_id, leases[0].lease_id, "not-a-uuid"]
    released = await release(store, asked, [0, 3, 0, 7, 0, 9, 0])
    assert set(released) == set(asked[:4])
    assert [released[k].status for k in asked[:4]] == [S.READY, S.SCHEDULED, S.READY, S.SCHEDULED]
    assert [released[k].task_id for k in asked[:4]] == [t.id for t in tasks[:4]]
    due = [((await _get(store, t)).due_at - clock.now()).total_seconds() for t in tasks[:4]]
    assert due == [0, 3, 0, 7]  # the first delay given for a repeated lease
    assert (await _get(store, tasks[0])).attempts == 0


async def test_cancel_requested_names_running_tasks_only(store: Store) -> None:
    tenant = await _tenant(store)
    running = await _create(store, tenant, name="f")
    waiting = await _create(store, tenant, name="g")
    await _claim_one(store, running)
    assert await store.task_cancel_requested([running.id, waiting.id, "nope"]) == set()
    await store.task_cancel(tenant, running.id)
    await store.task_cancel(tenant, waiting.id)  # cancelled at once: not running
    assert await store.task_cancel_requested([running.id, waiting.id]) == {running.id}
