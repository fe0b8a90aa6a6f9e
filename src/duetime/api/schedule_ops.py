"""What the ``/v1/schedules`` routes share: bodies → :class:`ScheduleConfig` (validated like a
task create), the JSON of schedules, ticks and revisions, and who is calling (their cursors are
:mod:`duetime.api.convert`'s).

Validation errors are :class:`~duetime.errors.ValidationError` naming the field: the expression
layer's (``cron``, ``every``, ``rrule``, ``timezone``, ``start_at``, ``end_at``,
``jitter_seconds``, ``dst.nonexistent``, ``dst.ambiguous``) and the task template's, prefixed
``task.`` (``task.target.url``, ``task.payload``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from fastapi import Request

from duetime.api.deps import Caller, Services, bearer_token
from duetime.api.schedule_schemas import DstIn, ScheduleCreate, SchedulePatchIn, TaskTemplateIn
from duetime.api.schemas import TaskCreate
from duetime.auth import hash_api_key
from duetime.delivery.redact import public_target
from duetime.delivery.sealing import SealError
from duetime.errors import ValidationError
from duetime.lifecycle.create import TaskBuilder
from duetime.schedule import ScheduleSpec, describe, occurrences_after
from duetime.schedule.budget import Budget, BudgetExceeded
from duetime.schedule.config import config_to_json, schedule_spec, spec_of
from duetime.schedule.evaluation import EvaluationPool, checked_first, next_times
from duetime.secrets.sealed import key_ids, redact
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
    """The stored template, checked like a task create (payload size, the target guard), and
    with no NUL in its payload: a template is stored as a JSON document, which PostgreSQL
    cannot hold U+0000 in (a task's payload is stored as text, which can)."""
    _no_nul(body.payload, "task.payload")
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


def _no_nul(value: Any, field: str) -> None:
    """``ValidationError`` naming ``field`` when a string or key of the JSON ``value`` holds
    U+0000."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            found = "\x00" in item
        elif isinstance(item, dict):
            found = any("\x00" in key for key in item)
            stack.extend(item.values())
        else:
            found = False
            if isinstance(item, list):
                stack.extend(item)
        if found:
            raise ValidationError(
                "a schedule's task payload must not contain the NUL character (U+0000)",
                field=field,
            )


async def _checked(
    evaluations: EvaluationPool,
    tenant_id: str,
    config: ScheduleConfig,
    anchor: datetime,
    now: datetime,
) -> datetime | None:
    """The first fire time after ``now`` of ``config``, once the expression layer accepts its
    timing and finds its next :data:`CHECK_COUNT` fire times within the evaluation budget, in
    the evaluation pool (raises ``ValidationError``, or ``TooManyRequests`` over the tenant's
    share of the pool); it is kept in :data:`NEXT_RUNS` for reads."""
    field = expression_field(config)
    timing = {
        "cron": config.cron,
        "every": config.every,
        "rrule": config.rrule,
        "timezone": config.timezone,
        "start_at": config.start_at,
        "end_at": config.end_at,
        "jitter_seconds": config.jitter_seconds,
        "dst": {"nonexistent": config.dst_nonexistent, "ambiguous": config.dst_ambiguous},
        "anchor": anchor,
    }
    _, first = await evaluations.run(tenant_id, checked_first, timing, field, CHECK_COUNT, now)
    NEXT_RUNS.put(spec_of(config, anchor), now, first)
    return first


async def config_from_create(
    evaluations: EvaluationPool,
    body: ScheduleCreate,
    builder: TaskBuilder,
    tenant_id: str,
    anchor: datetime,
    now: datetime,
) -> tuple[ScheduleConfig, datetime | None]:
    """The settings of a new schedule, fully validated (timing first, then the template), and
    its first fire time after ``now``."""
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
    first = await _checked(evaluations, tenant_id, config, anchor, now)
    return dataclasses.replace(config, task=template_from(body.task, builder, tenant_id)), first


async def config_from_patch(
    evaluations: EvaluationPool,
    current: Schedule,
    body: SchedulePatchIn,
    builder: TaskBuilder,
    now: datetime,
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
    config = ScheduleConfig(**values)
    await _checked(evaluations, current.tenant_id, config, current.anchor_at, now)
    return config


def _utc(value: datetime | None) -> datetime | None:
    return None if value is None else value.astimezone(UTC)


def known_next_run(s: Schedule, spec: ScheduleSpec, now: datetime) -> tuple[bool, datetime | None]:
    """(known, the first fire time after ``now``) without searching: None while paused, from
    :data:`NEXT_RUNS`, or from the materializer's ``next_run_at`` while its cursor has not passed
    ``now`` (nothing fires between the cursor and it)."""
    if s.paused:
        return True, None
    hit, found = NEXT_RUNS.get(spec, now)
    if hit:
        return True, found
    if s.next_run_at is not None and s.materialized_until <= now < s.next_run_at:
        NEXT_RUNS.put(spec, now, s.next_run_at)
        return True, s.next_run_at
    return False, None


def next_run(
    s: Schedule, spec: ScheduleSpec, now: datetime, budget: Budget | None
) -> datetime | None:
    """The first fire time after ``now``: :func:`known_next_run`, else one search on ``budget``
    (None: no search, and None); if that runs out, None (and a warning: a schedule accepted at
    create time rarely gets there)."""
    known, found = known_next_run(s, spec, now)
    if known or budget is None:
        return found
    try:
        with budget.spend("next_run_at", "next_run_at"):
            items = occurrences_after(spec, now, 1)
    except BudgetExceeded:
        log.warning("schedule %s: next_run_at not found within the budget", s.id)
        return None
    found = items[0].nominal if items else None
    NEXT_RUNS.put(spec, now, found)
    return found


async def schedules_json(
    evaluations: EvaluationPool, tenant_id: str, schedules: Sequence[Schedule], now: datetime
) -> list[dict[str, Any]]:
    """Schedules as the API returns them, the next runs nobody knows searched for in the
    evaluation pool (all of them on one budget: a page never searches longer than one read
    may)."""
    specs = [schedule_spec(s) for s in schedules]
    missing = list(
        dict.fromkeys(
            spec
            for s, spec in zip(schedules, specs, strict=True)
            if not known_next_run(s, spec, now)[0]
        )
    )
    if missing:
        found = await evaluations.run(tenant_id, next_times, missing, now)
        for spec, (searched, first) in zip(missing, found, strict=True):
            if searched:
                NEXT_RUNS.put(spec, now, first)
            else:
                log.warning(
                    "next_run_at of %s %r not found within the budget", spec.kind, spec.expression
                )
    return [schedule_json(s, now, search=False) for s in schedules]


async def schedule_out(call: Caller, s: Schedule, now: datetime) -> dict[str, Any]:
    """One schedule as the API returns it (see :func:`schedules_json`)."""
    [found] = await schedules_json(call.evaluations, call.tenant_id, [s], now)
    return found


def schedule_json(
    s: Schedule, now: datetime, budget: Budget | None = None, *, search: bool = True
) -> dict[str, Any]:
    """A schedule as the API returns it (``ScheduleOut``). ``next_run_at``: the first fire time
    after ``now`` (nominal), null while paused or once the schedule has ended (see
    :func:`next_run`; pass one ``budget`` for all the schedules of a page). ``search=False``:
    no search on the event loop, null when it is not known (:func:`schedules_json` searched)."""
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
        "next_run_at": next_run(s, spec, now, budget if search else None),
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
    """Schedule fields as the API shows them: the template's credentials as ``***`` and a
    fingerprint (revisions hold them so already; older ones may not)."""
    out = dict(fields)
    template = out.get("task")
    if isinstance(template, Mapping) and isinstance(template.get("target"), Mapping):
        out["task"] = {**template, "target": public_target(template["target"])}
    shown: dict[str, Any] = redact(out)
    return shown


def revision_fields(config: ScheduleConfig, builder: TaskBuilder, tenant_id: str) -> dict[str, Any]:
    """``config`` in the API's shape as a revision records it and a change compares it: the
    template's credentials shown (``***`` and a fingerprint, never sealed, so neither revisions
    nor the history that copies them hold anything to open). Fingerprints are taken under the
    current key, so a credential sealed again under a newer key is no change."""
    data = config_to_json(config)
    template = data.get("task")
    target = template.get("target") if isinstance(template, Mapping) else None
    if isinstance(template, Mapping) and isinstance(target, Mapping):
        sealer = builder.sealer
        kids = key_ids(target)
        if sealer is not None and kids and kids != {sealer.ring.current_id}:
            with contextlib.suppress(SealError):  # a key this node lacks: its stored digest
                target = sealer.reseal(target, tenant_id)
        data["task"] = {**template, "target": public_target(target)}
    return data
