"""When a throttled or debounced create runs: pure arithmetic on the store's clock.

Throttle is the generic cell rate algorithm (GCRA), the token bucket told as one time per key:
its *theoretical arrival time* ``tat``, when the key's next create would run were the bucket
empty. A create arriving at ``t`` (its ``run_at``, or now) runs at
``max(t, tat - (burst - 1) / rate)`` and moves ``tat`` to ``max(tat, t) + 1 / rate``: ``burst``
creates at once run at once, the rest one every ``1 / rate`` seconds — delayed, never dropped.
A key whose ``tat`` has passed holds nothing (its ledger row may go).

Debounce: each create of a burst moves the waiting task to ``period`` after it, but never past
``max_wait`` after the burst's first create.
"""

from __future__ import annotations

from datetime import datetime, timedelta


def throttle_slot(
    tat: datetime | None, arrival: datetime, rate: float, burst: int
) -> tuple[datetime, datetime]:
    """When a create arriving at ``arrival`` runs, and the key's new ``tat`` (``tat`` None: the
    key holds nothing)."""
    step = timedelta(seconds=1.0 / rate)
    if tat is None or tat < arrival:
        tat = arrival
    allowed = tat - step * (burst - 1)
    return max(arrival, allowed), tat + step


def debounce_due(now: datetime, since: datetime, period: float, max_wait: float) -> datetime:
    """When a debounced task whose burst began at ``since`` runs after a create at ``now``."""
    return min(now + timedelta(seconds=period), since + timedelta(seconds=max_wait))
