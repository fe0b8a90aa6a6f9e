"""Store conformance for keyed flow control (SPEC §7 "Keyed flow control"): uniqueness windows
under racing creates and past retention, debounce, throttle, the keyed rate limit's per-key
buckets and its reach across many keys, and the sweep. Run unchanged against every backend,
given ``store`` and ``clock`` fixtures::

    from duetime.testing.conformance_flowkeys import *  # noqa: F403
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import pytest

from duetime.clock import FakeClock
from duetime.errors import UniqueHeld
from duetime.history.retention import RetentionPolicy
from duetime.store.core.keyed import SCAN_MIN
from duetime.store.protocols import Store
from duetime.testing.conformance import _succeed, _tenant, new_task
from duetime.testing.conformance_queues import _lease_for
from duetime.types import (
    DebounceRule,
    FlowAsk,
    FlowRules,
    NewTask,
    QueueSettings,
    TaskCreated,
    TaskStatus,
    ThrottleRule,
    UniqueRule,
)

HOUR = 3600.0
LIVE = (TaskStatus.SCHEDULED, TaskStatus.READY, TaskStatus.RUNNING, TaskStatus.SUCCEEDED)


def _unique(tenant_id: str, key: str, period: float = HOUR, **fields: Any) -> NewTask:
    rule = UniqueRule(("payload.order",), period, LIVE)
    return new_task(tenant_id, flow=FlowAsk(unique=(key, rule)), **fields)


def _debounced(tenant_id: str, key: str, payload: str, **fields: Any) -> NewTask:
    rule = DebounceRule(("labels.user",), period_seconds=5.0, max_wait_seconds=60.0)
    return new_task(tenant_id, flow=FlowAsk(debounce=(key, rule)), payload_json=payload, **fields)


def _throttled(tenant_id: str, key: str, rate: float = 1.0, burst: int = 2) -> NewTask:
    rule = ThrottleRule(("name",), rate, burst)
    return new_task(tenant_id, flow=FlowAsk(throttle=(key, rule)))


def _secs(seconds: float) -> timedelta:
    return timedelta(seconds=seconds)


async def _one(store: Store, new: NewTask) -> TaskCreated:
    (made,) = await store.task_create_many([new])
    return made


# -- uniqueness windows -------------------------------------------------------------------------


async def test_unique_window_makes_one_task_for_racing_creates(store: Store) -> None:
    """task_create_many: 50 creates racing for one unique key make exactly one task; every
    caller is told which (the one that made it ``created``, the others ``existing``)."""
    a = await _tenant(store)
    made = await asyncio.gather(*(_one(store, _unique(a, "order-1")) for _ in range(50)))
    assert sum(m.created for m in made) == 1
    assert {m.task.id for m in made} == {made[0].task.id}
    notes = Counter(m.flow for m in made)
    assert notes == {(("unique", "created"),): 1, (("unique", "existing"),): 49}
    assert len({m.task.id for m in made}) == 1


async def test_unique_window_ends_with_its_period_and_other_keys_are_apart(
    store: Store, clock: FakeClock
) -> None:
    """A unique key makes a new task once its period has passed; another key, queue or tenant
    has a window of its own."""
    a, b = await _tenant(store, "a"), await _tenant(store, "b")
    first = await _one(store, _unique(a, "k", period=60))
    assert first.created
    assert not (await _one(store, _unique(a, "k", period=60))).created
    assert (await _one(store, _unique(a, "other", period=60))).created
    assert (await _one(store, _unique(a, "k", period=60, queue="q2"))).created
    assert (await _one(store, _unique(b, "k", period=60))).created
    clock.advance(61)
    again = await _one(store, _unique(a, "k", period=60))
    assert again.created and again.task.id != first.task.id


async def test_unique_window_frees_its_key_when_its_task_leaves_its_states(
    store: Store, clock: FakeClock
) -> None:
    """A window holds while its task is in one of ``states``: a task cancelled (not among
    them) frees the key at once."""
    a = await _tenant(store)
    first = await _one(store, _unique(a, "k"))
    await store.task_cancel(a, first.task.id)
    again = await _one(store, _unique(a, "k"))
    assert again.created and again.task.id != first.task.id
    assert not (await _one(store, _unique(a, "k"))).created


async def test_unique_window_in_one_batch(store: Store) -> None:
    """A batch's later tasks see its earlier ones' windows: one task, answered twice."""
    a = await _tenant(store)
    made = await store.task_create_many([_unique(a, "k"), _unique(a, "k"), new_task(a)])
    assert [m.created for m in made] == [True, False, True]
    assert made[1].task.id == made[0].task.id


async def test_unique_window_outlives_retention(store: Store, clock: FakeClock) -> None:
    """A window holds for its whole period even after retention removed its task: a duplicate
    then raises ``UniqueHeld`` naming the task and when the window ends; after the period the
    key makes a task again."""
    a = await _tenant(store)
    first = await _one(store, _unique(a, "k", period=10 * 86400))
    (lease,) = await _lease_for(store, a, "default", 1)
    await _succeed(store, lease)
    clock.advance(2 * 86400)
    day = RetentionPolicy(succeeded=86400, failed=86400, cancelled=86400)
    assert await store.task_retention_sweep(day, limit=100) == 1
    with pytest.raises(UniqueHeld) as held:
        await _one(store, _unique(a, "k", period=10 * 86400))
    assert held.value.task_id == first.task.id
    clock.advance(9 * 86400)
    assert (await _one(store, _unique(a, "k", period=10 * 86400))).created


async def test_unique_window_and_idempotency_key(store: Store) -> None:
    """A repeated idempotency key answers as always, before any window is looked at."""
    a = await _tenant(store)
    first = await _one(store, _unique(a, "k", idempotency_key="i-1"))
    again = await _one(store, _unique(a, "k2", idempotency_key="i-1"))
    assert first.created and not again.created and again.task.id == first.task.id
    assert again.flow == ()
    assert (await _one(store, _unique(a, "k2"))).created  # k2 was never taken


# -- debounce -----------------------------------------------------------------------------------


async def test_debounce_folds_a_burst_into_one_run_with_the_last_payload(
    store: Store, clock: FakeClock
) -> None:
    """task_create_many: 1,000 creates of one key within its period make one task, due one
    period after the last, with the last payload; it shows what it absorbed."""
    a = await _tenant(store)
    made = []
    for i in range(1000):
        made.append(await _one(store, _debounced(a, "user-1", f'{{"n": {i}}}')))
        clock.advance(0.002)
    assert made[0].created and made[0].flow == (("debounce", "created"),)
    assert not any(m.created for m in made[1:])
    assert {m.task.id for m in made} == {made[0].task.id}
    assert made[-1].flow == (("debounce", "absorbed"),)
    task = made[-1].task
    assert task.status is TaskStatus.SCHEDULED and task.payload == {"n": 999}
    assert task.absorbed == 999 and task.absorbed_at is not None
    last = clock.now() - timedelta(seconds=0.002)
    assert task.due_at == last + timedelta(seconds=5)
    assert await _lease_for(store, a, "default", 10) == []
    clock.advance(5)
    assert await store.task_promote_due(100) == 1
    (lease,) = await _lease_for(store, a, "default", 10)
    assert lease.task.id == task.id and lease.task.payload == {"n": 999}
    # The burst is over: the next create starts a new one.
    assert (await _one(store, _debounced(a, "user-1", '{"n": 1000}'))).created


async def test_debounce_never_waits_past_max_wait(store: Store, clock: FakeClock) -> None:
    """A burst longer than ``max_wait`` runs at ``max_wait`` after its first create; a create
    from then on starts another task."""
    a = await _tenant(store)
    first = await _one(store, _debounced(a, "u", '{"n": 0}'))
    start = first.task.created_at
    made = first
    for i in range(1, 40):  # one every 2 s, each within the 5 s period
        clock.advance(2)
        made = await _one(store, _debounced(a, "u", f'{{"n": {i}}}'))
        if made.created:
            break
        assert made.task.id == first.task.id
        assert made.task.due_at == min(clock.now() + timedelta(seconds=5), start + _secs(60))
    assert made.created and clock.now() == start + _secs(60)
    assert made.task.due_at == clock.now() + _secs(5)
    assert await store.task_promote_due(100) == 1  # the first burst's task, due at max_wait
    (lease,) = await _lease_for(store, a, "default", 10)
    assert lease.task.id == first.task.id and lease.task.payload == {"n": 29}


# -- throttle -----------------------------------------------------------------------------------


async def test_throttle_delays_creates_to_the_keys_next_free_slot(
    store: Store, clock: FakeClock
) -> None:
    """Creates of one key run at most ``rate`` a second, ``burst`` at once; the rest are
    scheduled one slot apart, none dropped; another key is apart; a key idle long enough is
    free again."""
    a = await _tenant(store)
    now = clock.now()
    made = [await _one(store, _throttled(a, "k")) for _ in range(5)]
    assert all(m.created for m in made)
    offsets = [(m.task.run_at - now).total_seconds() for m in made]
    assert offsets == pytest.approx([0, 0, 1, 2, 3])
    assert [m.flow[0][1] for m in made] == ["on_time", "on_time", "delayed", "delayed", "delayed"]
    assert [m.task.status for m in made[:2]] == [TaskStatus.READY] * 2
    assert all(m.task.status is TaskStatus.SCHEDULED for m in made[2:])
    other = await _one(store, _throttled(a, "other"))
    assert other.task.run_at == now
    clock.advance(10)
    later = await _one(store, _throttled(a, "k"))
    assert later.task.run_at == clock.now() and later.flow == (("throttle", "on_time"),)


# -- the keyed rate limit -----------------------------------------------------------------------


def _keyed(rate: float, burst: int | None = None, per_key: int | None = None) -> QueueSettings:
    rules = FlowRules(key=("payload.customer",), key_rate=rate, key_burst=burst)
    return QueueSettings(max_concurrency_per_key=per_key, flow=rules)


async def _keyed_tasks(store: Store, tenant_id: str, keys: Sequence[str | None]) -> None:
    for key in keys:
        await store.task_create_many([new_task(tenant_id, queue="q", flow_key=key)])


async def test_keyed_rate_limit_keeps_a_bucket_per_key(store: Store, clock: FakeClock) -> None:
    """task_claim: each key starts at most its rate (``burst`` at once); tasks whose key has no
    value (``""``) follow the queue's own limits only."""
    a = await _tenant(store)
    await store.queue_put(a, "q", _keyed(rate=1.0, burst=2))
    await _keyed_tasks(store, a, ["a"] * 5 + ["b"] * 3 + [""] * 3)
    first = Counter(lease.task.flow_key for lease in await _lease_for(store, a, "q", 100))
    assert first == {"a": 2, "b": 2, "": 3}
    assert await _lease_for(store, a, "q", 100) == []
    clock.advance(1)
    assert Counter(x.task.flow_key for x in await _lease_for(store, a, "q", 100)) == {
        "a": 1,
        "b": 1,
    }
    clock.advance(0.5)
    assert await _lease_for(store, a, "q", 100) == []
    clock.advance(0.5)
    assert Counter(x.task.flow_key for x in await _lease_for(store, a, "q", 100)) == {"a": 1}
    clock.advance(60)
    assert Counter(x.task.flow_key for x in await _lease_for(store, a, "q", 100)) == {"a": 1}


