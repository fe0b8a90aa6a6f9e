"""A schedule's next runs and the daylight-saving changes ahead, as the dashboard shows them
(what ``GET /v1/schedules/{id}/upcoming`` answers, with the DST notes gathered).

Pure and bounded: :func:`schedule_preview` is the dashboard's evaluation job (it runs in the
evaluation pool, :mod:`duetime.schedule.evaluation`, never on the event loop), on the evaluation
budget (:mod:`duetime.schedule.budget`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from duetime.schedule.budget import BudgetExceeded, within_budget
from duetime.schedule.config import schedule_spec
from duetime.schedule.occurrences import occurrences_after, skipped_between
from duetime.types import Schedule

DST_LOOKAHEAD_RUNS = 500
"""Runs searched for the "DST changes ahead" list: over a year of a daily schedule."""
DST_AHEAD_SHOWN = 6


def upcoming(s: Schedule, after: datetime, count: int) -> list[dict[str, Any]]:
    """The next ``count`` runs after ``after`` in the schedule's zone, with their DST notes
    (what ``GET /v1/schedules/{id}/upcoming`` answers)."""
    spec = schedule_spec(s)
    return [
        {"at": o.nominal.astimezone(spec.zone), "note": o.note, "kind": o.kind}
        for o in occurrences_after(spec, after, count)
    ]


def dst_ahead(s: Schedule, after: datetime) -> list[dict[str, Any]]:
    """The first runs within the next :data:`DST_LOOKAHEAD_RUNS` that a DST change moves,
    repeats or (under ``dst.nonexistent = skip``) drops, earliest first."""
    spec = schedule_spec(s)
    runs = occurrences_after(spec, after, DST_LOOKAHEAD_RUNS)
    found: list[dict[str, Any]] = [
        {"at": o.nominal.astimezone(spec.zone), "note": o.note, "kind": o.kind or "dst"}
        for o in runs
        if o.note
    ]
    if runs:
        found += [
            {"at": at.astimezone(spec.zone), "note": note, "kind": "dst_skipped"}
            for at, note in skipped_between(spec, after, runs[-1].nominal)
        ]
    found.sort(key=lambda item: item["at"])
    return found[:DST_AHEAD_SHOWN]


def schedule_preview(
    s: Schedule, after: datetime, count: int
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(:func:`upcoming`, :func:`dst_ahead`), each on its own evaluation budget: the next runs
    over it are ``BudgetExceeded`` naming ``count``; DST changes that cannot be found within it
    are an empty list (the page shows the rest)."""
    with within_budget("count", f"{count} fire times after {after.isoformat()}"):
        runs = upcoming(s, after, count)
    try:
        with within_budget("after", "the daylight-saving changes ahead"):
            changes = dst_ahead(s, after)
    except BudgetExceeded:
        changes = []
    return runs, changes
