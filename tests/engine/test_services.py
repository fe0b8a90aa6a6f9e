"""Engine services one round at a time, on both stores, with a pinned clock and a fake deliverer."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from duetime.clock import FakeClock, SystemClock
from duetime.config import Settings
from duetime.delivery.base import Delivery, Outcome
from duetime.engine.dispatcher import Dispatcher
from duetime.engine.engine import Engine
from duetime.engine.leader import Leader
from duetime.engine.promoter import Promoter
from duetime.engine.reaper import Reaper
from duetime.store import Store, store_from_url
from duetime.testing.fakes import FakeDeliverer
from duetime.types import (
    AttemptOutcome,
    ClaimRequest,
    Completion,
    NewTask,
    RetryPolicy,
    TargetType,
    TaskStatus,
)

HTTP = {"type": "http", "url": "http://127.0.0.1:9/hook", "method": "POST", "headers": {}}


async def make_tenant(store: Store) -> str:
    tenant = await store.tenant_create("acme")
    return tenant.id


async def create(store: Store, tenant: str, **fields: object) -> str:
    fields.setdefault("target", HTTP)
    [made] = await store.task_create_many([NewTask(tenant_id=tenant, **fields)])  # type: ignore[arg-type]
    return made.task.id


async def status_of(store: Store, tenant: str, task_id: str) -> TaskStatus:
    task = await store.task_get(tenant, task_id)
    assert task is not None
    return task.status


def dispatcher(store: Store, clock: FakeClock, deliverer: FakeDeliverer) -> Dispatcher:
    return Dispatcher(
        store,
        {TargetType.HTTP: deliverer},
        clock,
        node_id="node-a",
        concurrency=16,
        batch=8,
        poll_interval=0.01,
        lease_grace=5,
    )


async def leader_for(store: Store, clock: FakeClock, node: str = "node-a") -> Leader:
    leader = Leader(store, node, ttl_seconds=10, clock=clock)
    assert await leader.run_once() == 1
    return leader


async def run_dispatch(d: Dispatcher) -> int:
    """One claim round, then wait for the deliveries and flush their completions."""
    await d.start()
    claimed = await d.run_once()
    await d.drain(grace=5)
    return claimed


async def test_promoter_moves_only_due_tasks(store: Store, clock: FakeClock) -> None:
    tenant = await make_tenant(store)
    soon = await create(store, tenant, run_at=clock.now() + timedelta(seconds=5))
    later = await create(store, tenant, run_at=clock.now() + timedelta(seconds=60))
    promoter = Promoter(store, await leader_for(store, clock), clock, batch=1, poll_interval=1)
    assert await promoter.run_once() == 0
    clock.advance(5)
    assert await promoter.run_once() == 1
    assert await status_of(store, tenant, soon) == TaskStatus.READY
    assert await status_of(store, tenant, later) == TaskStatus.SCHEDULED


async def test_promoter_works_through_every_batch(store: Store, clock: FakeClock) -> None:
    tenant = await make_tenant(store)
    for _ in range(5):
        await create(store, tenant, run_at=clock.now() + timedelta(seconds=1))
    promoter = Promoter(store, await leader_for(store, clock), clock, batch=2, poll_interval=1)
    clock.advance(1)
    assert await promoter.run_once() == 5


async def test_only_the_leader_promotes(store: Store, clock: FakeClock) -> None:
    tenant = await make_tenant(store)
    await create(store, tenant, run_at=clock.now() + timedelta(seconds=1))
    await leader_for(store, clock, "node-a")
    follower = Leader(store, "node-b", ttl_seconds=10, clock=clock)
    assert await follower.run_once() == 0
    clock.advance(1)
    assert await Promoter(store, follower, clock, batch=10, poll_interval=1).run_once() == 0


async def test_leadership_passes_on_after_ttl(store: Store, clock: FakeClock) -> None:
    a = await leader_for(store, clock, "node-a")
    b = Leader(store, "node-b", ttl_seconds=10, clock=clock)
    assert await b.run_once() == 0
    clock.advance(11)
    assert await b.run_once() == 1
    assert await a.run_once() == 0
    assert not a.is_leader and b.is_leader


async def test_dispatch_success_records_attempt(store: Store, clock: FakeClock) -> None:
    tenant = await make_tenant(store)
    task_id = await create(store, tenant, payload_json='{"n": 1}')
    fake = FakeDeliverer()
    assert await run_dispatch(dispatcher(store, clock, fake)) == 1
    [delivery] = fake.deliveries
    assert delivery.task.id == task_id and delivery.attempt == 1
    assert delivery.secrets and delivery.secrets[0].startswith("whsec_")
    task = await store.task_get(tenant, task_id)
    assert task is not None and task.status == TaskStatus.SUCCEEDED
    assert task.result == "ok" and task.attempts == 1
    [attempt] = await store.attempt_list(tenant, task_id)
    assert attempt.outcome == AttemptOutcome.SUCCEEDED and attempt.http_status == 200
    assert attempt.worker == "node-a"


async def test_retryable_failure_backs_off_then_succeeds(store: Store, clock: FakeClock) -> None:
    tenant = await make_tenant(store)
    policy = RetryPolicy(max_attempts=3, initial_delay_seconds=10, jitter=0)
    task_id = await create(store, tenant, retry=policy)
    answers = [
        Outcome(AttemptOutcome.FAILED, retryable=True, http_status=503, error="HTTP 503"),
        Outcome(AttemptOutcome.SUCCEEDED, retryable=False, http_status=204),
    ]
    fake = FakeDeliverer(lambda _: answers.pop(0))
    await run_dispatch(dispatcher(store, clock, fake))
    task = await store.task_get(tenant, task_id)
    assert task is not None and task.status == TaskStatus.RETRYING
    assert task.due_at == clock.now() + timedelta(seconds=10)
    assert task.last_error == "HTTP 503"
    leader = await leader_for(store, clock)
    promoter = Promoter(store, leader, clock, batch=10, poll_interval=1)
    clock.advance(9)
    assert await promoter.run_once() == 0
    clock.advance(1)
    await leader.run_once()  # renewed, as its loop does every ttl/3: a lease of 10 s just ended
    assert await promoter.run_once() == 1
    await run_dispatch(dispatcher(store, clock, fake))
    assert await status_of(store, tenant, task_id) == TaskStatus.SUCCEEDED
    outcomes = [a.outcome for a in await store.attempt_list(tenant, task_id)]
    assert outcomes == [AttemptOutcome.FAILED, AttemptOutcome.SUCCEEDED]


async def test_retry_after_wins_over_shorter_backoff(store: Store, clock: FakeClock) -> None:
    tenant = await make_tenant(store)
    task_id = await create(store, tenant, retry=RetryPolicy(initial_delay_seconds=1, jitter=0))
    fake = FakeDeliverer(
        lambda _: Outcome(AttemptOutcome.FAILED, retryable=True, retry_after_seconds=120)
    )
    await run_dispatch(dispatcher(store, clock, fake))
    task = await store.task_get(tenant, task_id)
    assert task is not None and task.due_at == clock.now() + timedelta(seconds=120)


@pytest.mark.parametrize("retryable", [False, True])
async def test_failure_without_attempts_left_fails(
    store: Store, clock: FakeClock, retryable: bool
) -> None:
    tenant = await make_tenant(store)
    task_id = await create(store, tenant, retry=RetryPolicy(max_attempts=1))
    fake = FakeDeliverer(lambda _: Outcome(AttemptOutcome.FAILED, retryable=retryable))
    await run_dispatch(dispatcher(store, clock, fake))
    assert await status_of(store, tenant, task_id) == TaskStatus.FAILED


async def test_deliverer_that_raises_counts_as_retryable_failure(
    store: Store, clock: FakeClock
) -> None:
    tenant = await make_tenant(store)
    task_id = await create(store, tenant)

    def boom(_: Delivery) -> Outcome:
        raise RuntimeError("bug")

    await run_dispatch(dispatcher(store, clock, FakeDeliverer(boom)))
    task = await store.task_get(tenant, task_id)
    assert task is not None and task.status == TaskStatus.RETRYING
    assert task.last_error is not None and "bug" in task.last_error


async def test_dispatcher_leaves_worker_tasks_alone(store: Store, clock: FakeClock) -> None:
    tenant = await make_tenant(store)
    task_id = await create(store, tenant, target={"type": "worker"})
    assert await run_dispatch(dispatcher(store, clock, FakeDeliverer())) == 0
    assert await status_of(store, tenant, task_id) == TaskStatus.READY


async def test_reaper_expires_a_dead_holders_lease(store: Store, clock: FakeClock) -> None:
    tenant = await make_tenant(store)
    task_id = await create(store, tenant, timeout_seconds=5, retry=RetryPolicy(jitter=0))
    [lease] = await store.task_claim(
        ClaimRequest("dead-node", 10, frozenset({TargetType.HTTP}), lease_grace_seconds=1)
    )
    reaper = Reaper(store, await leader_for(store, clock), clock, batch=100, interval=1)
    assert await reaper.run_once() == 0
    clock.advance(7)
    assert await reaper.run_once() == 1
    task = await store.task_get(tenant, task_id)
    assert task is not None and task.status == TaskStatus.RETRYING
    [attempt] = await store.attempt_list(tenant, task_id)
    assert attempt.outcome == AttemptOutcome.LEASE_EXPIRED and attempt.worker == "dead-node"
    late = Completion(
        task_id=task_id,
        lease_id=lease.lease_id,
        outcome=AttemptOutcome.SUCCEEDED,
        started_at=lease.lease_expires_at,
        duration_ms=1,
    )
    [result] = await store.task_complete_many([late])
    assert not result.accepted
    assert await status_of(store, tenant, task_id) == TaskStatus.RETRYING


async def test_cancel_while_running_ends_cancelled(store: Store, clock: FakeClock) -> None:
    tenant = await make_tenant(store)
    task_id = await create(store, tenant)
    release = asyncio.Event()

    async def slow(_: Delivery) -> Outcome:
        await release.wait()
        return Outcome(AttemptOutcome.FAILED, retryable=True, http_status=500)

    d = dispatcher(store, clock, FakeDeliverer(slow))
    await d.start()
    assert await d.run_once() == 1
    await store.task_cancel(tenant, task_id)
    release.set()
    await d.drain(grace=5)
    assert await status_of(store, tenant, task_id) == TaskStatus.CANCELLED


async def test_engine_delivers_due_tasks_in_real_time(store_url: str) -> None:
    """The whole engine, real clock: a task due in 0.2 s is delivered by the running loops."""
    real = store_from_url(store_url, clock=SystemClock())
    await real.open()
    await real.migrate()
    try:
        tenant = await make_tenant(real)
        fake = FakeDeliverer()
        settings = Settings(
            db=store_url, node_id="node-rt", poll_interval_seconds=0.2, leader_ttl_seconds=3
        )
        engine = Engine(real, settings, {TargetType.HTTP: fake})
        await engine.start()
        try:
            now = await real.now()
            task_id = await create(real, tenant, run_at=now + timedelta(seconds=0.2))
            immediate = await create(real, tenant)
            for _ in range(200):
                done = [await status_of(real, tenant, t) for t in (task_id, immediate)]
                if done == [TaskStatus.SUCCEEDED, TaskStatus.SUCCEEDED]:
                    break
                await asyncio.sleep(0.02)
            assert done == [TaskStatus.SUCCEEDED, TaskStatus.SUCCEEDED]
        finally:
            await engine.stop(grace=2)
        assert fake.closed
    finally:
        await real.close()


async def test_saturated_dispatcher_claims_a_batch_not_single_tasks(
    store: Store, clock: FakeClock
) -> None:
    """With every slot busy, the dispatcher waits for a quarter of its slots before claiming
    again, so a busy node pays one store round trip per batch, not per freed slot."""
    tenant = await make_tenant(store)
    for _ in range(12):
        await create(store, tenant)
    gates: list[asyncio.Event] = []
    started = asyncio.Semaphore(0)

    async def held(_: Delivery) -> Outcome:
        gate = asyncio.Event()
        gates.append(gate)
        started.release()
        await gate.wait()
        return Outcome(AttemptOutcome.SUCCEEDED, retryable=False, http_status=200)

    d = Dispatcher(
        store,
        {TargetType.HTTP: FakeDeliverer(held)},
        clock,
        node_id="node-a",
        concurrency=8,
        batch=8,
        poll_interval=0.01,
        lease_grace=5,
    )
    await d.start()
    assert await d.run_once() == 8
    for _ in range(8):
        await started.acquire()
    waiting = asyncio.create_task(d.wait(8))
    gates[0].set()
    await asyncio.sleep(0.05)
    assert not waiting.done(), "one free slot of eight is not worth a claim"
    gates[1].set()
    await asyncio.wait_for(waiting, 1)
    assert await d.run_once() == 2
    for _ in range(2):
        await started.acquire()
    for gate in gates:
        gate.set()
    await d.drain(grace=5)


async def test_a_store_outage_in_a_services_wait_backs_off_instead_of_ending_it() -> None:
    """The promoter's wait reads the store (next due time): an outage there must not end the
    service's loop — it did once, and the node stopped promoting for good."""
    from duetime.engine.service import Service
    from duetime.errors import StoreUnavailable

    class Flaky(Service):
        name = "flaky"

        def __init__(self) -> None:
            super().__init__(SystemClock())
            self.rounds = 0
            self.waits = 0

        async def run_once(self) -> int:
            self.rounds += 1
            if self.rounds >= 3:
                self.stop()
            return 0

        async def wait(self, did: int) -> None:
            self.waits += 1
            if self.waits == 1:
                raise StoreUnavailable("the store went away while waiting")

    service = Flaky()
    await asyncio.wait_for(service.run(), timeout=5)
    assert service.rounds == service.waits == 3  # every round, the failed wait's included
