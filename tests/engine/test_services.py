"""Engine services one round at a time, on both stores, with a pinned clock and a fake deliverer:
what deliveries, retries and lease expiry do to tasks. The services' own logic, with no database,
is tested in ``tests/unit`` (test_promoter, test_dispatcher, test_leader)."""

from __future__ import annotations

import asyncio
import time
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
        status=TaskStatus.SUCCEEDED,
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
            deadline = time.monotonic() + 30  # seconds, on a loaded machine; ~0.3 s when idle
            while True:
                done = [await status_of(real, tenant, t) for t in (task_id, immediate)]
                if done == [TaskStatus.SUCCEEDED, TaskStatus.SUCCEEDED]:
                    break
                assert time.monotonic() < deadline, done
                await asyncio.sleep(0.02)
        finally:
            await engine.stop(grace=2)
        assert fake.closed
    finally:
        await real.close()
