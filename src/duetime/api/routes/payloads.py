"""``/v1/payloads``: reading a payload duetime holds, with the token an attempt was handed
(docs/security.md "Payloads by reference"; :mod:`duetime.delivery.payload_access`). No API key:
the token is the credential, and it opens one task's payload during one attempt only."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from starlette.responses import Response

from duetime.api.convert import path_id
from duetime.api.deps import services
from duetime.api.problems import problem_responses
from duetime.api.routes.wellknown import identity
from duetime.delivery.payload_access import TokenError, held_id
from duetime.errors import Forbidden, NotFound
from duetime.types import TaskStatus

router = APIRouter(
    prefix="/v1/payloads", tags=["tasks"], responses=problem_responses(400, 422, 503)
)


@router.get(
    "/{task_id}",
    summary="A held payload, with an attempt's token",
    responses={
        200: {"description": "The payload, as JSON", "content": {"application/json": {}}},
        **problem_responses(403, 404),
    },
)
async def get_payload(
    task_id: str,
    request: Request,
    token: Annotated[str, Query(min_length=1, max_length=4096)],
) -> Response:
    """The task's held payload, while the attempt the token was made for is the task's
    current one and running. 403 for a token that is forged, expired, of another task or of
    an attempt that is over; 404 for a task that is gone or holds no payload."""
    found = services(request)
    try:
        grant = identity(request).payloads.open(token, await found.store.now())
    except TokenError as exc:
        raise Forbidden(str(exc)) from None
    if path_id(task_id, "task_id") != grant.task_id:
        raise Forbidden("this token is for another task")
    task = await found.store.task_get(grant.tenant_id, grant.task_id)
    hold = None if task is None else held_id(task.payload_ref)
    if task is None or hold is None:
        raise NotFound(f"no held payload for task {task_id!r}")
    if task.status is not TaskStatus.RUNNING or task.attempts != grant.attempt:
        raise Forbidden(f"attempt {grant.attempt} of this task is over")
    held = await found.store.held_payload_get(grant.tenant_id, hold)
    if held is None:
        raise NotFound(f"no held payload for task {task_id!r}")
    return Response(
        held.payload_json, media_type="application/json", headers={"Cache-Control": "no-store"}
    )
