"""What a user change does to a schedule's stored state: one pure function both backends apply
inside their transaction, so the two cannot drift apart."""

from __future__ import annotations

import dataclasses
from datetime import datetime

from duetime.types import Schedule, ScheduleChange

BUFFERED_DROPPED_BY_PAUSE = (
    "was waiting for the previous run to end (overlap=buffer_one) when the schedule was paused"
)
"""Ledger detail of a ``skipped_paused`` row for an occurrence a pause dropped from the buffer."""


def apply_change(current: Schedule, change: ScheduleChange, now: datetime) -> Schedule:
    """``current`` with ``change`` applied at store time ``now`` (version and ``updated_at`` are
    the store's to bump). See :class:`~duetime.types.ScheduleChange` for the fields' meaning.

    Pausing keeps the first pause's ``paused_at`` and drops a buffered occurrence (the store
    records it ``skipped_paused``). Rewinding or resuming sets ``next_run_at`` to the cursor, so
    the next materializer round looks at the schedule and computes the real next run.
    """
    s = current
    paused, note, paused_at, buffered = s.paused, s.pause_note, s.paused_at, s.buffered_at
    if change.paused is True:
        paused, note = True, change.pause_note
        paused_at = s.paused_at if s.paused and s.paused_at is not None else now
        buffered = None
    elif change.paused is False:
        paused, note, paused_at = False, None, None
    cursor, next_run = s.materialized_until, s.next_run_at
    resumed_at, resume_catchup = s.resumed_at, s.resume_catchup
    if change.rewind_to is not None:
        cursor = min(cursor, change.rewind_to)
        next_run = cursor
    if change.resume_at is not None:
        resumed_at, resume_catchup = change.resume_at, change.resume_catchup
        next_run = cursor
    return dataclasses.replace(
        s,
        config=change.config or s.config,
        paused=paused,
        pause_note=note,
        paused_at=paused_at,
        buffered_at=buffered,
        materialized_until=cursor,
        next_run_at=next_run,
        resumed_at=resumed_at,
        resume_catchup=resume_catchup,
    )
