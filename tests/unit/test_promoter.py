"""The promoter one round at a time: on the SQLite store in memory (promotion has rules: a fake
would be a second copy of them) and a fake leadership, with a pinned clock."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest

from duetime.clock import FakeClock
from duetime.engine.leader import Leader
from duetime.engine.promoter import Promoter
from duetime.store import Store
from duetime.testing.fakes import FakeLeadership, memory_store
from duetime.types import NewTask, TaskStatus

WORKER = {"type": "worker"}


@pytest.fixture
async def store(clock: FakeClock) -> AsyncIterator[Store]:
    async with memory_store(clock) as s:
        yield s


async def create(store: Store, tenant: str, due_in: float) -> str:
    run_at = await store.now() + timedelta(seconds=due_in)
    [made] = await store.task_create_many([NewTask(tenant_id=tenant, target=WORKER, run_at=run_at)])
    return made.task.id


async def status_of(store: Store, tenant: str, task_id: str) -> TaskStatus:
    task = await store.task_get(tenant, task_id)
    assert task is not None
    return task.status


async def leader_for(clock: FakeClock, leadership: FakeLeadership | None = None) -> Leader:
    leader = Leader(leadership or FakeLeadership(clock), "node-a", ttl_seconds=10, clock=clock)
    assert await leader.run_once() == 1
    return leader


async def test_promoter_moves_only_due_tasks(store: Store, clock: FakeClock) -> None:
    tenant = (await store.tenant_create("acme")).id
    soon = await create(store, tenant, 5)
    later = await create(store, tenant, 60)
    promoter = Promoter(store, await leader_for(clock), clock, batch=1, poll_interval=1)
    assert await promoter.run_once() == 0
    clock.advance(5)
    assert await promoter.run_once() == 1
    assert await status_of(store, tenant, soon) == TaskStatus.READY
    assert await status_of(store, tenant, later) == TaskStatus.SCHEDULED


async def test_promoter_works_through_every_batch(store: Store, clock: FakeClock) -> None:
    tenant = (await store.tenant_create("acme")).id
    for _ in range(5):
        await create(store, tenant, 1)
    promoter = Promoter(store, await leader_for(clock), clock, batch=2, poll_interval=1)
    clock.advance(1)
    assert await promoter.run_once() == 5


async def test_only_the_leader_promotes(store: Store, clock: FakeClock) -> None:
    tenant = (await store.tenant_create("acme")).id
    task_id = await create(store, tenant, 1)
    leadership = FakeLeadership(clock)
    await leader_for(clock, leadership)
    follower = Leader(leadership, "node-b", ttl_seconds=10, clock=clock)
    assert await follower.run_once() == 0
    clock.advance(1)
    assert await Promoter(store, follower, clock, batch=10, poll_interval=1).run_once() == 0
    assert await status_of(store, tenant, task_id) == TaskStatus.SCHEDULED


async def test_a_leading_promoter_sleeps_through_creates_due_after_it_wakes(
    store: Store, clock: FakeClock
) -> None:
    """While the leader's promoter sleeps it publishes when it wakes anyway (the due signal's
    horizon): creates due after that do not wake it, one due sooner does, and a follower
    publishes nothing (its node's creates must reach the leader)."""
    tenant = (await store.tenant_create("acme")).id
    await create(store, tenant, 30)
    promoter = Promoter(store, await leader_for(clock), clock, batch=10, poll_interval=5)
    assert await promoter.run_once() == 0
    while await store.due_signal.wait(0):  # the create's own wake-up
        pass
    sleeping = asyncio.ensure_future(promoter.wait(0))
    await asyncio.sleep(0.05)
    assert store.due_signal.horizon == await store.now() + timedelta(seconds=5)
    await create(store, tenant, 6)  # after the poll: the promoter is up by then
    await asyncio.sleep(0.05)
    assert not sleeping.done()
    await create(store, tenant, 2)
    await asyncio.wait_for(sleeping, 5)
    assert store.due_signal.horizon is None

    follower = Leader(FakeLeadership(clock), "node-b", ttl_seconds=10, clock=clock)
    waiting = asyncio.ensure_future(
        Promoter(store, follower, clock, batch=10, poll_interval=5).wait(0)
    )
    await asyncio.sleep(0.05)
    assert store.due_signal.horizon is None
    await create(store, tenant, 600)
    await asyncio.wait_for(waiting, 5)
