"""``/v1/workflows``: a DAG of tasks in one call — create, read (and wait for its end), list,
cancel, replay its failed nodes; and what links tasks: a task's parents, its result by
reference, the children its handler spawns under its lease (SPEC §3 "Workflows").

Thin: what a workflow and a spawn mean is :mod:`duetime.lifecycle.workflow`; waits are
:mod:`duetime.lifecycle.waits`; answers are :mod:`duetime.api.workflow_render`.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from starlette.responses import Response

from duetime.api import render, workflow_render
from duetime.api.convert import encode_cursor, path_id
from duetime.api.deps import TenantCall, body_schema, read_body, services, validated
from duetime.api.problems import problem_responses
from duetime.api.routes.tasks import _task_id
from duetime.api.workflow_schemas import (
    ChildrenOut,
    ParentListOut,
    SpawnIn,
    WorkflowCreate,
    WorkflowListOut,
    WorkflowOut,
    nodes_of,
)
from duetime.errors import NotFound
from duetime.history.actor import acting_as
from duetime.lifecycle.create import Creator
from duetime.lifecycle.waits import MAX_WAIT_SECONDS, EndWatch
from duetime.lifecycle.workflow import CreateWorkflowStore, create_workflow, spawn
from duetime.types import WorkflowView

router = APIRouter(
    prefix="/v1", tags=["workflows"], responses=problem_responses(400, 401, 422, 503)
)

Wait = Annotated[
    float | None,
    Query(
        ge=0,
        le=MAX_WAIT_SECONDS,
        description="Seconds to wait for the end (at most 60): the answer comes when it ends or "
        "the wait runs out, whichever is first.",
    ),
]


def waits(request: Request) -> EndWatch:
    """The node's waits (:class:`~duetime.lifecycle.waits.EndWatch`)."""
    found: EndWatch = request.app.state.waits
    return found


def _workflow_id(raw: str) -> str:
    found = path_id(raw, "workflow_id")
    if found is None:
        raise NotFound(f"no workflow {raw!r}")
    return found


async def _get(call: TenantCall, workflow_id: str) -> WorkflowView:
    found = await call.store.workflow_get(call.tenant_id, workflow_id)
    if found is None:
        raise NotFound(f"no workflow {workflow_id!r}")
    return found


@router.post(
    "/workflows",
    status_code=201,
    summary="Create a workflow: a DAG of tasks, all or nothing",
    openapi_extra=body_schema(WorkflowCreate),
    responses={
        201: {"model": WorkflowOut, "description": "Created"},
        200: {"model": WorkflowOut, "description": "Idempotent repeat: the existing workflow"},
        **problem_responses(409, 413, 429),
    },
)
async def create(request: Request, call: TenantCall) -> Response:
    """Create every node (a task) or none. A cycle, a ref used twice or a ``depends_on`` that
    names no node is a 422 naming the node (``nodes.<i>.depends_on``)."""
    raw = await read_body(request, services(request).batch_body_limit)
    body = validated(raw, WorkflowCreate)
    made, created = await make_workflow(call.creator, call.store, call.tenant_id, body)
    return render.json_response(workflow_render.workflow(made), 201 if created else 200)


async def make_workflow(
    creator: Creator,
    store: CreateWorkflowStore,
    tenant_id: str,
    body: WorkflowCreate,
    *,
    fingerprint: str | None = None,
    workflow_id: str | None = None,
) -> tuple[WorkflowView, bool]:
    """What ``POST /v1/workflows`` does with a valid ``body``, for the route and for the SQL
    API's workflow requests (:mod:`duetime.api.sql_intake`, which names the workflow's id and
    its own fingerprint)."""
    return await create_workflow(
        creator,
        store,
        tenant_id,
        nodes_of(body),
        name=body.name,
        labels=body.labels,
        idempotency_key=body.idempotency_key,
        fingerprint=fingerprint or body.fingerprint(),
        workflow_id=workflow_id,
    )


@router.get(
    "/workflows",
    summary="List workflows, newest first",
    responses={200: {"model": WorkflowListOut, "description": "A page of workflows"}},
)
async def list_workflows(
    call: TenantCall,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    cursor: Annotated[str | None, Query(description="next_cursor of the previous page")] = None,
) -> Response:
    after = None if cursor is None else path_id(cursor, "cursor")
    found = await call.store.workflow_list(call.tenant_id, limit + 1, after)
    page = found[:limit]
    next_cursor = encode_cursor(page[-1][0].id) if len(found) > limit else None
    items = [workflow_render.listed(w, counts) for w, counts in page]
    return render.json_response({"items": items, "next_cursor": next_cursor})


@router.get(
    "/workflows/{workflow_id}",
    summary="Read a workflow and every node (optionally waiting for its end)",
    responses={
        200: {"model": WorkflowOut, "description": "The workflow"},
        **problem_responses(404, 429),
    },
)
async def get_workflow(
    workflow_id: str, call: TenantCall, request: Request, wait: Wait = None
) -> Response:
    """Every node's status, result or error. With ``wait``, answers once every node has ended
    or the wait ran out (the status then says ``running``)."""
    found = await _get(call, _workflow_id(workflow_id))
    left = [n.task.id for n in found.nodes if not n.task.status.terminal]
    if wait and left:
        await waits(request).wait(call.tenant_id, left, wait)
        found = await _get(call, found.workflow.id)
    return render.json_response(workflow_render.workflow(found))


