"""A schedule's settings as data: JSON in the API's shape, its :class:`ScheduleSpec`, and the task
one occurrence becomes. Pure (no clock, no I/O)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import orjson

from duetime.schedule.spec import TIMING_FIELDS, ScheduleSpec
from duetime.types import NewTask, RetryPolicy, Schedule, ScheduleConfig

TEMPLATE_FIELDS = (
    "name",
    "queue",
    "target",
    "payload",
    "priority",
    "retry",
    "timeout_seconds",
    "labels",
    "concurrency_key",
)
"""Keys of a stored task template (``ScheduleConfig.task``)."""

CONFIG_FIELDS = (
    "cron",
    "every",
    "rrule",
    "timezone",
    "start_at",
    "end_at",
    "jitter_seconds",
    "dst",
    "overlap",
    "catchup",
    "catchup_window_seconds",
    "catchup_max_runs",
    "task",
)
"""The settings of a schedule as the API names them (what a revision compares)."""


def _time(value: datetime | None) -> str | None:
    if value is None:
        return None
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def config_to_json(config: ScheduleConfig) -> dict[str, Any]:
    """The settings in the API's shape (times as RFC 3339 UTC strings, ``dst`` nested)."""
    return {
        "cron": config.cron,
        "every": config.every,
        "rrule": config.rrule,
        "timezone": config.timezone,
        "start_at": _time(config.start_at),
        "end_at": _time(config.end_at),
        "jitter_seconds": config.jitter_seconds,
        "dst": {"nonexistent": config.dst_nonexistent, "ambiguous": config.dst_ambiguous},
        "overlap": config.overlap.value,
        "catchup": config.catchup.value,
        "catchup_window_seconds": config.catchup_window_seconds,
        "catchup_max_runs": config.catchup_max_runs,
        "task": dict(config.task),
    }


def config_diff(
    before: Mapping[str, Any], after: Mapping[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The fields that differ between two JSON documents: ``(old values, new values)``."""
    keys = [k for k in dict.fromkeys([*before, *after]) if before.get(k) != after.get(k)]
    return {k: before.get(k) for k in keys}, {k: after.get(k) for k in keys}


def spec_of(config: ScheduleConfig, anchor: datetime) -> ScheduleSpec:
    """The timing of ``config`` (``anchor``: what ``every`` and ``rrule`` count from without a
    ``start_at``; the schedule's ``anchor_at``). A cron expression does not use the anchor, so
    it is left out: every schedule with the same cron and zone then shares one compiled spec
    (the expression layer caches them by value)."""
    timing = {name: getattr(config, name) for name in TIMING_FIELDS}
    return ScheduleSpec(**timing, anchor=None if config.cron is not None else anchor)


def schedule_spec(schedule: Schedule) -> ScheduleSpec:
    """The timing of a stored schedule."""
    return spec_of(schedule.config, schedule.anchor_at)


def occurrence_task(schedule: Schedule, nominal: datetime, run_at: datetime | None) -> NewTask:
    """The task one occurrence becomes: the template, with ``schedule_id`` and ``scheduled_for =
    nominal``. ``run_at`` None means now (by the store's clock)."""
    template = schedule.config.task
    retry = template.get("retry")
    labels = template.get("labels") or {}
    return NewTask(
        tenant_id=schedule.tenant_id,
        target=template["target"],
        payload_json=orjson.dumps(template.get("payload")).decode(),
        name=template.get("name"),
        queue=template.get("queue") or "default",
        run_at=run_at,
        priority=int(template.get("priority") or 0),
        retry=RetryPolicy.from_json(retry) if retry else RetryPolicy(),
        timeout_seconds=float(template.get("timeout_seconds") or 30.0),
        concurrency_key=template.get("concurrency_key"),
        labels=dict(labels),
        schedule_id=schedule.id,
        scheduled_for=nominal,
    )
