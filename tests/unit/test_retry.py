"""Retry policy: exponential backoff with a cap and jitter, and the decision to retry at all."""

from __future__ import annotations

import math
import random
from dataclasses import replace
from datetime import UTC, datetime

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from duetime.retry import (
    MAX_BACKOFF_SECONDS,
    MAX_RETRY_AFTER_SECONDS,
    backoff_seconds,
    next_retry_delay,
)
from duetime.types import RetryPolicy, Task, TaskStatus

NO_JITTER = RetryPolicy(
    max_attempts=5, initial_delay_seconds=1, max_delay_seconds=60, multiplier=2, jitter=0
)
T0 = datetime(2030, 1, 1, tzinfo=UTC)


def _task(policy: RetryPolicy = NO_JITTER, attempts: int = 1, series_start: int = 0) -> Task:
    return Task(
        id="00000000-0000-7000-8000-000000000000",
        tenant_id="t",
        name=None,
        queue="default",
        status=TaskStatus.RUNNING,
        version=1,
        target={"type": "worker"},
        payload_json="null",
        idempotency_key=None,
        priority=0,
        retry=policy,
        timeout_seconds=30,
        depends_on=(),
        concurrency_key=None,
        labels={},
        attempts=attempts,
        series_start=series_start,
        schedule_id=None,
        scheduled_for=None,
        run_at=T0,
        due_at=T0,
        created_at=T0,
        updated_at=T0,
    )


@pytest.mark.parametrize(
    ("attempt", "expected"), [(1, 1), (2, 2), (3, 4), (4, 8), (6, 32), (7, 60), (50, 60)]
)
def test_backoff_doubles_up_to_the_cap(attempt: int, expected: float) -> None:
    assert backoff_seconds(NO_JITTER, attempt) == expected


def test_backoff_before_the_first_attempt_is_the_initial_delay() -> None:
    assert backoff_seconds(NO_JITTER, 0) == 1


def test_backoff_other_multiplier() -> None:
    policy = replace(NO_JITTER, initial_delay_seconds=0.5, multiplier=3, max_delay_seconds=1000)
    assert [backoff_seconds(policy, n) for n in (1, 2, 3)] == [0.5, 1.5, 4.5]


@given(
    attempt=st.integers(1, 40),
    jitter=st.floats(0.01, 1.0),
    seed=st.integers(0, 2**32),
)
def test_jitter_stays_within_its_spread_and_never_negative(
    attempt: int, jitter: float, seed: int
) -> None:
    policy = replace(NO_JITTER, jitter=jitter)
    base = min(60.0, 2.0 ** (attempt - 1))
    delay = backoff_seconds(policy, attempt, random.Random(seed))
    assert max(0.0, base * (1 - jitter)) - 1e-9 <= delay <= base * (1 + jitter) + 1e-9
    assert delay >= 0


def test_jitter_is_reproducible_with_a_seeded_rng_and_actually_spreads() -> None:
    policy = replace(NO_JITTER, jitter=0.5)
    a = [backoff_seconds(policy, 4, random.Random(7)) for _ in range(3)]
    assert len(set(a)) == 1
    rng = random.Random(1)
    spread = {backoff_seconds(policy, 4, rng) for _ in range(50)}
    assert len(spread) > 1


def test_no_retry_when_not_retryable() -> None:
    assert next_retry_delay(_task(), retryable=False) is None
    assert next_retry_delay(_task(), retryable=False, retry_after_seconds=5) is None


def test_retry_delay_follows_the_attempts_in_the_series() -> None:
    assert next_retry_delay(_task(attempts=1), retryable=True) == 1
    assert next_retry_delay(_task(attempts=3), retryable=True) == 4
    # A replayed task (series_start=5) starts its backoff over.
    assert next_retry_delay(_task(attempts=6, series_start=5), retryable=True) == 1


def test_no_retry_once_attempts_are_exhausted() -> None:
    assert next_retry_delay(_task(attempts=4), retryable=True) == 8
    assert next_retry_delay(_task(attempts=5), retryable=True) is None
    assert next_retry_delay(_task(attempts=9, series_start=5), retryable=True) == 8
    assert next_retry_delay(_task(attempts=10, series_start=5), retryable=True) is None
    one_shot = replace(NO_JITTER, max_attempts=1)
    assert next_retry_delay(_task(one_shot, attempts=1), retryable=True) is None


def test_retry_after_wins_only_when_longer() -> None:
    task = _task(attempts=3)  # backoff 4 s
    assert next_retry_delay(task, retryable=True, retry_after_seconds=2) == 4
    assert next_retry_delay(task, retryable=True, retry_after_seconds=120) == 120


