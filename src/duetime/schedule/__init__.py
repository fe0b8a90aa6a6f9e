"""Recurring schedules' timing as pure policy: fire times, DST handling, jitter, descriptions.

No store, no I/O, no clock: every function takes the instants it needs. The public names are
re-exported by :mod:`duetime.cron`; see the modules for the rules (``cron_expr``, ``every_expr``,
``rrule_expr`` for the three expression kinds, ``dst`` for daylight saving time).
"""

from __future__ import annotations

from duetime.schedule.describe import describe
from duetime.schedule.occurrences import (
    Occurrence,
    jitter_for,
    next_after,
    occurrences_after,
    occurrences_between,
    skipped_between,
)
from duetime.schedule.parse import parse_spec
from duetime.schedule.spec import ScheduleSpec

__all__ = [
    "Occurrence",
    "ScheduleSpec",
    "describe",
    "jitter_for",
    "next_after",
    "occurrences_after",
    "occurrences_between",
    "parse_spec",
    "skipped_between",
]
