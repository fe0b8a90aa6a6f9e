"""``POST /v1/tasks/replay`` and ``POST /v1/tasks/cancel``: change many tasks by filter, throttled
(SPEC §3). The walk itself is :func:`duetime.api.bulk.bulk_change`; this route runs it as the
node's (:class:`~duetime.api.bulk.Walks`) and stops it when the caller disconnects."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from fastapi import APIRouter, Request
from starlette.responses import Response

from duetime.api import render
from duetime.api.bulk import (
    Action,
    BulkOut,
    BulkResult,
    CancelIn,
    ReplayIn,
    bulk_change,
    bulk_filter,
)
from duetime.api.deps import TenantCall, body_schema, json_body, services
from duetime.api.problems import ShuttingDown, problem, problem_responses
from duetime.clock import Clock, SystemClock
from duetime.history.actor import acting_as

router = APIRouter(
    prefix="/v1/tasks", tags=["tasks"], responses=problem_responses(400, 401, 413, 422, 503)
)

_CLOCK: Clock = SystemClock()
log = logging.getLogger(__name__)


async def _gone(request: Request) -> None:
    """Return once the client has disconnected (the body is read already: the next message the
    server has for this request is ``http.disconnect``, sent when the connection closes)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def _bulk(action: Action, call: TenantCall, request: Request) -> Response:
    body = await json_body(request, ReplayIn if action == "replay" else CancelIn)
    query = bulk_filter(call.tenant_id, action, body)
    clock: Clock = getattr(request.app.state, "clock", None) or _CLOCK
    done = BulkResult()
    with acting_as(call.actor):  # audit (the walk's task copies this context)
        walk = services(request).walks.start(
            bulk_change(
                call.store,
                action,
                query,
                max_tasks=body.max_tasks,
                rate_per_second=body.rate_per_second,
                monotonic=clock.monotonic,
                sleep=clock.sleep,
                done=done,
            )
        )
    gone = asyncio.ensure_future(_gone(request))
    try:
        await asyncio.wait({walk, gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
        if not walk.done():  # the caller went away, or this call itself was cancelled
            walk.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await walk
            log.info(
                "bulk %s stopped: the client disconnected (%d matched, %d changed)",
                action,
                done.matched,
                done.changed,
            )
    if walk.cancelled():
        if not gone.cancelled() and gone.done():  # nobody reads an answer
            detail = "the client disconnected; the walk stopped"
            return problem(request, 400, "client-disconnected", "Client disconnected", detail)
        raise ShuttingDown(
            f"the node is shutting down: the {action} stopped after {done.matched} matched and "
            f"{done.changed} changed tasks; call again to go on"
        )
    result = walk.result()
    return render.json_response({"matched": result.matched, "changed": result.changed})


@router.post(
    "/replay",
    summary="Replay failed or cancelled tasks by filter, throttled",
    openapi_extra=body_schema(ReplayIn),
    responses={200: {"model": BulkOut, "description": "What was replayed"}},
)
async def replay_tasks(call: TenantCall, request: Request) -> Response:
    """Replay (as ``POST /v1/tasks/{id}/retry``) up to ``max_tasks`` tasks matching the filters,
    newest first, at most ``rate_per_second`` per second; ``status`` defaults to ``failed`` (the
    dead-letter set) and may only name ``failed``/``cancelled``. Answers when done; stops when
    the caller disconnects, and with a 503 when the node shuts down."""
    return await _bulk("replay", call, request)


@router.post(
    "/cancel",
    summary="Cancel tasks by filter, throttled",
    openapi_extra=body_schema(CancelIn),
    responses={200: {"model": BulkOut, "description": "What was cancelled"}},
)
async def cancel_tasks(call: TenantCall, request: Request) -> Response:
    """Cancel (as ``POST /v1/tasks/{id}/cancel``) up to ``max_tasks`` unfinished tasks matching
    the filters, newest first, at most ``rate_per_second`` per second. Answers when done; stops
    when the caller disconnects, and with a 503 when the node shuts down."""
    return await _bulk("cancel", call, request)
