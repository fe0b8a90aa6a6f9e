"""Pull workers' calls (SPEC §3 "Queues and pull workers"): lease tasks from a queue (a long
poll), heartbeat a lease, complete or fail one lease or many, or hand leases back unstarted.

A lease id is a fencing token: heartbeat, complete and fail under a lease that is no longer
current (expired and reaped, already ended, unknown, or another tenant's) answer 409
``urn:duetime:problem:stale-lease`` and change nothing; the batch forms answer ``"stale"`` for
such items instead. Complete and fail answer the same small body as one batch item
(``{"lease_id", "status": "ok", "task_id", "task_status"}``), which costs no extra read.

Thin: the machinery is in :mod:`duetime.lifecycle.lease`, the bodies in
:mod:`duetime.api.queue_schemas`.
"""

from __future__ import annotations

from typing import Any

import orjson
from fastapi import APIRouter, Request
from starlette.responses import Response

from duetime.api import render
from duetime.api.deps import Caller, body_schema, json_body, services, tenant_call
from duetime.api.lean import LeanRoute
from duetime.api.problems import problem_responses
from duetime.api.queue_schemas import (
    AckListOut,
    AckOut,
    CompleteBatchIn,
    CompleteIn,
    FailBatchIn,
    FailIn,
    HeartbeatIn,
    LeaseExtendedOut,
    LeaseIn,
    LeasesOut,
    ReleaseBatchIn,
    ReleaseIn,
    ReleaseListOut,
    ReleaseOut,
)
from duetime.api.routes.queues import queue_name
from duetime.api.routes.wellknown import identity
from duetime.delivery.parents import parents_json
from duetime.delivery.payload_access import held_id
from duetime.errors import PayloadTooLarge, StaleLease
from duetime.lifecycle.acks import AckResult
from duetime.lifecycle.finish import Ack
from duetime.lifecycle.lease import LeaseHub
from duetime.lifecycle.release import release
from duetime.types import Lease, ParentsOf, Released

router = APIRouter(
    prefix="/v1",
    tags=["leases"],
    responses=problem_responses(400, 401, 422, 503),
    route_class=LeanRoute,
)

_STALE = "lease {} is not current: it expired, was reclaimed or ended, or is unknown"


def hub(request: Request) -> LeaseHub:
    """The node's :class:`~duetime.lifecycle.lease.LeaseHub`."""
    return services(request).leases


def lease_json(
    lease: Lease, parents: ParentsOf | None = None, payload_url: str | None = None
) -> dict[str, Any]:
    """One lease; a task with ``depends_on`` also carries its ``parents``' outcomes
    (:mod:`duetime.delivery.parents`: the SDK's ``job.parents``), a task whose payload duetime
    holds the URL that reads it during this attempt (``payload_url``)."""
    found = {
        "lease_id": lease.lease_id,
        "lease_expires_at": lease.lease_expires_at,
        "attempt": lease.attempt,
        "traceparent": lease.task.traceparent,
        "task": render.task(lease.task),
    }
    if parents is not None:
        found["parents"] = parents_json(parents.parents)
    if payload_url is not None:
        found["payload_url"] = payload_url
    return found


async def _leases_json(request: Request, call: Caller, leases: list[Lease]) -> list[dict[str, Any]]:
    """The leases as answered (see :func:`lease_json`)."""
    parents: dict[str, ParentsOf] = {}
    if any(lease.task.depends_on for lease in leases):  # workflows: the parents' outcomes
        parents = await call.store.task_parents_of(call.tenant_id, [x.task for x in leases])
    urls: dict[str, str] = {}
    if any(held_id(lease.task.payload_ref) for lease in leases):
        found = services(request)
        tokens = identity(request).payloads
        now = await found.store.now()
        for lease in leases:
            if held_id(lease.task.payload_ref):
                urls[lease.task.id] = tokens.url(
                    found.settings.issuer, lease.task.id, lease.task.tenant_id, lease.attempt, now
                )
    return [
        lease_json(lease, parents.get(lease.task.id), urls.get(lease.task.id)) for lease in leases
    ]


