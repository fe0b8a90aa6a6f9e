"""A task cancelled while its webhook is being delivered: the dispatcher stops the delivery
(the request is abandoned mid-flight) and the task ends ``cancelled`` at once."""

from __future__ import annotations

import asyncio

from duetime.clock import FakeClock
from duetime.delivery.base import Delivery, Outcome
from duetime.engine.dispatcher import Dispatcher
from duetime.store import Store
from duetime.testing.fakes import FakeDeliverer
from duetime.types import AttemptOutcome, NewTask, TargetType, TaskStatus

HTTP = {"type": "http", "url": "http://127.0.0.1:9/slow", "method": "POST", "headers": {}}


async def test_cancel_stops_a_delivery_under_way(store: Store, clock: FakeClock) -> None:
    tenant = (await store.tenant_create("acme")).id
    [slow, other] = await store.task_create_many(
        [NewTask(tenant_id=tenant, target=HTTP), NewTask(tenant_id=tenant, target=HTTP)]
    )
    started = asyncio.Event()
    aborted: list[str] = []
    was_aborted = asyncio.Event()
    release = asyncio.Event()

    async def hang(delivery: Delivery) -> Outcome:
        started.set()
        try:
            await release.wait()  # a target that does not answer
        except asyncio.CancelledError:
            aborted.append(delivery.task.id)
            was_aborted.set()
            raise
        return Outcome(AttemptOutcome.SUCCEEDED, retryable=False, http_status=204)

    d = Dispatcher(
        store,
        {TargetType.HTTP: FakeDeliverer(hang)},
        clock,
        node_id="node-a",
        concurrency=8,
        batch=8,
        poll_interval=3600,  # the test runs the check itself
        lease_grace=5,
    )
    await d.start()
    assert await d.run_once() == 2
    await asyncio.wait_for(started.wait(), 5)
    assert await d.stop_cancelled() == 0  # nothing cancelled yet
    await store.task_cancel(tenant, slow.task.id)
    assert await d.stop_cancelled() == 1
    await asyncio.wait_for(was_aborted.wait(), 10)
    assert aborted == [slow.task.id]
    release.set()  # the other delivery answers normally
    await d.drain(grace=5)
    ended = await store.task_get(tenant, slow.task.id)
    assert ended is not None and ended.status is TaskStatus.CANCELLED
    [attempt] = await store.attempt_list(tenant, slow.task.id)
    assert attempt.error == "cancelled during delivery"
    fine = await store.task_get(tenant, other.task.id)
    assert fine is not None and fine.status is TaskStatus.SUCCEEDED
