"""The leader's counter keeper over a scripted counter role
(:class:`~duetime.testing.fakes.FakeCounters`): followers do nothing; the leader folds every round
and recounts one queue per reconcile round in turn, wrapping around, counting the corrections.
What a fold and a reconcile do in a store is the conformance suite's (``tests/store``)."""

from __future__ import annotations

from duetime import metrics
from duetime.clock import FakeClock
from duetime.engine.counters import CounterKeeper, CounterKeeperConfig
from duetime.engine.leader import Leader
from duetime.store.counters import CountKey, Reconciled
from duetime.testing.fakes import FakeCounters, FakeLeadership

A, B, C = CountKey("t", "a"), CountKey("t", "b"), CountKey("t", "c")


async def leaders(clock: FakeClock) -> tuple[Leader, Leader]:
    """(the leader, a follower) of one fake leadership."""
    leadership = FakeLeadership(clock)
    leader = Leader(leadership, "node-a", ttl_seconds=10, clock=clock)
    follower = Leader(leadership, "node-b", ttl_seconds=10, clock=clock)
    assert await leader.run_once() == 1
    assert await follower.run_once() == 0
    return leader, follower


async def test_a_follower_keeps_no_counts(clock: FakeClock) -> None:
    _, follower = await leaders(clock)
    counters = FakeCounters(folds=[3])
    keeper = CounterKeeper(counters, follower, clock, CounterKeeperConfig(reconcile_every=1))
    assert await keeper.run_once() == 0
    assert counters.fold_calls == [] and counters.reconcile_calls == []


async def test_the_leader_folds_every_round_and_reconciles_every_nth(clock: FakeClock) -> None:
    leader, _ = await leaders(clock)
    counters = FakeCounters(folds=[3, 0, 0], reconciles=[Reconciled(A, 0)])
    config = CounterKeeperConfig(fold_batch=50, reconcile_every=2, reconcile_max_rows=9)
    keeper = CounterKeeper(counters, leader, clock, config)
    assert [await keeper.run_once() for _ in range(3)] == [3, 0, 0]
    assert counters.fold_calls == [50, 50, 50]
    assert counters.reconcile_calls == [(None, 9)], "one reconcile, in the second round"


async def test_reconcile_walks_the_queues_in_turn_and_wraps(clock: FakeClock) -> None:
    leader, _ = await leaders(clock)
    counters = FakeCounters(
        reconciles=[
            Reconciled(A, 0),
            Reconciled(B, 5),  # the drift
            Reconciled(C, 0, skipped=True),
            None,  # past the last queue: start again
            Reconciled(A, 0),
        ]
    )
    keeper = CounterKeeper(counters, leader, clock, CounterKeeperConfig(reconcile_max_rows=9))
    before = metrics.COUNT_CORRECTIONS._value.get()
    corrected = [await keeper.reconcile_once() for _ in range(4)]
    assert corrected == [0, 5, 0, 0]
    assert metrics.COUNT_CORRECTIONS._value.get() == before + 5
    assert [after for after, _ in counters.reconcile_calls] == [None, A, B, C, None]
