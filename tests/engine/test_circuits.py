"""Circuit breakers in the dispatcher (SPEC §7 "Target protection"), on both stores with a
pinned clock: a failing origin opens its circuit, held tasks wait without spending attempts,
one probe closes it, and every node sees the circuit in the store."""

from __future__ import annotations

import random

from duetime.clock import FakeClock
from duetime.delivery.base import Delivery, Outcome
from duetime.delivery.circuit import Circuits
from duetime.engine.dispatcher import Dispatcher
from duetime.engine.leader import Leader
from duetime.engine.promoter import Promoter
from duetime.store import Store
from duetime.testing.fakes import FakeDeliverer
from duetime.types import AttemptOutcome, NewTask, RetryPolicy, TargetType, TaskStatus

FAILING = {"type": "http", "url": "http://127.0.0.1:9/down", "method": "POST", "headers": {}}
HEALTHY = {"type": "http", "url": "http://127.0.0.2:9/up", "method": "POST", "headers": {}}
POLICY = RetryPolicy(max_attempts=10, initial_delay_seconds=1, multiplier=1, jitter=0)


class Target:
    """Answers 503 for the failing origin while ``down``, else 204."""

    def __init__(self) -> None:
        self.down = True
        self.calls: dict[str, int] = {}

    def __call__(self, delivery: Delivery) -> Outcome:
        url = str(delivery.task.target["url"])
        self.calls[url] = self.calls.get(url, 0) + 1
        if self.down and url == FAILING["url"]:
            return Outcome(AttemptOutcome.FAILED, retryable=True, http_status=503, error="HTTP 503")
        return Outcome(AttemptOutcome.SUCCEEDED, retryable=False, http_status=204)


def _dispatcher(store: Store, clock: FakeClock, target: Target, circuits: Circuits) -> Dispatcher:
    return Dispatcher(
        store,
        {TargetType.HTTP: FakeDeliverer(target)},
        clock,
        node_id="node-a",
        concurrency=32,
        batch=32,
        poll_interval=0.0,
        lease_grace=5,
        circuits=circuits,
    )


async def _round(store: Store, clock: FakeClock, target: Target, circuits: Circuits) -> int:
    d = _dispatcher(store, clock, target, circuits)
    await d.start()
    claimed = await d.run_once()
    await d.drain(grace=5)
    return claimed


async def _promote(store: Store, clock: FakeClock) -> int:
    leader = Leader(store, "node-a", ttl_seconds=3600, clock=clock)
    await leader.run_once()
    return await Promoter(store, leader, clock, batch=100, poll_interval=1).run_once()


async def test_open_circuit_holds_tasks_without_spending_attempts(
    store: Store, clock: FakeClock
) -> None:
    tenant = (await store.tenant_create("acme")).id
    made = await store.task_create_many(
        [NewTask(tenant_id=tenant, target=FAILING, retry=POLICY) for _ in range(6)]
        + [NewTask(tenant_id=tenant, target=HEALTHY, retry=POLICY)]
    )
    ids = [m.task.id for m in made]
    target = Target()
    circuits = Circuits(clock, threshold=3, cooldown=5, max_cooldown=60, rng=random.Random(7))
    # Round 1: six failures at the failing origin open its circuit; the other origin is fine.
    assert await _round(store, clock, target, circuits) == 7
    [circuit] = await store.circuit_list(tenant)
    assert (circuit.origin, circuit.state, circuit.opened) == ("http://127.0.0.1:9", "open", 1)
    assert (await store.task_get(tenant, ids[6])).status is TaskStatus.SUCCEEDED  # type: ignore[union-attr]

    # Round 2: the retries come due while it is open: held, handed back, no attempt spent.
    clock.advance(1)
    assert await _promote(store, clock) == 6
    assert await _round(store, clock, target, circuits) == 6
    assert target.calls[FAILING["url"]] == 6
    for task_id in ids[:6]:
        task = await store.task_get(tenant, task_id)
        assert task is not None and task.status is TaskStatus.SCHEDULED and task.attempts == 1
        assert len(await store.attempt_list(tenant, task_id)) == 1
        # Due after the cool-down, spread so a recovering target is not met all at once.
        assert 4 <= (task.due_at - clock.now()).total_seconds() <= 10

    # Round 3: after the cool-down, one probe goes; it succeeds and closes the circuit.
    target.down = False
    clock.advance(10)
    assert await _promote(store, clock) == 6
    assert await _round(store, clock, target, circuits) == 6
    assert target.calls[FAILING["url"]] == 7  # exactly one probe
    [circuit] = await store.circuit_list(tenant)
    assert circuit.state == "closed"

    # Round 4: the rest flow again.
    clock.advance(10)
    assert await _promote(store, clock) == 5
    assert await _round(store, clock, target, circuits) == 5
    for task_id in ids[:6]:
        outcomes = [a.outcome for a in await store.attempt_list(tenant, task_id)]
        assert outcomes == [AttemptOutcome.FAILED, AttemptOutcome.SUCCEEDED]


async def test_a_circuit_opened_elsewhere_is_adopted(store: Store, clock: FakeClock) -> None:
    tenant = (await store.tenant_create("acme")).id
    target = Target()
    elsewhere = Circuits(clock, threshold=1, cooldown=30, max_cooldown=60)
    await store.task_create_many([NewTask(tenant_id=tenant, target=FAILING, retry=POLICY)])
    assert await _round(store, clock, target, elsewhere) == 1  # opens it, recorded in the store
    here = Circuits(clock, threshold=1, cooldown=30, max_cooldown=60)
    clock.advance(1)
    assert await _promote(store, clock) == 1
    assert await _round(store, clock, target, here) == 1
    assert target.calls[FAILING["url"]] == 1  # held here too: the store said it is open
