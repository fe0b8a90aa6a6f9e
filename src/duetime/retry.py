"""Retry policy as pure functions: no clock, no I/O, and no input that makes them raise.

A policy is read back from the store, where an old row, a bug or a hand edit may have left any
value (a multiplier of 100 at attempt 1,000, an infinite cap, a NaN, a string): the arithmetic
here must still give an ordinary delay, or a single such row would stop the loop that computes
it for every tenant (SPEC §7 "Bounded by construction"). So every field is read through
:func:`_number`, and the exponential is compared with the cap in log space, never computed past it.
"""

from __future__ import annotations

import math
import random
from typing import Any

from duetime.types import RetryPolicy, Task

MAX_RETRY_AFTER_SECONDS = 86_400.0
"""A receiver's ``Retry-After`` counts up to one day."""

MAX_BACKOFF_SECONDS = 30 * 86_400.0
"""No backoff is longer than this, whatever the stored policy says (the API allows as much)."""

_DEFAULT = RetryPolicy()
_MAX_STEPS = 10**9


def _number(value: Any, default: float, low: float, high: float) -> float:
    """``value`` as a float within ``[low, high]``; ``default`` when it is not a finite number."""
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        number = default
    if math.isnan(number):
        number = default
    return min(high, max(low, number))


def backoff_seconds(policy: RetryPolicy, attempt: int, rng: random.Random | None = None) -> float:
    """Seconds to wait after failed attempt number ``attempt`` (1-based within its series).

    ``initial * multiplier ** (attempt - 1)``, capped at ``max_delay`` (and at
    :data:`MAX_BACKOFF_SECONDS`), then spread uniformly by ``±jitter`` (a fraction), never below
    zero. Never raises: the power is only computed while it stays below the cap.
    """
    cap = _number(policy.max_delay_seconds, _DEFAULT.max_delay_seconds, 0.0, MAX_BACKOFF_SECONDS)
    initial = _number(policy.initial_delay_seconds, _DEFAULT.initial_delay_seconds, 0.0, cap)
    multiplier = _number(policy.multiplier, _DEFAULT.multiplier, 0.0, math.inf)
    try:
        # Past a billion steps nothing changes but the risk of an int too large for a float.
        steps = min(_MAX_STEPS, max(0, int(attempt) - 1))
    except (TypeError, ValueError, OverflowError):
        steps = 0
    if initial <= 0.0 or steps == 0 or multiplier == 1.0:
        base = initial
    elif multiplier == 0.0:
        base = 0.0
    else:
        # Compare in log space: the power is computed only when the result is below the cap.
        log_base = math.log(initial) + steps * math.log(multiplier)
        if log_base >= math.log(cap):
            base = cap
        else:
            try:
                base = min(cap, initial * multiplier**steps)
            except OverflowError:  # a tiny initial delay times a huge power
                base = min(cap, math.exp(log_base))
    jitter = _number(policy.jitter, 0.0, 0.0, 1.0)
    if jitter:
        spread = base * jitter
        base += (rng or random).uniform(-spread, spread)
    return min(MAX_BACKOFF_SECONDS, max(0.0, base))


def next_retry_delay(
    task: Task, *, retryable: bool, retry_after_seconds: float | None = None
) -> float | None:
    """Delay before the next attempt of ``task`` after a failed attempt, or ``None`` for no retry.

    ``task.attempts`` already counts the attempt that just failed. A ``Retry-After`` from the
    receiver wins over the backoff when it is longer, bounded to one day. A stored
    ``max_attempts`` that is not a number counts as the default.
    """
    max_attempts = _number(task.retry.max_attempts, _DEFAULT.max_attempts, 0.0, math.inf)
    if not retryable or task.attempts_in_series >= max_attempts:
        return None
    delay = backoff_seconds(task.retry, task.attempts_in_series)
    if retry_after_seconds is not None:
        delay = max(delay, _number(retry_after_seconds, 0.0, 0.0, MAX_RETRY_AFTER_SECONDS))
    return delay