async def test_keyed_rate_limit_takes_in_claim_order_within_the_room(
    store: Store, clock: FakeClock
) -> None:
    """Keys whose first ready task comes first (priority, then due time) are served first when
    the room is short; a key's tasks go in its claim order."""
    a = await _tenant(store)
    await store.queue_put(a, "q", _keyed(rate=1.0, burst=1))
    for key, priority in (("low", 0), ("high", 5), ("mid", 2)):
        await store.task_create_many([new_task(a, queue="q", flow_key=key, priority=priority)])
    got = await _lease_for(store, a, "q", 2)
    assert [lease.task.flow_key for lease in got] == ["high", "mid"]


async def test_keyed_rate_limit_reaches_every_key_however_many(
    store: Store, clock: FakeClock
) -> None:
    """Claims with a short room reach every key in turn (no key starved) when more keys have
    ready work than one claim reads."""
    a = await _tenant(store)
    await store.queue_put(a, "q", _keyed(rate=1.0, burst=1))
    keys = [f"k{i:04d}" for i in range(SCAN_MIN + 44)]
    await store.task_create_many([new_task(a, queue="q", flow_key=k) for k in keys])
    seen: set[str] = set()
    for _ in range(len(keys) // 10 + 5):
        seen |= {lease.task.flow_key or "" for lease in await _lease_for(store, a, "q", 10)}
    assert seen == set(keys)


async def test_keyed_rate_limit_with_max_concurrency_per_key(
    store: Store, clock: FakeClock
) -> None:
    """With ``max_concurrency_per_key`` too, a key starts no more than its running tasks
    allow, whatever its bucket holds."""
    a = await _tenant(store)
    await store.queue_put(a, "q", _keyed(rate=100.0, burst=10, per_key=1))
    await store.task_create_many(
        [new_task(a, queue="q", flow_key="a", concurrency_key="a") for _ in range(3)]
    )
    (first,) = await _lease_for(store, a, "q", 10)
    assert await _lease_for(store, a, "q", 10) == []
    await _succeed(store, first)
    assert len(await _lease_for(store, a, "q", 10)) == 1


async def test_keyed_rate_limit_takes_tasks_that_came_without_a_flow_key(
    store: Store, clock: FakeClock
) -> None:
    """Ready tasks of a keyed queue without a flow key (made before the limit, by a schedule)
    are keyed ``""`` by the claim (when it finds no key) or the sweep, and then run under the
    queue's own limits."""
    a = await _tenant(store)
    await store.task_create_many([new_task(a, queue="q") for _ in range(3)])
    await store.queue_put(a, "q", _keyed(rate=1.0, burst=1))
    assert len(await _lease_for(store, a, "q", 10)) == 3
    await store.task_create_many([new_task(a, queue="q", flow_key="x") for _ in range(2)])
    await store.task_create_many([new_task(a, queue="q") for _ in range(2)])
    assert await store.flow_sweep(100) == 2
    got = await _lease_for(store, a, "q", 10)
    assert Counter(lease.task.flow_key for lease in got) == {"x": 1, "": 2}


async def test_a_new_keyed_rate_starts_every_key_full(store: Store, clock: FakeClock) -> None:
    """queue_put: a new keyed rate or burst starts every key's bucket full."""
    a = await _tenant(store)
    await store.queue_put(a, "q", _keyed(rate=0.1, burst=1))
    await _keyed_tasks(store, a, ["a"] * 3)
    assert len(await _lease_for(store, a, "q", 10)) == 1
    assert await _lease_for(store, a, "q", 10) == []
    await store.queue_put(a, "q", _keyed(rate=0.1, burst=2))
    assert len(await _lease_for(store, a, "q", 10)) == 2


async def test_queue_keys_shows_the_busiest_keys_and_their_buckets(
    store: Store, clock: FakeClock
) -> None:
    """queue_keys: keys by ready tasks, with running ones, each key's bucket and when it next
    allows a start; a key asked for comes first whatever it holds."""
    a = await _tenant(store)
    queue = await store.queue_put(a, "q", _keyed(rate=0.5, burst=1))
    await _keyed_tasks(store, a, ["a"] * 4 + ["b"] * 2)
    await _lease_for(store, a, "q", 10)
    figures = {f.key: f for f in await store.queue_keys(queue, 10)}
    assert (figures["a"].ready, figures["a"].running) == (3, 1)
    assert (figures["b"].ready, figures["b"].running) == (1, 1)
    assert figures["a"].tokens == pytest.approx(0.0)
    assert figures["a"].next_start_at == clock.now() + timedelta(seconds=2)
    (asked, *_) = await store.queue_keys(queue, 0, ["zzz"])
    assert (asked.key, asked.ready, asked.running, asked.tokens) == ("zzz", 0, 0, None)


async def test_flow_sweep_removes_spent_windows_and_full_buckets(
    store: Store, clock: FakeClock
) -> None:
    """flow_sweep: ledger rows past their time and buckets full by now go; live ones stay."""
    a = await _tenant(store)
    await store.queue_put(a, "q", _keyed(rate=1.0, burst=1))
    await _keyed_tasks(store, a, ["a"])
    await _lease_for(store, a, "q", 10)
    await _one(store, _unique(a, "k", period=60))
    await _one(store, _throttled(a, "t"))
    assert await store.flow_sweep(100) == 0
    clock.advance(61)
    assert await store.flow_sweep(100) == 3  # the window, the throttle, the bucket
    assert await store.flow_sweep(100) == 0
