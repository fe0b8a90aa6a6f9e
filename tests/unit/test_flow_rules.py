"""The flow-control rules both stores and the dispatcher share (SPEC §7): claim shares by tenant
weight, the rounds that hand a short tenant's share to the others, the token bucket, and the
dispatcher's slots per tenant."""

from __future__ import annotations

import random
from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from duetime.engine.dispatcher import tenant_slots
from duetime.store.core.hot import (
    bucket_tokens,
    claim_shares,
    limited_room,
    next_shares,
    next_token_in,
)

tenants_st = st.lists(
    st.tuples(st.text(min_size=1, max_size=3), st.integers(1, 1000)),
    min_size=1,
    max_size=20,
    unique_by=lambda tw: tw[0],
)


@given(limit=st.integers(1, 1000), tenants=tenants_st, seed=st.integers(0, 2**32))
def test_shares_add_up_to_the_limit_and_follow_weights(
    limit: int, tenants: list[tuple[str, int]], seed: int
) -> None:
    shares = dict(claim_shares(limit, tenants, rng=random.Random(seed)))
    assert sum(shares.values()) == limit
    total = sum(w for _, w in tenants)
    for tenant, weight in tenants:
        # The weighted share rounded down, plus at most one of the remainder (claim_shares'
        # contract): an exact share of 279 may get 280 when the draw picks it.
        floor = limit * weight // total
        assert floor <= shares.get(tenant, 0) <= floor + 1


def test_a_small_share_still_gets_claims_over_many_claims() -> None:
    rng = random.Random(7)
    heavy, light = ("heavy", 99), ("light", 1)
    won = Counter(t for _ in range(2000) for t, _ in claim_shares(1, [heavy, light], rng=rng))
    assert 5 <= won["light"] <= 45  # about 1 in 100
    assert won["heavy"] + won["light"] == 2000


def test_rounds_hand_a_short_tenants_share_to_the_others() -> None:
    tenants = [("a", 1), ("b", 1), ("c", 1)]
    shares = [("a", 7), ("b", 7), ("c", 6)]
    got = {"a": 7, "b": 7, "c": 2}
    nxt, left = next_shares(4, tenants, shares, got, got)
    assert dict(nxt) == {"a": 2, "b": 2}
    assert [t for t, _ in left] == ["a", "b"]
    # Uneven totals so far are evened out first.
    nxt, _ = next_shares(5, tenants, shares, got, {"a": 7, "b": 5, "c": 2})
    assert dict(nxt) == {"b": 3, "a": 2}
    # Nobody with more to give: no next round.
    assert next_shares(3, tenants, shares, {"a": 0, "b": 1, "c": 0}, {})[0] == []


def test_the_bucket_refills_at_its_rate_up_to_its_burst() -> None:
    assert bucket_tokens(None, 0.0, 2.0, 5) == 5.0  # never taken from: full
    assert bucket_tokens(None, 0.0, 2.5, None) == 3.0  # default: a second's worth
    assert bucket_tokens(None, 0.0, 0.1, None) == 1.0  # at least one
    assert bucket_tokens(0.5, 1.0, 2.0, 5) == 2.5
    assert bucket_tokens(0.5, 3600.0, 2.0, 5) == 5.0
    assert bucket_tokens(-3.0, 0.0, 2.0, 5) == 0.0  # never below empty
    assert bucket_tokens(1.0, -5.0, 2.0, 5) == 1.0  # a clock going back adds nothing
    assert next_token_in(0.25, 2.0) == 0.375
    assert limited_room(10, 0.0, 1.0, 2.0, 5) == (2, 2.0)
    assert limited_room(10, None, 0.0, None, None) == (10, None)


def test_dispatcher_slots_by_weight_with_a_reserve_for_newcomers() -> None:
    assert tenant_slots(512, {"a": 1}, 128) == {"a": 384}
    assert tenant_slots(512, {"a": 1, "b": 1}, 128) == {"a": 256, "b": 256}
    assert tenant_slots(512, {"a": 1, "b": 3}, 128) == {"a": 128, "b": 384}
    assert tenant_slots(4, {str(i): 1 for i in range(10)}, 1) == {str(i): 1 for i in range(10)}
    assert tenant_slots(1, {"a": 1}, 1) == {"a": 1}


def test_caps_bound_a_tenants_part_in_every_round() -> None:
    caps = {"a": 2, "b": None}
    shares = claim_shares(10, [("a", 1), ("b", 1)], caps.get)
    assert dict(shares) == {"a": 2, "b": 5}
    got = dict(shares)
    nxt, left = next_shares(3, [("a", 1), ("b", 1)], shares, got, got, caps.get)
    assert dict(nxt) == {"b": 3} and [t for t, _ in left] == ["b"]