@router.post(
    "/queues/{name}/lease",
    summary="Lease due worker tasks (long poll)",
    openapi_extra=body_schema(LeaseIn),
    responses={200: {"model": LeasesOut, "description": "Leases; empty when the wait ran out"}},
)
async def lease_tasks(name: str, request: Request) -> Response:
    """Lease up to ``max_tasks`` due ``worker`` tasks of the queue, highest priority first.
    With none due, wait up to ``wait_seconds`` for one (a task becoming due wakes the call at
    once) and answer ``{"leases": []}`` when the wait runs out."""
    call = await tenant_call(request)
    queue = queue_name(name)
    body = await json_body(request, LeaseIn)
    leases = await hub(request).lease(
        request.is_disconnected,
        call.tenant_id,
        queue,
        worker_id=body.worker_id,
        max_tasks=body.max_tasks,
        lease_seconds=body.lease_seconds,
        wait_seconds=body.wait_seconds,
        names=body.names,
    )
    return render.json_response({"leases": await _leases_json(request, call, leases)})


@router.post(
    "/leases/{lease_id}/heartbeat",
    summary="Extend a lease",
    openapi_extra=body_schema(HeartbeatIn, required=False),
    responses={
        200: {"model": LeaseExtendedOut, "description": "The new expiry"},
        **problem_responses(409),
    },
)
async def heartbeat(lease_id: str, request: Request) -> Response:
    """Extend the lease to ``extend_seconds`` from now; 409 when it is no longer current (stop
    working on the task: someone else may own it). ``cancel_requested: true`` when the task was
    cancelled meanwhile: stop and fail the lease."""
    call = await tenant_call(request)
    body = await json_body(request, HeartbeatIn, optional=True)
    found = await hub(request).heartbeat(call.tenant_id, lease_id, body.extend_seconds)
    if found is None:
        raise StaleLease(_STALE.format(lease_id))
    lease, expires_at = found
    # A cancel of a running task is told to its worker here (SPEC §3: it ends `cancelled`
    # with its attempt): the SDK Worker cancels the handler and fails the lease.
    return render.json_response(
        {
            "lease_id": lease_id,
            "lease_expires_at": expires_at,
            "cancel_requested": lease.task.cancel_requested,
        }
    )


def _one(result: AckResult) -> Response:
    if result.task_status is None:
        raise StaleLease(_STALE.format(result.lease_id))
    return render.json_response(result.to_json())


def _result(value: Any, limit: int, field: str) -> str:
    """The result's JSON text, refused (413) over ``limit`` bytes (the payload limit)."""
    data = orjson.dumps(value)
    if len(data) > limit:
        raise PayloadTooLarge(f"the result is over the {limit}-byte limit", field=field)
    return data.decode()


@router.post(
    "/leases/{lease_id}/complete",
    summary="Complete a lease: the attempt succeeded",
    openapi_extra=body_schema(CompleteIn, required=False),
    responses={
        200: {"model": AckOut, "description": "Applied"},
        **problem_responses(409, 413),
    },
)
async def complete_lease(lease_id: str, request: Request) -> Response:
    """End the attempt as succeeded with ``result`` (and ``logs`` kept with the attempt); 409
    when the lease is stale."""
    call = await tenant_call(request)
    body = await json_body(request, CompleteIn, optional=True)
    limit = services(request).settings.max_payload_bytes
    ack = Ack(lease_id, ok=True, result_json=_result(body.result, limit, "result"), logs=body.logs)
    (result,) = await hub(request).ack(call.tenant_id, [ack])
    return _one(result)


@router.post(
    "/leases/{lease_id}/fail",
    summary="Fail a lease: the attempt failed",
    openapi_extra=body_schema(FailIn),
    responses={
        200: {"model": AckOut, "description": "Applied"},
        **problem_responses(409),
    },
)
async def fail_lease(lease_id: str, request: Request) -> Response:
    """End the attempt as failed: retried per the task's policy (not sooner than
    ``retry_after_seconds``) unless ``retryable`` is false or attempts are exhausted, then
    ``failed``. 409 when the lease is stale."""
    call = await tenant_call(request)
    body = await json_body(request, FailIn)
    ack = Ack(
        lease_id,
        ok=False,
        error=body.error,
        retryable=body.retryable,
        retry_after_seconds=body.retry_after_seconds,
        timed_out=body.timed_out,
        logs=body.logs,
    )
    (result,) = await hub(request).ack(call.tenant_id, [ack])
    return _one(result)


