"""Maintained task counts: the rules both stores share.

Every store keeps ``task_counts`` (tenant, queue, status → n) with the transitions themselves
(triggers; see each backend's ``0004_counters.sql``), so queue figures and ``/metrics`` read a
few rows instead of counting the task table. Counts are exact as long as every change goes
through the triggers; a *reconcile* round recounts one (tenant, queue) against the task table
and writes the difference as a correction, so a drift (a change made with triggers disabled, a
restored backup) heals without a full scan. The round is bounded: a queue holding more than
``max_rows`` tasks is not recounted (its counts are trusted) and is reported as skipped. The
store methods are :mod:`duetime.store.core.queueing`.
"""

from __future__ import annotations

from dataclasses import dataclass

RECONCILE_MAX_ROWS = 200_000
"""The most tasks one reconcile round counts (one queue per round)."""

FOLD_BATCH = 10_000
"""The most pending count deltas one fold round moves into the totals (PostgreSQL)."""


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
