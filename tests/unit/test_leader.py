"""The leader service over a fake leadership role (:class:`~duetime.testing.fakes.FakeLeadership`,
held to the leadership conformance checks): who leads, when the belief ends, resigning."""

from __future__ import annotations

import pytest

from duetime.clock import FakeClock
from duetime.engine.leader import LEADERSHIP, Leader
from duetime.errors import StoreUnavailable
from duetime.testing.fakes import FakeLeadership


async def test_leadership_passes_on_after_ttl(clock: FakeClock) -> None:
    store = FakeLeadership(clock)
    a = Leader(store, "node-a", ttl_seconds=10, clock=clock)
    assert await a.run_once() == 1
    b = Leader(store, "node-b", ttl_seconds=10, clock=clock)
    assert await b.run_once() == 0
    clock.advance(11)
    assert await b.run_once() == 1
    assert await a.run_once() == 0
    assert not a.is_leader and b.is_leader


async def test_a_failed_renewal_ends_the_belief_at_once(clock: FakeClock) -> None:
    store = FakeLeadership(clock)
    leader = Leader(store, "node-a", ttl_seconds=10, clock=clock)
    assert await leader.run_once() == 1 and leader.is_leader
    store.outage = StoreUnavailable("down")
    with pytest.raises(StoreUnavailable):
        await leader.run_once()
    assert not leader.is_leader, "a leader that cannot renew must not go on leading"
    store.outage = None
    assert await leader.run_once() == 1 and leader.is_leader


async def test_resign_frees_the_leadership_for_another_node(clock: FakeClock) -> None:
    store = FakeLeadership(clock)
    a = Leader(store, "node-a", ttl_seconds=10, clock=clock)
    await a.run_once()
    await a.resign()
    assert not a.is_leader and store.holder(LEADERSHIP) is None
    b = Leader(store, "node-b", ttl_seconds=10, clock=clock)
    assert await b.run_once() == 1
    await a.resign()  # not the holder: changes nothing
    assert store.holder(LEADERSHIP) == "node-b"