@router.post(
    "/leases/complete",
    summary="Complete many leases",
    openapi_extra=body_schema(CompleteBatchIn),
    responses={
        200: {"model": AckListOut, "description": "One item per input item, in order"},
        **problem_responses(413),
    },
)
async def complete_leases(request: Request) -> Response:
    """Complete up to 1,000 leases; a stale one is reported as ``"stale"``, never an error."""
    call = await tenant_call(request)
    body = await json_body(request, CompleteBatchIn, batch=True)
    limit = services(request).settings.max_payload_bytes
    acks = [
        Ack(
            item.lease_id,
            ok=True,
            result_json=_result(item.result, limit, f"items.{i}.result"),
            logs=item.logs,
        )
        for i, item in enumerate(body.items)
    ]
    results = await hub(request).ack(call.tenant_id, acks)
    return render.json_response({"items": [r.to_json() for r in results]})


@router.post(
    "/leases/fail",
    summary="Fail many leases",
    openapi_extra=body_schema(FailBatchIn),
    responses={200: {"model": AckListOut, "description": "One item per input item, in order"}},
)
async def fail_leases(request: Request) -> Response:
    """Fail up to 1,000 leases; a stale one is reported as ``"stale"``, never an error."""
    call = await tenant_call(request)
    body = await json_body(request, FailBatchIn, batch=True)
    acks = [
        Ack(
            item.lease_id,
            ok=False,
            error=item.error,
            retryable=item.retryable,
            retry_after_seconds=item.retry_after_seconds,
            timed_out=item.timed_out,
            logs=item.logs,
        )
        for item in body.items
    ]
    results = await hub(request).ack(call.tenant_id, acks)
    return render.json_response({"items": [r.to_json() for r in results]})


def _released(lease_id: str, found: Released | None) -> dict[str, Any]:
    if found is None:
        return {"lease_id": lease_id, "status": "stale", "task_id": None, "task_status": None}
    return {
        "lease_id": lease_id,
        "status": "ok",
        "task_id": found.task_id,
        "task_status": found.status.value,
    }


@router.post(
    "/leases/{lease_id}/release",
    summary="Hand a lease back without spending its attempt",
    openapi_extra=body_schema(ReleaseIn, required=False),
    responses={
        200: {"model": ReleaseOut, "description": "Handed back"},
        **problem_responses(409),
    },
)
async def release_lease(lease_id: str, request: Request) -> Response:
    """The task waits again, due ``delay_seconds`` from now, and the attempt its lease counted
    is not spent (a worker stopping with leases it never started). 409 when the lease is not
    current, or the task's cancel was requested (fail the lease instead)."""
    call = await tenant_call(request)
    body = await json_body(request, ReleaseIn, optional=True)
    found = await release(call.store, [lease_id], body.delay_seconds, call.tenant_id)
    if lease_id not in found:
        raise StaleLease(_STALE.format(lease_id))
    return render.json_response(_released(lease_id, found[lease_id]))


@router.post(
    "/leases/release",
    summary="Hand many leases back",
    openapi_extra=body_schema(ReleaseBatchIn),
    responses={200: {"model": ReleaseListOut, "description": "One item per input item, in order"}},
)
async def release_leases(request: Request) -> Response:
    """Hand back up to 1,000 leases; a stale one is reported as ``"stale"``, never an error."""
    call = await tenant_call(request)
    body = await json_body(request, ReleaseBatchIn, batch=True)
    found = await release(call.store, body.lease_ids, body.delay_seconds, call.tenant_id)
    return render.json_response(
        {"items": [_released(lease_id, found.get(lease_id)) for lease_id in body.lease_ids]}
    )
