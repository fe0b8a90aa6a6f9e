"""``schedules``, ``schedule_ticks`` and ``schedule_revisions`` rows ↔ duetime values (SQLite)."""

from __future__ import annotations

import sqlite3
from typing import Any

import orjson

from duetime.store.sqlite.rows import Row, dumps, from_micros, opt_from_micros, to_micros
from duetime.types import (
    CatchupPolicy,
    OverlapPolicy,
    Schedule,
    ScheduleConfig,
    ScheduleRevision,
    TaskStatus,
    Tick,
    TickOutcome,
)


def _micros(value: Any) -> int | None:
    return None if value is None else to_micros(value)


def _dict(row: Row) -> dict[str, Any]:
    if isinstance(row, sqlite3.Row):
        return dict(zip(row.keys(), row, strict=True))
    return dict(row)


def config_columns(config: ScheduleConfig) -> dict[str, Any]:
    """The ``schedules`` columns that hold a :class:`ScheduleConfig`."""
    return {
        "cron": config.cron,
        "every": config.every,
        "rrule": config.rrule,
        "timezone": config.timezone,
        "start_at": _micros(config.start_at),
        "end_at": _micros(config.end_at),
        "jitter_seconds": config.jitter_seconds,
        "dst_nonexistent": config.dst_nonexistent,
        "dst_ambiguous": config.dst_ambiguous,
        "task": dumps(dict(config.task)),
        "overlap": config.overlap.value,
        "catchup": config.catchup.value,
        "catchup_window_seconds": config.catchup_window_seconds,
        "catchup_max_runs": config.catchup_max_runs,
    }


def state_columns(schedule: Schedule) -> dict[str, Any]:
    """The columns a user change rewrites besides the config (see ``schedule_write``)."""
    return {
        "paused": int(schedule.paused),
        "pause_note": schedule.pause_note,
        "paused_at": _micros(schedule.paused_at),
        "resumed_at": _micros(schedule.resumed_at),
        "resume_catchup": None
        if schedule.resume_catchup is None
        else schedule.resume_catchup.value,
        "next_run_at": _micros(schedule.next_run_at),
        "materialized_until": to_micros(schedule.materialized_until),
        "buffered_at": _micros(schedule.buffered_at),
    }


def schedule_from_row(row: Row) -> Schedule:
    r = _dict(row)
    config = ScheduleConfig(
        cron=r["cron"],
        every=r["every"],
        rrule=r["rrule"],
        timezone=r["timezone"],
        start_at=opt_from_micros(r["start_at"]),
        end_at=opt_from_micros(r["end_at"]),
        jitter_seconds=r["jitter_seconds"],
        dst_nonexistent=r["dst_nonexistent"],
        dst_ambiguous=r["dst_ambiguous"],
        overlap=OverlapPolicy(r["overlap"]),
        catchup=CatchupPolicy(r["catchup"]),
        catchup_window_seconds=r["catchup_window_seconds"],
        catchup_max_runs=r["catchup_max_runs"],
        task=orjson.loads(r["task"]),
    )
    return Schedule(
        id=r["id"],
        tenant_id=r["tenant_id"],
        config=config,
        anchor_at=from_micros(r["anchor_at"]),
        paused=bool(r["paused"]),
        pause_note=r["pause_note"],
        paused_at=opt_from_micros(r["paused_at"]),
        resumed_at=opt_from_micros(r["resumed_at"]),
        resume_catchup=None if r["resume_catchup"] is None else CatchupPolicy(r["resume_catchup"]),
        next_run_at=opt_from_micros(r["next_run_at"]),
        materialized_until=from_micros(r["materialized_until"]),
        buffered_at=opt_from_micros(r["buffered_at"]),
        last_task_id=r["last_task_id"],
        version=r["version"],
        created_at=from_micros(r["created_at"]),
        updated_at=from_micros(r["updated_at"]),
        deleted=bool(r["deleted"]),
        key=r.get("key"),
    )


def last_task_status(row: Row) -> TaskStatus | None:
    value = row["last_task_status"]
    return None if value is None else TaskStatus(value)


def tick_from_row(row: Row) -> Tick:
    return Tick(
        schedule_id=row["schedule_id"],
        nominal=from_micros(row["nominal"]),
        outcome=TickOutcome(row["outcome"]),
        task_id=row["task_id"],
        detail=row["detail"],
        recorded_at=from_micros(row["recorded_at"]),
    )


def revision_from_row(row: Row) -> ScheduleRevision:
    return ScheduleRevision(
        id=row["id"],
        schedule_id=row["schedule_id"],
        at=from_micros(row["at"]),
        actor=row["actor"],
        action=row["action"],
        before=orjson.loads(row["before"]),
        after=orjson.loads(row["after"]),
    )
