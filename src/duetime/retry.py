"""Retry policy as pure functions: no clock, no I/O."""

from __future__ import annotations

import random

from duetime.types import RetryPolicy, Task

MAX_RETRY_AFTER_SECONDS = 86_400.0


def backoff_seconds(policy: RetryPolicy, attempt: int, rng: random.Random | None = None) -> float:
    """Seconds to wait after failed attempt number ``attempt`` (1-based within its series).

    ``initial * multiplier ** (attempt - 1)``, capped at ``max_delay``, then spread uniformly by
    ``±jitter`` (a fraction), never below zero.
    """
    base = policy.initial_delay_seconds * policy.multiplier ** max(0, attempt - 1)
    base = min(base, policy.max_delay_seconds)
    if policy.jitter:
        spread = base * policy.jitter
        base += (rng or random).uniform(-spread, spread)
    return max(0.0, base)


def next_retry_delay(
    task: Task, *, retryable: bool, retry_after_seconds: float | None = None
) -> float | None:
    """Delay before the next attempt of ``task`` after a failed attempt, or ``None`` for no retry.

    ``task.attempts`` already counts the attempt that just failed. A ``Retry-After`` from the
    receiver wins over the backoff when it is longer, bounded to one day.
    """
    if not retryable or task.attempts_in_series >= task.retry.max_attempts:
        return None
    delay = backoff_seconds(task.retry, task.attempts_in_series)
    if retry_after_seconds is not None:
        delay = max(delay, min(retry_after_seconds, MAX_RETRY_AFTER_SECONDS))
    return delay
