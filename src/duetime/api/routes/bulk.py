"""``POST /v1/tasks/replay`` and ``POST /v1/tasks/cancel``: change many tasks by filter, throttled
(SPEC §3). The walk itself is :func:`duetime.api.bulk.bulk_change`."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from duetime.api import render
from duetime.api.bulk import Action, BulkIn, BulkOut, bulk_change, bulk_filter
from duetime.api.deps import TenantCall, body_schema, json_body
from duetime.api.problems import problem_responses
from duetime.clock import Clock, SystemClock
from duetime.history.actor import acting_as

router = APIRouter(
    prefix="/v1/tasks", tags=["tasks"], responses=problem_responses(400, 401, 413, 422, 503)
)

_CLOCK: Clock = SystemClock()


async def _bulk(action: Action, call: TenantCall, request: Request) -> Response:
    body = await json_body(request, BulkIn)
    query = bulk_filter(call.tenant_id, action, body)
    clock: Clock = getattr(request.app.state, "clock", None) or _CLOCK
    with acting_as(call.actor):  # audit
        done = await bulk_change(
            call.store,
            action,
            query,
            max_tasks=body.max_tasks,
            rate_per_second=body.rate_per_second,
            monotonic=clock.monotonic,
            sleep=clock.sleep,
        )
    return render.json_response({"matched": done.matched, "changed": done.changed})


@router.post(
    "/replay",
    summary="Replay failed or cancelled tasks by filter, throttled",
    openapi_extra=body_schema(BulkIn),
    responses={200: {"model": BulkOut, "description": "What was replayed"}},
)
async def replay_tasks(call: TenantCall, request: Request) -> Response:
    """Replay (as ``POST /v1/tasks/{id}/retry``) up to ``max_tasks`` tasks matching the filters,
    newest first, at most ``rate_per_second`` per second; ``status`` defaults to ``failed`` (the
    dead-letter set) and may only name ``failed``/``cancelled``. Answers when done."""
    return await _bulk("replay", call, request)


@router.post(
    "/cancel",
    summary="Cancel tasks by filter, throttled",
    openapi_extra=body_schema(BulkIn),
    responses={200: {"model": BulkOut, "description": "What was cancelled"}},
)
async def cancel_tasks(call: TenantCall, request: Request) -> Response:
    """Cancel (as ``POST /v1/tasks/{id}/cancel``) up to ``max_tasks`` unfinished tasks matching
    the filters, newest first, at most ``rate_per_second`` per second. Answers when done."""
    return await _bulk("cancel", call, request)