def test_retry_after_is_bounded_to_one_day() -> None:
    assert MAX_RETRY_AFTER_SECONDS == 86_400
    delay = next_retry_delay(_task(), retryable=True, retry_after_seconds=10**9)
    assert delay == MAX_RETRY_AFTER_SECONDS


def test_retry_after_does_not_revive_an_exhausted_task() -> None:
    assert next_retry_delay(_task(attempts=5), retryable=True, retry_after_seconds=1) is None


# -- arithmetic on stored values never raises (SPEC §7 "Bounded by construction") -------------


@pytest.mark.parametrize("attempt", [156, 1000, 10**6, 10**400])
def test_a_huge_multiplier_at_a_late_attempt_is_the_cap_not_an_overflow(attempt: int) -> None:
    # multiplier ** (attempt - 1) computed before the cap would raise OverflowError at 156.
    policy = replace(NO_JITTER, multiplier=100, max_delay_seconds=3600)
    assert backoff_seconds(policy, attempt) == 3600


def test_a_retry_series_that_long_still_gets_a_delay() -> None:
    policy = RetryPolicy(
        max_attempts=10**9, initial_delay_seconds=1, max_delay_seconds=60, multiplier=100, jitter=0
    )
    assert next_retry_delay(_task(policy, attempts=156), retryable=True) == 60


def test_a_tiny_initial_delay_with_a_huge_power_stays_finite() -> None:
    policy = replace(NO_JITTER, initial_delay_seconds=5e-324, multiplier=1e10, max_delay_seconds=1)
    assert backoff_seconds(policy, 40) == 1.0
    assert 0 <= backoff_seconds(policy, 30) <= 1.0


def test_stored_values_that_are_not_numbers_fall_back_to_the_defaults() -> None:
    broken = RetryPolicy(
        max_attempts="x",  # type: ignore[arg-type]
        initial_delay_seconds=None,  # type: ignore[arg-type]
        max_delay_seconds=math.nan,
        multiplier="fast",  # type: ignore[arg-type]
        jitter=math.inf,
    )
    assert 0 <= backoff_seconds(broken, 3) <= MAX_BACKOFF_SECONDS
    assert next_retry_delay(_task(broken, attempts=1), retryable=True) is not None


def test_no_delay_is_longer_than_the_bound() -> None:
    policy = replace(NO_JITTER, initial_delay_seconds=1e308, max_delay_seconds=math.inf)
    assert backoff_seconds(policy, 1) == MAX_BACKOFF_SECONDS


_ANY_FLOAT = st.floats(allow_nan=True, allow_infinity=True)


@given(
    initial=_ANY_FLOAT,
    maximum=_ANY_FLOAT,
    multiplier=st.one_of(_ANY_FLOAT, st.floats(1, 1000)),
    jitter=_ANY_FLOAT,
    attempt=st.one_of(st.integers(-5, 400), st.integers(-(10**30), 10**30)),
    seed=st.integers(0, 2**32),
)
@example(initial=math.nan, maximum=0.0, multiplier=2.0, jitter=0.0, attempt=2, seed=0)
@example(initial=5e-324, maximum=math.inf, multiplier=100.0, jitter=1.0, attempt=10**6, seed=1)
@settings(max_examples=500)
def test_backoff_never_raises_and_stays_within_bounds(
    initial: float, maximum: float, multiplier: float, jitter: float, attempt: int, seed: int
) -> None:
    policy = RetryPolicy(
        max_attempts=5,
        initial_delay_seconds=initial,
        max_delay_seconds=maximum,
        multiplier=multiplier,
        jitter=jitter,
    )
    delay = backoff_seconds(policy, attempt, random.Random(seed))
    assert math.isfinite(delay)
    assert 0.0 <= delay <= MAX_BACKOFF_SECONDS


@given(
    initial=st.floats(0.001, 1e6),
    maximum=st.floats(0.001, 1e7),
    multiplier=st.floats(1, 100),
    attempt=st.integers(1, 10**6),
)
def test_backoff_is_the_formula_capped_for_valid_policies(
    initial: float, maximum: float, multiplier: float, attempt: int
) -> None:
    policy = RetryPolicy(
        max_attempts=5,
        initial_delay_seconds=min(initial, maximum),
        max_delay_seconds=maximum,
        multiplier=multiplier,
        jitter=0,
    )
    cap = min(maximum, MAX_BACKOFF_SECONDS)
    exact = math.log(min(initial, maximum)) + (attempt - 1) * math.log(multiplier)
    expected = cap if exact >= math.log(cap) else math.exp(exact)
    assert math.isclose(backoff_seconds(policy, attempt), min(cap, expected), rel_tol=1e-6)
