"""``/v1/schedules/by-key/{key}``: declarative schedules (SPEC §3 "Schedules"), and the schedule
a key names (``GET``).

``PUT`` declares a schedule by a tenant-unique key: created when no live schedule holds the key
(201), otherwise changed to match the body (200), or left as it is (200, no revision) when
nothing differs. An application declaring its schedules at start-up on N processes makes exactly
one each: the store's unique (tenant, key) index refuses the second create, and the loser of
that race (or of a version race on the change) reads again and compares.

A declaration is the whole schedule (the ``POST /v1/schedules`` body): fields it leaves out take
their defaults. It never pauses or resumes: pausing is an operator's act the next deploy keeps.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Request
from starlette.responses import Response

from duetime.api import render
from duetime.api.deps import TenantCall, body_schema, json_body
from duetime.api.problems import problem_responses
from duetime.api.schedule_ops import (
    actor_of,
    anchor_from,
    config_from_create,
    revision_fields,
    schedule_out,
)
from duetime.api.schedule_schemas import ScheduleCreate, ScheduleOut
from duetime.errors import Conflict, NotFound
from duetime.schedule.config import config_diff
from duetime.text import check
from duetime.types import NewSchedule, ScheduleChange

router = APIRouter(
    prefix="/v1/schedules", tags=["schedules"], responses=problem_responses(400, 401, 422, 503)
)

MAX_KEY_LENGTH = 255
# Each round either returns or lost a race another declaration won; with N declarations at
# once, the losers settle in a round or two. More rounds than that means a writer keeps changing
# the schedule under us: say so (409) rather than loop.
_ROUNDS = 5

KeyPath = Annotated[
    str, Path(description="The tenant-unique key (≤ 255 characters, no control characters).")
]


@router.put(
    "/by-key/{key}",
    summary="Declare a schedule by key (create or change to match)",
    openapi_extra=body_schema(ScheduleCreate),
    responses={
        200: {"model": ScheduleOut, "description": "Changed to match, or already matching"},
        201: {"model": ScheduleOut, "description": "Created"},
        **problem_responses(409, 413),
    },
)
async def declare_schedule(key: KeyPath, call: TenantCall, request: Request) -> Response:
    """Create the schedule with this key, or change it to match the body. Changing it makes
    occurrences not started yet again under the new settings, like ``PATCH``."""
    check(key, "key", max_length=MAX_KEY_LENGTH)
    body = await json_body(request, ScheduleCreate)
    actor = await actor_of(request)
    for _ in range(_ROUNDS):
        now = await call.store.now()
        current = await call.store.schedule_get_by_key(call.tenant_id, key)
        if current is None:
            await call.quotas.admit_schedule(call.tenant_id)
            anchor = anchor_from(now)
            config, first = await config_from_create(
                call.evaluations, body, call.builder, call.tenant_id, anchor, now
            )
            try:
                created = await call.store.schedule_create(
                    NewSchedule(
                        tenant_id=call.tenant_id,
                        config=config,
                        anchor_at=anchor,
                        materialized_until=now,
                        actor=actor,
                        revision=revision_fields(config, call.builder, call.tenant_id),
                        next_run_at=first,
                        key=key,
                    )
                )
            except Conflict:  # another declaration made it first: compare with that one
                continue
            return render.json_response(await schedule_out(call, created, now), 201)
        # Validated against the schedule's own anchor: an `every` keeps counting from it.
        config, _ = await config_from_create(
            call.evaluations, body, call.builder, call.tenant_id, current.anchor_at, now
        )
        before, after = config_diff(
            revision_fields(current.config, call.builder, call.tenant_id),
            revision_fields(config, call.builder, call.tenant_id),
        )
        if not before and not after:
            return render.json_response(await schedule_out(call, current, now))
        change = ScheduleChange(
            current.version, "update", actor, before, after, config=config, rewind_to=now
        )
        try:
            updated = await call.store.schedule_update(call.tenant_id, current.id, change)
        except (Conflict, NotFound):  # changed or deleted since we read it: read it again
            continue
        return render.json_response(await schedule_out(call, updated, now))
    raise Conflict(f"schedule {key!r} kept changing while being declared; try again")


@router.get(
    "/by-key/{key}",
    summary="Read the schedule a key names",
    responses={
        200: {"model": ScheduleOut, "description": "The schedule"},
        **problem_responses(404),
    },
)
async def get_schedule_by_key(key: KeyPath, call: TenantCall) -> Response:
    """The live schedule holding ``key``: what ``GET /v1/schedules/{id}`` answers for its id."""
    check(key, "key", max_length=MAX_KEY_LENGTH)
    found = await call.store.schedule_get_by_key(call.tenant_id, key)
    if found is None:
        raise NotFound(f"no schedule with key {key!r}")
    return render.json_response(await schedule_out(call, found, await call.store.now()))
