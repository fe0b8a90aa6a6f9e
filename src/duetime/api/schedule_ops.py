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
import logging
from collections import OrderedDict
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from fastapi import Request

from duetime.api.convert import TaskBuilder
from duetime.api.deps import Services, bearer_token
from duetime.api.schedule_schemas import DstIn, ScheduleCreate, SchedulePatchIn, TaskTemplateIn
from duetime.api.schemas import TaskCreate
from duetime.auth import hash_api_key
from duetime.delivery.redact import public_target
from duetime.errors import ValidationError
from duetime.ids import is_uuid
from duetime.schedule import ScheduleSpec, describe, occurrences_after, parse_spec
from duetime.schedule.budget import Budget, BudgetExceeded, within_budget
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
CHECK_COUNT = 10
"""A new or changed schedule must yield this many next fire times within the evaluation budget
(:mod:`duetime.schedule.budget`), or it is refused (422 naming its expression)."""
NEXT_RUN_CACHE_ENTRIES = 10_000

log = logging.getLogger(__name__)


class NextRuns:
    """The next fire time of each recent spec, so reads do not search again (LRU).

    An entry ``(after, found)`` says: the first fire time strictly after ``after`` is ``found``
    (None: none). It answers every ``now`` in ``[after, found)`` exactly, since no fire time lies
    between; once ``found`` has passed, the next read searches once more.
    """

    def __init__(self, max_entries: int = NEXT_RUN_CACHE_ENTRIES) -> None:
        self.max_entries = max_entries
        self._entries: OrderedDict[ScheduleSpec, tuple[datetime, datetime | None]] = OrderedDict()

    def get(self, spec: ScheduleSpec, now: datetime) -> tuple[bool, datetime | None]:
        """(hit, next fire time after ``now``)."""
        entry = self._entries.get(spec)
        if entry is None:
            return False, None
        after, found = entry
        if now < after or (found is not None and now >= found):
            return False, None
        self._entries.move_to_end(spec)
        return True, found

    def put(self, spec: ScheduleSpec, after: datetime, found: datetime | None) -> None:
        self._entries[spec] = (after, found)
        self._entries.move_to_end(spec)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)


NEXT_RUNS = NextRuns()
"""This process's cache of next fire times (a pure function of spec and instant: safe to share)."""


def expression_field(config: ScheduleConfig) -> str:
    """``cron``, ``every`` or ``rrule``: the field a refused evaluation names."""
    return "every" if config.every is not None else "rrule" if config.rrule is not None else "cron"


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


def _checked(config: ScheduleConfig, anchor: datetime, now: datetime) -> ScheduleConfig:
    """``config`` once the expression layer accepts its timing and its next
    :data:`CHECK_COUNT` fire times after ``now`` are found within the evaluation budget (raises
    ``ValidationError``); the first of them is kept in :data:`NEXT_RUNS` for reads."""
    field = expression_field(config)
    with within_budget(field, f"the next {CHECK_COUNT} fire times of this {field}"):
        spec = parse_spec(
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
        found = occurrences_after(spec, now, CHECK_COUNT)
    NEXT_RUNS.put(spec, now, found[0].nominal if found else None)
    return config


def config_from_create(
    body: ScheduleCreate, builder: TaskBuilder, tenant_id: str, anchor: datetime, now: datetime
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
    _checked(config, anchor, now)
    return dataclasses.replace(config, task=template_from(body.task, builder, tenant_id))


def config_from_patch(
    current: Schedule, body: SchedulePatchIn, builder: TaskBuilder, now: datetime
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
    return _checked(ScheduleConfig(**values), current.anchor_at, now)


def _utc(value: datetime | None) -> datetime | None:
    return None if value is None else value.astimezone(UTC)


def next_run_after(spec: ScheduleSpec, now: datetime) -> datetime | None:
    """The first fire time after ``now`` of a spec :func:`_checked` just accepted (cached
    there; searched on a budget otherwise)."""
    hit, found = NEXT_RUNS.get(spec, now)
    if hit:
        return found
    with within_budget(spec.kind, f"the next fire time of this {spec.kind}"):
        items = occurrences_after(spec, now, 1)
    found = items[0].nominal if items else None
    NEXT_RUNS.put(spec, now, found)
    return found


def next_run(s: Schedule, spec: ScheduleSpec, now: datetime, budget: Budget) -> datetime | None:
    """The first fire time after ``now`` without searching when it is known: from
    :data:`NEXT_RUNS`, or from the materializer's ``next_run_at`` while its cursor has not passed
    ``now`` (nothing fires between the cursor and it). Otherwise one search on ``budget``; if that
    runs out, None (and a warning: a schedule accepted at create time rarely gets there)."""
    if s.paused:
        return None
    hit, found = NEXT_RUNS.get(spec, now)
    if hit:
        return found
    if s.next_run_at is not None and s.materialized_until <= now < s.next_run_at:
        NEXT_RUNS.put(spec, now, s.next_run_at)
        return s.next_run_at
    try:
        with budget.spend("next_run_at", "next_run_at"):
            items = occurrences_after(spec, now, 1)
    except BudgetExceeded:
        log.warning("schedule %s: next_run_at not found within the budget", s.id)
        return None
    found = items[0].nominal if items else None
    NEXT_RUNS.put(spec, now, found)
    return found


def schedule_json(s: Schedule, now: datetime, budget: Budget | None = None) -> dict[str, Any]:
    """A schedule as the API returns it (``ScheduleOut``). ``next_run_at``: the first fire time
    after ``now`` (nominal), null while paused or once the schedule has ended (see
    :func:`next_run`; pass one ``budget`` for all the schedules of a page)."""
    spec = schedule_spec(s)
    budget = budget or Budget()
    data = config_to_json(s.config)
    data["start_at"], data["end_at"] = _utc(s.config.start_at), _utc(s.config.end_at)
    data = _public(data)
    try:
        # Parsing is cached per spec, so this is a lookup unless the cache has let it go.
        with budget.spend("description", "the description"):
            description = describe(spec)
    except BudgetExceeded:
        description = f"{spec.kind} {spec.expression}"
    return {
        "id": s.id,
        **data,
        "paused": s.paused,
        "pause_note": s.pause_note,
        "paused_at": s.paused_at,
        "next_run_at": next_run(s, spec, now, budget),
        "description": description,
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
        "before": _public(r.before),
        "after": _public(r.after),
    }


def _public(fields: Mapping[str, Any]) -> dict[str, Any]:
    """Schedule fields as the API shows them: a template's broker URL password is ``***``."""
    out = dict(fields)
    template = out.get("task")
    if isinstance(template, Mapping) and isinstance(template.get("target"), Mapping):
        out["task"] = {**template, "target": public_target(template["target"])}
    return out


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
