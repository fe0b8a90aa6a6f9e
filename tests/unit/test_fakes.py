"""The fakes of the store roles (:mod:`duetime.testing.fakes`) are held to the same conformance
checks as the stores, so a unit test built on one proves something about the real thing."""

from __future__ import annotations

from duetime.clock import FakeClock
from duetime.errors import StoreUnavailable
from duetime.store.counters import CountKey, Reconciled
from duetime.testing import conformance
from duetime.testing.fakes import FakeCounters, FakeLeadership, FakeSignal, memory_store


async def test_fake_signal_keeps_the_signal_contract() -> None:
    await conformance.check_signal(FakeSignal())


async def test_fake_leadership_keeps_the_leadership_contract(clock: FakeClock) -> None:
    await conformance.test_leadership_one_holder_renew_takeover_resign(FakeLeadership(clock), clock)
    await conformance.test_leadership_contenders_elect_one(FakeLeadership(clock), clock)


async def test_fake_leadership_outage_raises_until_cleared(clock: FakeClock) -> None:
    fake = FakeLeadership(clock)
    fake.outage = StoreUnavailable("down")
    for call in (fake.leader_attempt_elect("x", "n1", 10), fake.leader_resign("x", "n1")):
        try:
            await call
        except StoreUnavailable:
            pass
        else:
            raise AssertionError("the outage did not show")
    fake.outage = None
    assert await fake.leader_attempt_elect("x", "n1", 10)
    assert fake.holder("x") == "n1"
    clock.advance(10)
    assert fake.holder("x") is None


async def test_fake_counters_replay_the_script_and_record_the_calls() -> None:
    key = CountKey("t", "q")
    fake = FakeCounters(folds=[3], reconciles=[Reconciled(key, 1)])
    assert [await fake.task_counts_fold(10), await fake.task_counts_fold(10)] == [3, 0]
    assert await fake.task_counts_reconcile(None, 5) == Reconciled(key, 1)
    assert await fake.task_counts_reconcile(key, 5) is None
    assert fake.fold_calls == [10, 10]
    assert fake.reconcile_calls == [(None, 5), (key, 5)]


async def test_memory_store_is_migrated_and_pinned_to_the_clock(clock: FakeClock) -> None:
    async with memory_store(clock) as store:
        assert await store.migrations_pending() == []
        assert await store.now() == clock.now()
