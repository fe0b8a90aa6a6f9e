"""``/v1/tasks``: create (one or a batch), list, read, patch, cancel, retry, attempts (SPEC §3).

Thin: validation is in :mod:`duetime.api.schemas` / :mod:`duetime.api.convert`, rendering in
:mod:`duetime.api.render`, error mapping in :mod:`duetime.api.problems`. Bodies are read with
:func:`~duetime.api.deps.json_body` (size cap, after auth); the create calls authenticate inline
rather than through a dependency because they are the hot path.
"""

from __future__ import annotations

import functools
from typing import Annotated

from fastapi import APIRouter, Query, Request
from starlette.responses import Response

from duetime.api import render
from duetime.api.batch_body import parse_batch, parse_single
from duetime.api.batch_errors import located
from duetime.api.convert import encode_cursor, path_id, task_filter
from duetime.api.deps import (
    Caller,
    TenantCall,
    body_schema,
    json_body,
    read_body,
    services,
    tenant_call,
    validated,
)
from duetime.api.idempotency import check_repeats
from duetime.api.lean import LeanRoute
from duetime.api.leasing import hub
from duetime.api.problems import problem_responses
from duetime.api.routes.history import cold_tier
from duetime.api.schemas import (
    MAX_LIST_LIMIT,
    AttemptListOut,
    TaskBatchCreate,
    TaskCreate,
    TaskItemsOut,
    TaskListOut,
    TaskOut,
    TaskPatchIn,
)
from duetime.collector import collector_paused
from duetime.errors import NotFound, ValidationError
from duetime.history.actor import acting_as
from duetime.history.query import history_attempts
from duetime.observe import tracing
from duetime.types import NewTask, TaskCreated

router = APIRouter(
    prefix="/v1/tasks",
    tags=["tasks"],
    responses=problem_responses(400, 401, 422, 503),
    route_class=LeanRoute,
)


def _task_id(raw: str) -> str:
    """The canonical form of a path id; anything that is not a UUID cannot name a task (404),
    a control character is a 422 naming ``task_id``."""
    found = path_id(raw, "task_id")
    if found is None:
        raise NotFound(f"no task {raw!r}")
    return found


async def _create(call: Caller, new: list[NewTask], request: Request) -> list[TaskCreated]:
    """Create ``new``; with tracing on, or a ``traceparent`` header, in a span and stamped
    with its trace context (:func:`duetime.observe.tracing.create_traced`)."""
    services(request).pulse.add(len(new))
    header = request.headers.get("traceparent")
    leases = hub(request)  # a lone worker task may go straight to a waiting lease poll
    if header is None and not tracing.ENABLED:
        return await leases.create(call.store, new)
    return await tracing.create_traced(functools.partial(leases.create, call.store), new, header)


@router.post(
    "",
    status_code=201,
    summary="Create a one-time task",
    openapi_extra=body_schema(TaskCreate),
    responses={
        201: {"model": TaskOut, "description": "Created"},
        200: {"model": TaskOut, "description": "Idempotent repeat: the existing task"},
        **problem_responses(413),
    },
)
async def create_task(request: Request) -> Response:
    """Create a task; the same ``idempotency_key`` again returns the first task with 200."""
    call = await tenant_call(request)
    raw = await read_body(request, services(request).body_limit)
    plain = parse_single(raw)  # a plain item, as in a batch, needs no model (ADR 0006)
    body = validated(raw, TaskCreate) if plain is None else plain
    new = await call.builder.new_tasks(call.store, call.tenant_id, [body], batch=False)
    await call.quotas.admit_tasks(call.tenant_id, 1)
    (created,) = await _create(call, new, request)
    check_repeats(new, [created], prefix=False)
    return render.json_response(render.task(created.task), 201 if created.created else 200)


@router.post(
    "/batch",
    status_code=201,
    summary="Create up to 1,000 tasks, all or nothing",
    openapi_extra=body_schema(TaskBatchCreate),
    responses={201: {"model": TaskItemsOut, "description": "Created"}, **problem_responses(413)},
)
async def create_tasks(request: Request) -> Response:
    """Create every task or none; errors name the field as ``tasks.N.<field>``. Tasks whose
    ``idempotency_key`` exists already come back as they are."""
    call = await tenant_call(request)
    raw = await read_body(request, services(request).batch_body_limit)
    with collector_paused():
        bodies = parse_batch(raw)
        if bodies is None:  # not valid, or not read as plain: pydantic reads and names the field
            bodies = [*validated(raw, TaskBatchCreate).tasks]
    new = await call.builder.new_tasks(call.store, call.tenant_id, bodies, batch=True)
    await call.quotas.admit_tasks(call.tenant_id, len(new))
    try:
        results = await _create(call, new, request)
    except ValidationError as exc:  # the store names `depends_on`; say which task's
        raise located(exc, new) from None
    with collector_paused():
        return render.json_response({"items": [render.task(r.task) for r in results]}, 201)


