"""Maintained task counts: the rules both stores share.

Every store keeps ``task_counts`` (tenant, queue, status → n) with the transitions themselves
(triggers; see each backend's ``0004_counters.sql``), so queue figures and ``/metrics`` read a
few rows instead of counting the task table. Counts are exact as long as every change goes
through the triggers; a *reconcile* round recounts one (tenant, queue) against the task table
and writes the difference as a correction, so a drift (a change made with triggers disabled, a
restored backup) heals without a full scan. The round is bounded: a queue holding more than
``max_rows`` tasks is not recounted (its counts are trusted) and is reported as skipped.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from duetime.types import QueueStats, TaskStatus

RECONCILE_MAX_ROWS = 200_000
"""The most tasks one reconcile round counts (one queue per round)."""

FOLD_BATCH = 10_000
"""The most pending count deltas one fold round moves into the totals (PostgreSQL)."""

_STATUS = {s.value: s for s in TaskStatus}


@dataclass(frozen=True, slots=True, order=True)
class CountKey:
    """One queue of one tenant, the unit a reconcile round recounts (ordered: rounds walk the
    keys in order and wrap around)."""

    tenant_id: str
    queue: str


@dataclass(frozen=True, slots=True)
class Reconciled:
    """What a reconcile round did to ``key``: ``corrected`` is the sum of the absolute
    corrections written (0 when the counters were right); ``skipped`` when the queue holds more
    than the round may count."""

    key: CountKey
    corrected: int
    skipped: bool = False


def corrections(real: Mapping[str, int], counted: Mapping[str, int]) -> dict[str, int]:
    """Per status, what to add to the counters so they equal the real count (zeros left out)."""
    return {
        status: real.get(status, 0) - counted.get(status, 0)
        for status in sorted(set(real) | set(counted))
        if real.get(status, 0) != counted.get(status, 0)
    }


def queue_stats_from(
    tenant_id: str,
    counts: Iterable[tuple[str, str, int]],
    oldest_ready_lag: Mapping[str, float],
) -> list[QueueStats]:
    """Fold counter rows ``(queue, status, n)`` and each queue's oldest-ready lag into
    :class:`QueueStats`, by queue name; queues whose counts are all zero are left out."""
    by_queue: dict[str, dict[TaskStatus, int]] = {}
    for queue, status, n in counts:
        if n > 0:
            by_queue.setdefault(queue, {})[_STATUS[status]] = n
    return [
        QueueStats(
            tenant_id=tenant_id,
            name=queue,
            counts=found,
            oldest_due_lag_seconds=(
                max(0.0, oldest_ready_lag[queue]) if queue in oldest_ready_lag else None
            ),
        )
        for queue, found in sorted(by_queue.items())
    ]
