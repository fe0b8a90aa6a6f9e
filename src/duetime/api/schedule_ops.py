"""What the ``/v1/schedules`` routes share: bodies → :class:`ScheduleConfig` (validated like a
task create), the JSON of schedules, ticks and revisions, cursors, and who is calling.

Validation errors are :class:`~duetime.errors.ValidationError` naming the field: the expression
layer's (``cron``, ``every``, ``rrule``, ``timezone``, ``start_at``, ``end_at``,
``jitter_seconds``, ``dst.nonexistent``, ``dst.ambiguous``) and the task template's, prefixed
``task.`` (``task.target.url``, ``task.payload``).
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
from datetime import UTC, datetime
from typing import Any

from fastapi import Request

from duetime.api.convert import TaskBuilder
from duetime.api.deps import Services, bearer_token
from duetime.api.schedule_schemas import DstIn, ScheduleCreate, SchedulePatchIn, TaskTemplateIn
from duetime.api.schemas import TaskCreate
from duetime.auth import hash_api_key
from duetime.errors import ValidationError
from duetime.ids import is_uuid
from duetime.schedule import describe, next_after, parse_spec
from duetime.schedule.config import config_to_json, schedule_spec
from duetime.types import (
    CatchupPolicy,
    OverlapPolicy,
    Schedule,
    ScheduleConfig,
    ScheduleRevision,
    Tick,
)

DEV_ACTOR = "dev-mode"


async def actor_of(request: Request) -> str | None:
    """The id of the API key making the call (for revisions); ``dev-mode`` without auth."""
    found: Services = request.app.state.services
    if found.auth.dev_mode:
        return DEV_ACTOR
    token = bearer_token(request)
    if not token:
        return None
    key = await found.store.api_key_get_by_hash(hash_api_key(token))
    return None if key is None else key.id


def anchor_from(now: datetime) -> datetime:
    """A new schedule's anchor: the store's now to the whole second (so ``every: PT15M`` runs
    at :00 seconds, not at the creation's microseconds)."""
    return now.replace(microsecond=0)


def template_from(body: TaskTemplateIn, builder: TaskBuilder, tenant_id: str) -> dict[str, Any]:
    """The stored template, checked like a task create (payload size, the target guard)."""
    as_task = TaskCreate.model_construct(
        name=body.name,
        queue=body.queue,
        run_at=None,
        delay_seconds=None,
        target=body.target,
        payload=body.payload,
        idempotency_key=None,
        priority=body.priority,
        retry=body.retry,
        timeout_seconds=body.timeout_seconds,
        depends_on=[],
        concurrency_key=body.concurrency_key,
        labels=body.labels,
    )
    new = builder.new_task(as_task, tenant_id, None, prefix="task.")
    return {
        "name": new.name,
        "queue": new.queue,
        "target": dict(new.target),
        "payload": body.payload,
        "priority": new.priority,
        "retry": new.retry.to_json(),
        "timeout_seconds": new.timeout_seconds,
        "labels": dict(new.labels),
        "concurrency_key": new.concurrency_key,
    }


def _checked(config: ScheduleConfig, anchor: datetime) -> ScheduleConfig:
    """``config`` once the expression layer accepts its timing (raises ``ValidationError``)."""
    parse_spec(
        cron=config.cron,
        every=config.every,
        rrule=config.rrule,
        timezone=config.timezone,
        start_at=config.start_at,
        end_at=config.end_at,
        jitter_seconds=config.jitter_seconds,
        dst={"nonexistent": config.dst_nonexistent, "ambiguous": config.dst_ambiguous},
        anchor=anchor,
    )
    return config


def config_from_create(
    body: ScheduleCreate, builder: TaskBuilder, tenant_id: str, anchor: datetime
) -> ScheduleConfig:
    """The settings of a new schedule, fully validated (timing first, then the template)."""
    dst = body.dst if body.dst is not None else DstIn()
    config = ScheduleConfig(
        cron=body.cron,
        every=body.every,
        rrule=body.rrule,
        timezone=body.timezone,
        start_at=body.start_at,
        end_at=body.end_at,
        jitter_seconds=body.jitter_seconds,
        dst_nonexistent=dst.nonexistent,
        dst_ambiguous=dst.ambiguous,
        overlap=OverlapPolicy(body.overlap),
        catchup=CatchupPolicy(body.catchup),
        catchup_window_seconds=body.catchup_window_seconds,
        catchup_max_runs=body.catchup_max_runs,
    )
    _checked(config, anchor)
    return dataclasses.replace(config, task=template_from(body.task, builder, tenant_id))


def config_from_patch(
    current: Schedule, body: SchedulePatchIn, builder: TaskBuilder
) -> ScheduleConfig:
    """``current``'s settings with the patch applied, fully validated."""
    given = body.model_fields_set
    if not given:
        raise ValidationError("give at least one field to change")
    c = current.config
    expression = {"cron": c.cron, "every": c.every, "rrule": c.rrule}
    named = [k for k in expression if k in given]
    if len(named) > 1:
        raise ValidationError(
            f"give one of cron, every or rrule (got {' and '.join(named)})", field=named[1]
        )
    if named:
        expression = {k: getattr(body, k) if k == named[0] else None for k in expression}
    values: dict[str, Any] = {
        **expression,
        "timezone": body.timezone if "timezone" in given else c.timezone,
        "start_at": body.start_at if "start_at" in given else c.start_at,
        "end_at": body.end_at if "end_at" in given else c.end_at,
        "jitter_seconds": body.jitter_seconds if "jitter_seconds" in given else c.jitter_seconds,
        "dst_nonexistent": body.dst.nonexistent if body.dst else c.dst_nonexistent,
        "dst_ambiguous": body.dst.ambiguous if body.dst else c.dst_ambiguous,
        "overlap": OverlapPolicy(body.overlap) if body.overlap else c.overlap,
        "catchup": CatchupPolicy(body.catchup) if body.catchup else c.catchup,
        "catchup_window_seconds": body.catchup_window_seconds
        if "catchup_window_seconds" in given
        else c.catchup_window_seconds,
        "catchup_max_runs": body.catchup_max_runs
        if "catchup_max_runs" in given
        else c.catchup_max_runs,
        "task": template_from(body.task, builder, current.tenant_id)
        if body.task is not None
        else c.task,
    }
    return _checked(ScheduleConfig(**values), current.anchor_at)


def _utc(value: datetime | None) -> datetime | None:
    return None if value is None else value.astimezone(UTC)


def schedule_json(s: Schedule, now: datetime) -> dict[str, Any]:
    """A schedule as the API returns it (``ScheduleOut``). ``next_run_at``: the first fire time
    after ``now`` (nominal), null while paused or once the schedule has ended."""
    spec = schedule_spec(s)
    data = config_to_json(s.config)
    data["start_at"], data["end_at"] = _utc(s.config.start_at), _utc(s.config.end_at)
    return {
        "id": s.id,
        **data,
        "paused": s.paused,
        "pause_note": s.pause_note,
        "paused_at": s.paused_at,
        "next_run_at": None if s.paused else next_after(spec, now),
        "description": describe(spec),
        "version": s.version,
        "created_at": s.created_at,
        "updated_at": s.updated_at,
        "key": s.key,
    }


def tick_json(t: Tick) -> dict[str, Any]:
    return {
        "at": t.nominal,
        "outcome": t.outcome.value,
        "task_id": t.task_id,
        "detail": t.detail,
        "recorded_at": t.recorded_at,
    }


def revision_json(r: ScheduleRevision) -> dict[str, Any]:
    return {
        "id": r.id,
        "at": r.at,
        "actor": r.actor,
        "action": r.action,
        "before": dict(r.before),
        "after": dict(r.after),
    }


def encode(text: str) -> str:
    """An opaque cursor."""
    return base64.urlsafe_b64encode(text.encode()).rstrip(b"=").decode()


def decode(cursor: str) -> str:
    """The text inside a cursor made by :func:`encode`; ``ValidationError`` (field ``cursor``)
    for anything else."""
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        text = base64.b64decode(padded, altchars=b"-_", validate=True).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        text = ""
    if not text:
        raise ValidationError("not a cursor this server returned", field="cursor")
    return text


def decode_schedule_cursor(cursor: str) -> str:
    text = decode(cursor)
    if not is_uuid(text):
        raise ValidationError("not a cursor this server returned", field="cursor")
    return text


def tick_cursor(t: Tick) -> str:
    micros = int(t.nominal.timestamp()) * 1_000_000 + t.nominal.microsecond
    return encode(f"{micros}:{t.outcome.value}")


def decode_tick_cursor(cursor: str) -> tuple[datetime, str]:
    micros, _, outcome = decode(cursor).partition(":")
    try:
        seconds, rest = divmod(int(micros), 1_000_000)
        at = datetime.fromtimestamp(seconds, UTC).replace(microsecond=rest)
    except (ValueError, OverflowError, OSError):
        raise ValidationError("not a cursor this server returned", field="cursor") from None
    return at, outcome


def decode_revision_cursor(cursor: str) -> int:
    text = decode(cursor)
    if not text.isdigit():
        raise ValidationError("not a cursor this server returned", field="cursor")
    return int(text)
