"""``/v1/tasks``: create (one or a batch), list, read, patch, cancel, retry, attempts (SPEC §3).

Thin: validation is in :mod:`duetime.api.schemas` / :mod:`duetime.api.convert`, rendering in
:mod:`duetime.api.render`, error mapping in :mod:`duetime.api.problems`. Bodies are read with
:func:`~duetime.api.deps.json_body` (size cap, after auth); the create calls authenticate inline
rather than through a dependency because they are the hot path.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from starlette.responses import Response

from duetime.api import render
from duetime.api.batch_errors import located
from duetime.api.convert import (
    ID_PREFIX,
    LABEL_FILTER,
    encode_cursor,
    path_id,
    task_filter,
    task_patch,
    word_list,
)
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
from duetime.api.held import create_held
from duetime.api.lean import LeanRoute
from duetime.api.problems import problem_responses
from duetime.api.routes.history import cold_tier
from duetime.api.schemas import (
    MAX_LIST_LIMIT,
    AttemptListOut,
    TaskBatchCreate,
    TaskCreate,
    TaskListOut,
    TaskOut,
    TaskPatchIn,
    UniqueHeldOut,
)
from duetime.collector import collector_paused
from duetime.errors import NotFound, UniqueHeld, ValidationError
from duetime.history.actor import acting_as
from duetime.history.query import history_attempts
from duetime.lifecycle.create import check_repeats
from duetime.types import NewTask, TaskCreated, TaskStatus

router = APIRouter(
    prefix="/v1/tasks",
    tags=["tasks"],
    responses=problem_responses(400, 401, 422, 503),
    route_class=LeanRoute,
)


async def _create(call: Caller, new: list[NewTask], request: Request) -> list[TaskCreated]:
    """Create ``new`` (a ``traceparent`` header becomes the tasks' trace context)."""
    return await call.creator.create(
        call.store, call.tenant_id, new, request.headers.get("traceparent")
    )


def _task_id(raw: str) -> str:
    """The canonical form of a path id; anything that is not a UUID cannot name a task (404),
    a control character is a 422 naming ``task_id``."""
    found = path_id(raw, "task_id")
    if found is None:
        raise NotFound(f"no task {raw!r}")
    return found


@router.post(
    "",
    status_code=201,
    summary="Create a one-time task",
    openapi_extra=body_schema(TaskCreate),
    responses={
        201: {"model": TaskOut, "description": "Created"},
        200: {
            "model": TaskOut | UniqueHeldOut,
            "description": "Nothing created: the task an idempotent repeat, a uniqueness "
            "window (`Duetime-Unique: existing`) or a debounce (`Duetime-Debounce: absorbed`) "
            "answers with; a window whose task has left the hot store answers with its id",
        },
        **problem_responses(413),
    },
)
async def create_task(request: Request) -> Response:
    """Create a task; the same ``idempotency_key`` again returns the first task with 200. Flow
    rules (the task's ``unique``, its queue's uniqueness window, debounce and throttle) say
    what they did in ``Duetime-Unique``, ``Duetime-Debounce`` and ``Duetime-Throttle``."""
    call = await tenant_call(request)
    raw = await read_body(request, services(request).body_limit)
    body = validated(raw, TaskCreate)
    if body.payload_held is not None:
        limit = services(request).settings.max_held_payload_bytes
        asked, created = await create_held(
            call, body, limit, lambda new: _create(call, new, request)
        )
        check_repeats([asked], [created], prefix=False)
        return render.json_response(render.task(created.task), 201 if created.created else 200)
    new = await call.builder.new_tasks(call.store, call.tenant_id, [body], batch=False)
    try:
        (created,) = await _create(call, new, request)
    except UniqueHeld as held:
        answer = {"id": held.task_id, "retired": True, "unique_until": held.until}
        return render.json_response(answer, 200, {"Duetime-Unique": "existing"})
    check_repeats(new, [created], prefix=False)
    return render.json_response(
        render.task(created.task), 201 if created.created else 200, flow_headers(created)
    )


def flow_headers(created: TaskCreated) -> dict[str, str] | None:
    """What a create's flow rules did: ``Duetime-Unique: created | existing``,
    ``Duetime-Debounce: created | absorbed``, ``Duetime-Throttle: delayed | on_time``."""
    if not created.flow:
        return None
    return {f"Duetime-{rule.title()}": outcome for rule, outcome in created.flow}


_MINIMAL = "return=minimal"
_PREFER = {
    "in": "header",
    "name": "Prefer",
    "required": False,
    "schema": {"type": "string"},
    "description": "`return=minimal` (RFC 7240): answer each task's id and whether it was "
    "created, not the whole task; other preferences are ignored.",
}


def _minimal(request: Request) -> bool:
    """Whether the caller's ``Prefer`` header asks for ``return=minimal``."""
    prefer = request.headers.get("prefer")
    if not prefer:
        return False
    words = (w.strip().lower() for part in prefer.split(",") for w in part.split(";"))
    return _MINIMAL in (w.replace(" ", "") for w in words)


@router.post(
    "/batch",
    status_code=201,
    summary="Create up to 1,000 tasks, all or nothing",
    openapi_extra={**body_schema(TaskBatchCreate), "parameters": [_PREFER]},
    responses={
        201: {
            "description": "Created: the tasks, or with `Prefer: return=minimal` their ids",
            "content": {
                "application/json": {
                    "schema": {
                        "anyOf": [
                            {"$ref": "#/components/schemas/TaskItemsOut"},
                            {"$ref": "#/components/schemas/TaskIdItemsOut"},
                        ]
                    }
                }
            },
        },
        **problem_responses(413),
    },
)
async def create_tasks(request: Request) -> Response:
    """Create every task or none; errors name the field as ``tasks.N.<field>``. Tasks whose
    ``idempotency_key`` exists already come back as they are. With ``Prefer: return=minimal``
    the answer is ``{"items": [{"id", "created"}]}`` in input order (a large batch is not echoed
    back), with ``Preference-Applied: return=minimal``."""
    call = await tenant_call(request)
    raw = await read_body(request, services(request).batch_body_limit)
    with collector_paused():
        bodies = validated(raw, TaskBatchCreate).tasks
    for i, body in enumerate(bodies):
        if isinstance(body, TaskCreate) and body.payload_held is not None:
            raise ValidationError("hold payloads one task at a time", f"tasks.{i}.payload_held")
    new = await call.builder.new_tasks(call.store, call.tenant_id, bodies, batch=True)
    try:
        results = await _create(call, new, request)
    except ValidationError as exc:  # the store names `depends_on`; say which task's
        raise located(exc, new) from None
    if _minimal(request):
        items = [{"id": r.task.id, "created": r.created} for r in results]
        answer = render.json_response({"items": items}, 201)
        answer.headers["Preference-Applied"] = _MINIMAL
        return answer
    with collector_paused():
        return render.json_response({"items": [render.task(r.task) for r in results]}, 201)


@router.get(
    "",
    summary="List tasks, newest first",
    responses={200: {"model": TaskListOut, "description": "A page of tasks"}},
)
async def list_tasks(
    call: TenantCall,
    status: Annotated[
        list[str],
        Query(
            description="Status, a comma list, or repeated",
            json_schema_extra=word_list([s.value for s in TaskStatus]),
        ),
    ] = [],  # noqa: B006
    queue: str | None = None,
    name: str | None = None,
    schedule_id: str | None = None,
    label: Annotated[
        list[str], Query(description="key:value, repeatable", json_schema_extra=LABEL_FILTER)
    ] = [],  # noqa: B006
    run_after: Annotated[str | None, Query(description="RFC 3339; run_at >= this")] = None,
    run_before: Annotated[str | None, Query(description="RFC 3339; run_at < this")] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIST_LIMIT)] = 100,
    cursor: Annotated[str | None, Query(description="next_cursor of the previous page")] = None,
    id_prefix: Annotated[
        str | None,
        Query(
            description="Ids starting with this: 4+ hex digits, any case, dashes as in ids",
            json_schema_extra=ID_PREFIX,
        ),
    ] = None,
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
        id_prefix=id_prefix,
    )
    found = await call.store.task_list(query)
    page = found[:limit]
    next_cursor = encode_cursor(page[-1].id) if len(found) > limit else None
    return render.json_response({"items": render.tasks(page), "next_cursor": next_cursor})


@router.get(
    "/{task_id}",
    summary="Read one task (optionally waiting for its end)",
    responses={200: {"model": TaskOut, "description": "The task"}, **problem_responses(404, 429)},
)
async def get_task(
    task_id: str,
    call: TenantCall,
    request: Request,
    wait: Annotated[
        float | None,
        Query(ge=0, le=60, description="Seconds to wait for the task's end (at most 60)"),
    ] = None,
) -> Response:
    """The task. With ``wait``, the answer comes when the task ends (``succeeded``, ``failed``
    or ``cancelled``) or the wait runs out, whichever is first (:mod:`duetime.lifecycle.
    waits`: a wait costs the node no thread, connection or polling loop of its own)."""
    found = await call.store.task_get(call.tenant_id, _task_id(task_id))
    if found is None:
        raise NotFound(f"no task {task_id!r}")
    if wait and not found.status.terminal:
        found = await request.app.state.waits.task(call.tenant_id, found.id, wait) or found
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
    patch = task_patch(call.builder, await json_body(request, TaskPatchIn))
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
