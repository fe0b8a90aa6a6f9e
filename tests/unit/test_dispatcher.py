"""The dispatcher's own logic on the SQLite store in memory (claims and completions have rules: a
fake would be a second copy of them) and a fake deliverer: which tasks it takes, and how it
batches claims while saturated. What deliveries do to tasks is ``tests/engine``'s."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from duetime.clock import FakeClock
from duetime.delivery.base import Delivery, Outcome
from duetime.engine.dispatcher import Dispatcher
from duetime.store import Store
from duetime.testing.fakes import FakeDeliverer, memory_store
from duetime.types import AttemptOutcome, NewTask, TargetType, TaskStatus

HTTP = {"type": "http", "url": "http://127.0.0.1:9/hook", "method": "POST", "headers": {}}


@pytest.fixture
async def store(clock: FakeClock) -> AsyncIterator[Store]:
    async with memory_store(clock) as s:
        yield s


async def create(store: Store, tenant: str, target: dict[str, object] = HTTP) -> str:
    [made] = await store.task_create_many([NewTask(tenant_id=tenant, target=target)])
    return made.task.id


def dispatcher(
    store: Store, clock: FakeClock, deliverer: FakeDeliverer, *, concurrency: int = 16
) -> Dispatcher:
    return Dispatcher(
        store,
        {TargetType.HTTP: deliverer},
        clock,
        node_id="node-a",
        concurrency=concurrency,
        batch=8,
        poll_interval=0.01,
        lease_grace=5,
    )


async def test_dispatcher_leaves_worker_tasks_alone(store: Store, clock: FakeClock) -> None:
    tenant = (await store.tenant_create("acme")).id
    task_id = await create(store, tenant, {"type": "worker"})
    d = dispatcher(store, clock, FakeDeliverer())
    await d.start()
    assert await d.run_once() == 0
    await d.drain(grace=5)
    task = await store.task_get(tenant, task_id)
    assert task is not None and task.status == TaskStatus.READY


async def test_saturated_dispatcher_claims_a_batch_not_single_tasks(
    store: Store, clock: FakeClock
) -> None:
    """With every slot busy, the dispatcher waits for a quarter of its slots before claiming
    again, so a busy node pays one store round trip per batch, not per freed slot. (Two
    tenants: one alone never fills the slots, a quarter is kept for others.)"""
    for name in ("acme", "globex"):
        tenant = (await store.tenant_create(name)).id
        for _ in range(6):
            await create(store, tenant)
    gates: list[asyncio.Event] = []
    started = asyncio.Semaphore(0)

    async def held(_: Delivery) -> Outcome:
        gate = asyncio.Event()
        gates.append(gate)
        started.release()
        await gate.wait()
        return Outcome(AttemptOutcome.SUCCEEDED, retryable=False, http_status=200)

    d = dispatcher(store, clock, FakeDeliverer(held), concurrency=8)
    await d.start()
    assert await d.run_once() == 8
    for _ in range(8):
        await started.acquire()
    waiting = asyncio.create_task(d.wait(8))
    gates[0].set()
    await asyncio.sleep(0.05)
    assert not waiting.done(), "one free slot of eight is not worth a claim"
    gates[1].set()
    await asyncio.wait_for(waiting, 10)
    assert await d.run_once() == 2
    for _ in range(2):
        await started.acquire()
    for gate in gates:
        gate.set()
    await d.drain(grace=5)


async def test_busy_means_a_quarter_of_the_slots_not_a_trickle(
    store: Store, clock: FakeClock
) -> None:
    """The history round waits while :meth:`Dispatcher.busy`: a claim of a quarter of the slots
    (here 4 of 16) counts for half a second; a single task does not."""
    tenant = (await store.tenant_create("acme")).id
    d = dispatcher(store, clock, FakeDeliverer())
    told: list[float] = []
    d.on_busy = told.append  # a dispatcher process tells the node process this way
    await d.start()
    await create(store, tenant)
    assert await d.run_once() == 1
    await d.drain(grace=5)
    assert not d.busy() and told == []
    for _ in range(4):
        await create(store, tenant)
    assert await d.run_once() == 4
    await d.drain(grace=5)
    assert d.inflight == 0 and d.busy() and len(told) == 1
    clock.advance(0.6)
    assert not d.busy()
