"""Recurring schedules' timing as pure policy: fire times, DST handling, jitter, descriptions.

No store, no I/O, no clock: every function takes the instants it needs (SPEC §3 "Schedules")::

    spec = parse_spec(cron="30 2 * * *", timezone="America/New_York")  # ValidationError(field=...)
    occurrences_after(spec, after, count=10)     # [Occurrence(nominal, note, kind), ...]
    occurrences_between(spec, start, end, limit)  # fire times in (start, end]
    skipped_between(spec, start, end)            # DST-gap times dropped by dst.nonexistent=skip
    next_after(spec, after)                      # next_run_at
    jitter_for(schedule_id, nominal, spec.jitter_seconds)  # deterministic, in [0, jitter]
    describe(spec)                               # "At 02:30 every day (America/New_York)"

``Occurrence.kind`` maps to tick outcomes: ``"dst_shifted"`` (ran right after a DST gap),
``"dst_repeat"`` (second run of a doubled wall time, an ordinary ``fired`` tick), ``None``.
See the modules for the rules (``cron_expr``, ``every_expr``, ``rrule_expr`` for the three
expression kinds, ``dst`` for daylight saving time).
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