@router.post(
    "/workflows/{workflow_id}/cancel",
    summary="Cancel every node not ended",
    responses={
        200: {"model": WorkflowOut, "description": "The workflow"},
        **problem_responses(404),
    },
)
async def cancel_workflow(workflow_id: str, call: TenantCall) -> Response:
    """Waiting nodes end ``cancelled`` at once, running ones with their attempt."""
    with acting_as(call.actor):  # audit: the nodes' records name the caller
        found = await call.store.workflow_cancel(call.tenant_id, _workflow_id(workflow_id))
    return render.json_response(workflow_render.workflow(found))


@router.post(
    "/workflows/{workflow_id}/replay",
    summary="Replay the failed and cancelled nodes",
    responses={
        200: {"model": WorkflowOut, "description": "The workflow"},
        **problem_responses(404),
    },
)
async def replay_workflow(workflow_id: str, call: TenantCall) -> Response:
    """Each failed or cancelled node starts a new attempt series: ``ready`` when its parents
    succeeded, else ``blocked`` until they have (a replayed parent runs first)."""
    with acting_as(call.actor):
        found = await call.store.workflow_replay(call.tenant_id, _workflow_id(workflow_id))
    return render.json_response(workflow_render.workflow(found))


# -- what links tasks ---------------------------------------------------------------------------


@router.get(
    "/tasks/{task_id}/parents",
    summary="A task's parents: each one's status, result or error",
    responses={200: {"model": ParentListOut, "description": "Parents"}, **problem_responses(404)},
)
async def task_parents(task_id: str, call: TenantCall) -> Response:
    """In ``depends_on`` order, each with its ``ref`` in the workflow; a result over 64 KiB
    (or past 1 MiB for all) as ``result_ref``."""
    task = await call.store.task_get(call.tenant_id, _task_id(task_id))
    if task is None:
        raise NotFound(f"no task {task_id!r}")
    found = await call.store.task_parents_of(call.tenant_id, [task])
    return render.json_response({"items": workflow_render.parents(found.get(task.id))})


@router.get(
    "/tasks/{task_id}/result",
    summary="A task's result, as JSON (what a result_ref names)",
    responses={
        200: {"description": "The result (JSON; null without one)"},
        **problem_responses(404),
    },
)
async def task_result(task_id: str, call: TenantCall) -> Response:
    """The result itself as the body; the header ``duetime-task-status`` says the task's
    status (a result exists once it ``succeeded``)."""
    task = await call.store.task_get(call.tenant_id, _task_id(task_id))
    if task is None:
        raise NotFound(f"no task {task_id!r}")
    response = render.json_response(task.result)
    response.headers["duetime-task-status"] = task.status.value
    return response


@router.get(
    "/tasks/{task_id}/children",
    summary="The tasks a task's handler spawned (optionally waiting for their end)",
    responses={
        200: {"model": ChildrenOut, "description": "Children"},
        **problem_responses(404, 429),
    },
)
async def task_children(
    task_id: str, call: TenantCall, request: Request, wait: Wait = None
) -> Response:
    """Oldest first. With ``wait``, answers once every child has ended or the wait ran out."""
    parent = _task_id(task_id)
    if await call.store.task_get(call.tenant_id, parent) is None:
        raise NotFound(f"no task {task_id!r}")
    children = await call.store.task_children(call.tenant_id, parent)
    left = [c.id for c in children if not c.status.terminal]
    if wait and left:
        await waits(request).wait(call.tenant_id, left, wait)
        children = await call.store.task_children(call.tenant_id, parent)
    ended = all(c.status.terminal for c in children)
    return render.json_response({"items": render.tasks(children), "ended": ended})


@router.post(
    "/leases/{lease_id}/children",
    status_code=201,
    summary="Spawn children of the task held under a lease",
    openapi_extra=body_schema(SpawnIn),
    responses={
        201: {"model": ChildrenOut, "description": "Created (some may be repeats)"},
        200: {"model": ChildrenOut, "description": "Every child existed: a repeat of the call"},
        **problem_responses(409, 413, 429),
    },
)
async def spawn_children(lease_id: str, request: Request, call: TenantCall) -> Response:
    """Up to 10,000 children in one call, all or nothing, while the lease is current (409
    otherwise). The same call again (its ``key``) — a retried request, or the handler run again
    after its worker died — answers the children made the first time: none is made twice."""
    raw = await read_body(request, services(request).batch_body_limit)
    body = validated(raw, SpawnIn)
    made = await spawn(call.creator, call.store, call.tenant_id, lease_id, body.tasks, body.key)
    items = render.tasks([m.task for m in made])
    ended = all(m.task.status.terminal for m in made)
    fresh = any(m.created for m in made)
    return render.json_response({"items": items, "ended": ended}, 201 if fresh else 200)
