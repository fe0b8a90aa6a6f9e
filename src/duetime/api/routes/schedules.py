"""``/v1/schedules``: recurring schedules (SPEC §3 "Schedules").

Thin: bodies are validated by :mod:`duetime.api.schedule_schemas` and
:mod:`duetime.api.schedule_ops`, the store does every change in one transaction, and the
materializer (:mod:`duetime.engine.materializer`) turns occurrences into tasks. A change is made
from the version just read and retried when another change slipped in between.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from starlette.responses import Response

from duetime.api import render
from duetime.api.convert import (
    decode_revision_cursor,
    decode_schedule_cursor,
    decode_tick_cursor,
    encode,
    path_id,
    query_time,
    text_filter,
    tick_cursor,
    word_list,
)
from duetime.api.deps import Caller, TenantCall, body_schema, json_body
from duetime.api.problems import problem_responses
from duetime.api.schedule_ops import (
    actor_of,
    anchor_from,
    config_from_create,
    config_from_patch,
    revision_fields,
    revision_json,
    schedule_out,
    schedules_json,
    tick_json,
)
from duetime.api.schedule_schemas import (
    MAX_UPCOMING,
    BackfillIn,
    BackfillOut,
    PauseIn,
    ResumeIn,
    RevisionListOut,
    ScheduleCreate,
    ScheduleDeletedOut,
    ScheduleListOut,
    ScheduleOut,
    SchedulePatchIn,
    TickListOut,
    TriggerIn,
    TriggerOut,
    UpcomingOut,
)
from duetime.api.schemas import MAX_LIST_LIMIT
from duetime.errors import Conflict, NotFound, ValidationError
from duetime.schedule.config import (
    config_diff,
    occurrence_task,
    schedule_spec,
)
from duetime.schedule.evaluation import times_between, upcoming_times
from duetime.types import (
    CatchupPolicy,
    NewSchedule,
    NewTask,
    Schedule,
    ScheduleChange,
    ScheduleFilter,
    TaskCreated,
    TickFilter,
    TickOutcome,
)

router = APIRouter(
    prefix="/v1/schedules", tags=["schedules"], responses=problem_responses(400, 401, 422, 503)
)

_CHANGE_RETRIES = 3
_ONE = problem_responses(404)


def _ok(model: Any, description: str = "The schedule") -> dict[int | str, dict[str, Any]]:
    return {200: {"model": model, "description": description}, **_ONE}


def _sid(raw: str) -> str:
    """A path's schedule id: 422 naming ``schedule_id`` for control characters, 404 for anything
    that is not a UUID (no schedule can have it)."""
    found = path_id(raw, "schedule_id")
    if found is None:
        raise NotFound(f"no schedule {raw!r}")
    return found


async def _get(call: Caller, schedule_id: str) -> Schedule:
    found = await call.store.schedule_get(call.tenant_id, _sid(schedule_id))
    if found is None:
        raise NotFound(f"no schedule {schedule_id!r}")
    return found


async def _respond(call: Caller, s: Schedule, status: int = 200) -> Response:
    return render.json_response(await schedule_out(call, s, await call.store.now()), status)


async def _change(
    call: Caller, schedule_id: str, make: Callable[[Schedule], Awaitable[ScheduleChange | None]]
) -> Schedule:
    """Read, build the change from what was read (None: nothing to do), apply it at that
    version; start over when another change won the race."""
    for attempt in range(_CHANGE_RETRIES):
        current = await _get(call, schedule_id)
        change = await make(current)
        if change is None:
            return current
        try:
            return await call.store.schedule_update(call.tenant_id, current.id, change)
        except Conflict:
            if attempt == _CHANGE_RETRIES - 1:
                raise
    raise AssertionError("unreachable")


@router.post(
    "",
    status_code=201,
    summary="Create a schedule",
    openapi_extra=body_schema(ScheduleCreate),
    responses={201: {"model": ScheduleOut, "description": "Created"}, **problem_responses(413)},
)
async def create_schedule(call: TenantCall, request: Request) -> Response:
    """Create a recurring schedule; its occurrences become tasks from the next one on."""
    body = await json_body(request, ScheduleCreate)
    await call.quotas.admit_schedule(call.tenant_id)
    now = await call.store.now()
    anchor = anchor_from(now)
    config, first = await config_from_create(
        call.evaluations, body, call.builder, call.tenant_id, anchor, now
    )
    created = await call.store.schedule_create(
        NewSchedule(
            tenant_id=call.tenant_id,
            config=config,
            anchor_at=anchor,
            materialized_until=now,
            actor=await actor_of(request),
            revision=revision_fields(config, call.builder, call.tenant_id),
            # Known now, so the materializer reads the schedule only once it is nearly due.
            next_run_at=first,
        )
    )
    return render.json_response(await schedule_out(call, created, now), 201)


@router.get("", summary="List schedules, newest first", responses=_ok(ScheduleListOut, "A page"))
async def list_schedules(
    call: TenantCall,
    paused: bool | None = None,
    queue: Annotated[str | None, Query(description="The task template's queue")] = None,
    name: Annotated[str | None, Query(description="The task template's name")] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIST_LIMIT)] = 100,
    cursor: Annotated[str | None, Query(description="next_cursor of the previous page")] = None,
) -> Response:
    query = ScheduleFilter(
        tenant_id=call.tenant_id,
        paused=paused,
        queue=text_filter(queue, "queue"),
        name=text_filter(name, "name"),
        limit=limit + 1,
        cursor=decode_schedule_cursor(cursor) if cursor else None,
    )
    found = await call.store.schedule_list(query)
    page = found[:limit]
    now = await call.store.now()
    next_cursor = encode(page[-1].id) if len(found) > limit else None
    items = await schedules_json(call.evaluations, call.tenant_id, page, now)
    return render.json_response({"items": items, "next_cursor": next_cursor})


@router.get("/{schedule_id}", summary="Read a schedule", responses=_ok(ScheduleOut))
async def get_schedule(schedule_id: str, call: TenantCall) -> Response:
    return await _respond(call, await _get(call, schedule_id))


@router.patch(
    "/{schedule_id}",
    summary="Change a schedule",
    openapi_extra=body_schema(SchedulePatchIn),
    responses={**_ok(ScheduleOut), **problem_responses(409, 413)},
)
async def patch_schedule(schedule_id: str, call: TenantCall, request: Request) -> Response:
    """Change settings; occurrences not started yet are made again under the new ones (their
    unstarted tasks are deleted). The revision records the fields before and after."""
    body = await json_body(request, SchedulePatchIn)
    actor = await actor_of(request)

    async def make(current: Schedule) -> ScheduleChange | None:
        now = await call.store.now()
        config = await config_from_patch(call.evaluations, current, body, call.builder, now)
        before, after = config_diff(
            revision_fields(current.config, call.builder, current.tenant_id),
            revision_fields(config, call.builder, current.tenant_id),
        )
        if not before and not after:
            return None
        return ScheduleChange(
            current.version, "update", actor, before, after, config=config, rewind_to=now
        )

    return await _respond(call, await _change(call, schedule_id, make))


@router.delete(
    "/{schedule_id}", summary="Delete a schedule", responses=_ok(ScheduleDeletedOut, "Deleted")
)
async def delete_schedule(schedule_id: str, call: TenantCall, request: Request) -> Response:
    """Delete the schedule and cancel its pending (never started) occurrences."""
    current = await _get(call, schedule_id)
    cancelled = await call.store.schedule_delete(
        call.tenant_id,
        current.id,
        await actor_of(request),
        revision_fields(current.config, call.builder, call.tenant_id),
    )
    body = {"id": current.id, "deleted": True, "cancelled_tasks": cancelled}
    return render.json_response(body)


@router.post(
    "/{schedule_id}/pause",
    summary="Pause a schedule",
    openapi_extra=body_schema(PauseIn, required=False),
    responses={**_ok(ScheduleOut), **problem_responses(409)},
)
async def pause_schedule(schedule_id: str, call: TenantCall, request: Request) -> Response:
    """Stop making occurrences (occurrences made ahead and not started are withdrawn); the
    instants that pass while paused are recorded ``skipped_paused``. Optional ``note``."""
    body = await json_body(request, PauseIn, optional=True)
    paused = await schedule_pause(call, schedule_id, body.note, await actor_of(request))
    return await _respond(call, paused)


async def schedule_pause(
    call: Caller, schedule_id: str, note: str | None, actor: str | None
) -> Schedule:
    """Pause with ``note`` (the ``pause`` route's change; the dashboard makes it too)."""

    async def make(current: Schedule) -> ScheduleChange:
        before = {"paused": current.paused, "pause_note": current.pause_note}
        after = {"paused": True, "pause_note": note}
        now = await call.store.now()
        return ScheduleChange(
            current.version, "pause", actor, before, after, paused=True, pause_note=note,
            rewind_to=now,
        )  # fmt: skip

    return await _change(call, schedule_id, make)


@router.post(
    "/{schedule_id}/resume",
    summary="Resume a paused schedule",
    openapi_extra=body_schema(ResumeIn, required=False),
    responses={**_ok(ScheduleOut), **problem_responses(409)},
)
async def resume_schedule(schedule_id: str, call: TenantCall, request: Request) -> Response:
    """Make occurrences again from now on. The ones that fell in the pause do not run unless
    ``catchup`` asks (``latest`` or ``all``, within the schedule's window and max runs).
    Resuming a schedule that is not paused changes nothing."""
    body = await json_body(request, ResumeIn, optional=True)
    resumed = await schedule_resume(call, schedule_id, body.catchup, await actor_of(request))
    return await _respond(call, resumed)


async def schedule_resume(
    call: Caller, schedule_id: str, catchup: str, actor: str | None
) -> Schedule:
    """Resume with the ``catchup`` policy (the ``resume`` route's change; the dashboard makes it
    too); a schedule that is not paused is returned unchanged."""

    async def make(current: Schedule) -> ScheduleChange | None:
        if not current.paused:
            return None
        before = {"paused": True, "pause_note": current.pause_note}
        after = {"paused": False, "catchup": catchup}
        now = await call.store.now()
        return ScheduleChange(
            current.version, "resume", actor, before, after, paused=False, resume_at=now,
            resume_catchup=CatchupPolicy(catchup),
        )  # fmt: skip

    return await _change(call, schedule_id, make)


@router.post(
    "/{schedule_id}/trigger",
    status_code=201,
    summary="Run one occurrence now",
    openapi_extra=body_schema(TriggerIn, required=False),
    responses={201: {"model": TriggerOut, "description": "The task"}, **_ONE},
)
async def trigger_schedule(schedule_id: str, call: TenantCall, request: Request) -> Response:
    """Make a task from the template now (``scheduled_for`` = now), also while paused; the ledger
    records it ``triggered``. Overlap is not checked: it is an explicit request. The body is
    empty or ``{}``: a field in it is refused, not ignored."""
    await json_body(request, TriggerIn, optional=True)
    made = await schedule_trigger(call, schedule_id, await actor_of(request))
    return render.json_response(render.task(made.task), 201 if made.created else 200)


async def _keyed(call: Caller, tasks: Sequence[NewTask]) -> Sequence[NewTask]:
    """Occurrences' ``tasks`` with their keys under their queues' keyed limits, as the
    materializer's (:func:`duetime.lifecycle.flow.keyed`, no uniqueness, debounce or throttle)."""
    flows = call.creator.flows
    if flows is None:
        return tasks
    return await flows.apply(call.store, call.tenant_id, tasks, asks=False)


async def schedule_trigger(call: Caller, schedule_id: str, actor: str | None) -> TaskCreated:
    """Make the task of an occurrence at now (the ``trigger`` route's; the dashboard's too)."""
    current = await _get(call, schedule_id)
    await call.quotas.admit_tasks(call.tenant_id, 1)
    now = await call.store.now()
    [made] = await call.store.schedule_occurrences_create(
        call.tenant_id,
        current.id,
        await _keyed(call, [occurrence_task(current, now, now)]),
        TickOutcome.TRIGGERED,
        f"triggered by {actor}" if actor else "triggered",
    )
    return made


@router.post(
    "/{schedule_id}/backfill",
    summary="Make the occurrences of a past range, throttled",
    openapi_extra=body_schema(BackfillIn),
    responses=_ok(BackfillOut, "What was made"),
)
async def backfill_schedule(schedule_id: str, call: TenantCall, request: Request) -> Response:
    """One task per occurrence in ``[start, end]`` (at most ``max_runs``), ``run_at`` staggered
    from now at ``rate_per_second``; occurrences that have their task already are left as they
    are. Ledger outcome ``backfilled``."""
    body = await json_body(request, BackfillIn)
    current = await _get(call, schedule_id)
    now = await call.store.now()
    if body.end <= body.start:
        raise ValidationError("end must be later than start", field="end")
    if body.end > now:
        raise ValidationError("end must not be in the future: backfill makes past occurrences",
                              field="end")  # fmt: skip
    found = await call.evaluations.run(
        call.tenant_id, times_between, schedule_spec(current),
        body.start - timedelta(microseconds=1), body.end, body.max_runs + 1,
    )  # fmt: skip
    truncated = len(found) > body.max_runs
    step = 1.0 / body.rate_per_second
    tasks = [
        occurrence_task(current, o.nominal, now + timedelta(seconds=i * step))
        for i, o in enumerate(found[: body.max_runs])
    ]
    detail = f"backfill of {body.start.isoformat()} .. {body.end.isoformat()}"
    made = await call.store.schedule_occurrences_create(
        call.tenant_id, current.id, await _keyed(call, tasks), TickOutcome.BACKFILLED, detail
    )
    items = [
        {
            "scheduled_for": m.task.scheduled_for,
            "run_at": m.task.run_at,
            "task_id": m.task.id,
            "created": m.created,
        }
        for m in made
    ]
    created = sum(m.created for m in made)
    body_out = {
        "created": created,
        "existing": len(made) - created,
        "truncated": truncated,
        "items": items,
    }
    return render.json_response(body_out)


@router.get(
    "/{schedule_id}/upcoming",
    summary="The next fire times",
    responses=_ok(UpcomingOut, "Fire times"),
)
async def upcoming(
    schedule_id: str,
    call: TenantCall,
    after: Annotated[str | None, Query(description="RFC 3339; default now")] = None,
    count: Annotated[int, Query(ge=1, le=MAX_UPCOMING)] = 10,
) -> Response:
    """The next ``count`` nominal fire times after ``after``, in the schedule's zone offset,
    each with a note when DST moved or doubled it (the expression's times, also while paused)."""
    current = await _get(call, schedule_id)
    start = query_time(after, "after") or await call.store.now()
    spec = schedule_spec(current)
    zone = spec.zone
    found = await call.evaluations.run(call.tenant_id, upcoming_times, spec, start, count)
    items = [{"at": o.nominal.astimezone(zone).isoformat(), "note": o.note} for o in found]
    return render.json_response({"items": items})


@router.get(
    "/{schedule_id}/ticks", summary="The tick ledger", responses=_ok(TickListOut, "Ledger rows")
)
async def list_ticks(
    schedule_id: str,
    call: TenantCall,
    outcome: Annotated[
        list[str],
        Query(
            description="Only these outcomes; repeatable",
            json_schema_extra=word_list([o.value for o in TickOutcome]),
        ),
    ] = [],  # noqa: B006
    limit: Annotated[int, Query(ge=1, le=MAX_LIST_LIMIT)] = 100,
    cursor: Annotated[str | None, Query(description="next_cursor of the previous page")] = None,
) -> Response:
    """Every nominal instant and what became of it, newest first."""
    outcomes = []
    for item in outcome:
        for word in filter(None, (w.strip() for w in item.split(","))):
            try:
                outcomes.append(TickOutcome(word))
            except ValueError:
                choices = ", ".join(o.value for o in TickOutcome)
                raise ValidationError(
                    f"unknown outcome {word!r}; one of {choices}", field="outcome"
                ) from None
    query = TickFilter(
        tenant_id=call.tenant_id,
        schedule_id=_sid(schedule_id),
        outcomes=tuple(outcomes),
        limit=limit + 1,
        cursor=decode_tick_cursor(cursor) if cursor else None,
    )
    found = await call.store.schedule_tick_list(query)
    page = found[:limit]
    next_cursor = tick_cursor(page[-1]) if len(found) > limit else None
    return render.json_response({"items": [tick_json(t) for t in page], "next_cursor": next_cursor})


@router.get(
    "/{schedule_id}/revisions",
    summary="Every change to a schedule",
    responses=_ok(RevisionListOut, "Revisions"),
)
async def list_revisions(
    schedule_id: str,
    call: TenantCall,
    limit: Annotated[int, Query(ge=1, le=MAX_LIST_LIMIT)] = 100,
    cursor: Annotated[str | None, Query(description="next_cursor of the previous page")] = None,
) -> Response:
    """When, by which API key, and the fields before and after; newest first."""
    found = await call.store.schedule_revision_list(
        call.tenant_id,
        _sid(schedule_id),
        limit=limit + 1,
        cursor=decode_revision_cursor(cursor) if cursor else None,
    )
    page = found[:limit]
    next_cursor = encode(str(page[-1].id)) if len(found) > limit else None
    items = [revision_json(r) for r in page]
    return render.json_response({"items": items, "next_cursor": next_cursor})