@router.get(
    "",
    summary="List tasks, newest first",
    responses={200: {"model": TaskListOut, "description": "A page of tasks"}},
)
async def list_tasks(
    call: TenantCall,
    status: Annotated[list[str], Query(description="Status, a comma list, or repeated")] = [],  # noqa: B006
    queue: str | None = None,
    name: str | None = None,
    schedule_id: str | None = None,
    label: Annotated[list[str], Query(description="key:value, repeatable")] = [],  # noqa: B006
    run_after: Annotated[str | None, Query(description="RFC 3339; run_at >= this")] = None,
    run_before: Annotated[str | None, Query(description="RFC 3339; run_at < this")] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIST_LIMIT)] = 100,
    cursor: Annotated[str | None, Query(description="next_cursor of the previous page")] = None,
) -> Response:
    """One page of the tenant's tasks matching every filter; ``next_cursor`` is null on the last."""
    query = task_filter(
        call.tenant_id,
        status=status,
        queue=queue,
        name=name,
        schedule_id=schedule_id,
        label=label,
        run_after=run_after,
        run_before=run_before,
        limit=limit + 1,  # one extra row tells whether another page exists
        cursor=cursor,
    )
    found = await call.store.task_list(query)
    page = found[:limit]
    next_cursor = encode_cursor(page[-1].id) if len(found) > limit else None
    return render.json_response({"items": render.tasks(page), "next_cursor": next_cursor})


@router.get(
    "/{task_id}",
    summary="Read one task",
    responses={200: {"model": TaskOut, "description": "The task"}, **problem_responses(404)},
)
async def get_task(task_id: str, call: TenantCall) -> Response:
    found = await call.store.task_get(call.tenant_id, _task_id(task_id))
    if found is None:
        raise NotFound(f"no task {task_id!r}")
    return render.json_response(render.task(found))


@router.patch(
    "/{task_id}",
    summary="Change a waiting task",
    openapi_extra=body_schema(TaskPatchIn),
    responses={
        200: {"model": TaskOut, "description": "The changed task"},
        **problem_responses(404, 409, 413),
    },
)
async def patch_task(task_id: str, call: TenantCall, request: Request) -> Response:
    """Change ``run_at``, ``payload``, ``priority`` or ``labels`` of a ``scheduled``,
    ``blocked``, ``ready`` or ``retrying`` task; 409 in any other status."""
    patch = call.builder.patch(await json_body(request, TaskPatchIn))
    with acting_as(call.actor):  # audit
        changed = await call.store.task_update(call.tenant_id, _task_id(task_id), patch)
    return render.json_response(render.task(changed))


@router.post(
    "/{task_id}/cancel",
    summary="Cancel a task",
    responses={200: {"model": TaskOut, "description": "The task"}, **problem_responses(404, 409)},
)
async def cancel_task(task_id: str, call: TenantCall) -> Response:
    """Cancel a waiting task at once; a running one ends ``cancelled`` with its attempt (see
    ``cancel_requested``). 409 on a terminal task."""
    with acting_as(call.actor):  # audit
        task = await call.store.task_cancel(call.tenant_id, _task_id(task_id))
    return render.json_response(render.task(task))


@router.post(
    "/{task_id}/retry",
    summary="Replay a failed or cancelled task",
    responses={200: {"model": TaskOut, "description": "The task"}, **problem_responses(404, 409)},
)
async def retry_task(task_id: str, call: TenantCall) -> Response:
    """Make a ``failed`` or ``cancelled`` task ``ready`` again with a new attempt series."""
    with acting_as(call.actor):  # audit
        task = await call.store.task_retry(call.tenant_id, _task_id(task_id))
    return render.json_response(render.task(task))


@router.get(
    "/{task_id}/attempts",
    summary="Every attempt of a task",
    responses={200: {"model": AttemptListOut, "description": "Attempts"}, **problem_responses(404)},
)
async def list_attempts(task_id: str, call: TenantCall, request: Request) -> Response:
    try:
        items = await call.store.attempt_list(call.tenant_id, _task_id(task_id))
    except NotFound:  # retired from the hot store: its history still knows its attempts
        items = await history_attempts(
            call.store, call.tenant_id, _task_id(task_id), cold_tier(request)
        )
    return render.json_response({"items": [render.attempt(a) for a in items]})
