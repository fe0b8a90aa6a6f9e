"""``/v1/queues`` and ``/v1/workers``: queue settings with live figures, and the pull workers
seen recently (SPEC §3 "Queues and pull workers").

A queue exists as soon as a task names it; ``PUT`` configures it. ``paused`` and the limits
(``max_concurrency``, ``rate_limit_per_second`` with ``burst``, ``max_concurrency_per_key``) are
enforced by every claim (dispatch and lease) on every node; ``held_by`` says which of them keeps
ready tasks waiting now.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from starlette.responses import Response

from duetime.api import render
from duetime.api.deps import TenantCall, body_schema, json_body
from duetime.api.flow_view import key_json, keyed, rules_json
from duetime.api.problems import problem_responses
from duetime.api.queue_schemas import QueueListOut, QueueOut, QueuePutIn, WorkerListOut
from duetime.errors import NotFound, ValidationError
from duetime.flow.rules import flow_rules
from duetime.history.retention import RetentionPolicy, parse_retention
from duetime.store.core.hot import bucket_tokens
from duetime.store.protocols import QueueStore
from duetime.types import Queue, QueueSettings, QueueStats, TaskStatus, WorkerInfo

router = APIRouter(prefix="/v1", tags=["queues"], responses=problem_responses(400, 401, 422, 503))

_QUEUE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")
KEYS_SHOWN = 10
"""The busiest keys ``GET /v1/queues/{name}`` lists."""
DEFAULT_LIVE_WITHIN_SECONDS = 60.0


def queue_name(raw: str) -> str:
    """A queue name from the path, as task creation accepts it (``ValidationError`` otherwise)."""
    if not _QUEUE_NAME.fullmatch(raw):
        raise ValidationError(
            "a queue name is 1-128 characters: letters, digits, '.', '_', ':', '-', starting "
            "with a letter or digit",
            field="name",
        )
    return raw


def held_by(queue: Queue | None, counts: Mapping[TaskStatus, int], now: datetime) -> list[str]:
    """What keeps the queue's ready tasks from starting now (empty when none wait): ``paused``,
    ``max_concurrency`` (as many running as allowed), ``rate_limit_per_second`` (no whole token
    in the bucket), else ``max_concurrency_per_key`` when set (their keys are busy)."""
    if queue is None or not counts.get(TaskStatus.READY, 0):
        return []
    s = queue.settings
    held = []
    if s.paused:
        held.append("paused")
    if s.max_concurrency is not None and counts.get(TaskStatus.RUNNING, 0) >= s.max_concurrency:
        held.append("max_concurrency")
    if s.rate_limit_per_second is not None and _tokens(queue, now) < 1:
        held.append("rate_limit_per_second")
    if not held and s.max_concurrency_per_key is not None:
        held.append("max_concurrency_per_key")
    return held


def _tokens(queue: Queue, now: datetime) -> float:
    rate = queue.settings.rate_limit_per_second
    assert rate is not None
    at = queue.tokens_at
    elapsed = 0.0 if at is None else (now - at).total_seconds()
    return bucket_tokens(queue.tokens, elapsed, rate, queue.settings.burst)


def queue_settings(body: QueuePutIn) -> QueueSettings:
    """The settings a ``PUT`` body asks for (its retention aside); ``ValidationError`` for a
    ``burst`` without the rate it sizes, and for a flow rule that cannot work, naming it
    (``key_limit.rate``, ``debounce.max_wait``; :mod:`duetime.flow.rules`)."""
    if body.burst is not None and body.rate_limit_per_second is None:
        raise ValidationError(
            "burst needs rate_limit_per_second (it sizes that bucket)", field="burst"
        )
    doc = body.model_dump(include={"key_limit", "unique", "debounce", "throttle"})
    flow, most = flow_rules({k: _given(v) for k, v in doc.items()})
    per_key = body.max_concurrency_per_key
    if most is not None and per_key is not None and most != per_key:
        raise ValidationError(
            f"key_limit.max_concurrency is the queue's max_concurrency_per_key ({per_key}): "
            "give one of them, or the same",
            field="key_limit.max_concurrency",
        )
    return QueueSettings(
        rate_limit_per_second=body.rate_limit_per_second,
        burst=body.burst,
        max_concurrency=body.max_concurrency,
        max_concurrency_per_key=most if most is not None else per_key,
        paused=body.paused,
        flow=flow,
    )


def _given(value: Any) -> Any:
    """A rule as its request gave it: the fields left out are absent, not null."""
    if isinstance(value, dict):
        return {k: v for k, v in value.items() if v is not None}
    return value


def queue_json(
    name: str, queue: Queue | None, stats: QueueStats | None, now: datetime
) -> dict[str, Any]:
    """A queue's settings (defaults when unconfigured) and live figures at the store's ``now``."""
    settings = queue.settings if queue is not None else QueueSettings()
    counts = stats.counts if stats is not None else {}
    limited = queue is not None and settings.rate_limit_per_second is not None
    return {
        "name": name,
        "configured": queue is not None,
        "paused": settings.paused,
        "max_concurrency": settings.max_concurrency,
        "rate_limit_per_second": settings.rate_limit_per_second,
        "burst": settings.burst,
        "max_concurrency_per_key": settings.max_concurrency_per_key,
        "updated_at": None if queue is None else queue.updated_at,
        "counts": {status.value: counts.get(status, 0) for status in TaskStatus},
        "running": counts.get(TaskStatus.RUNNING, 0),
        "oldest_due_lag_seconds": None if stats is None else stats.oldest_due_lag_seconds,
        "tokens": round(_tokens(queue, now), 3) if limited and queue is not None else None,
        "held_by": held_by(queue, counts, now),
        **rules_json(settings),
    }


def worker_json(w: WorkerInfo) -> dict[str, Any]:
    return {
        "worker_id": w.worker_id,
        "queues": w.queues,
        "first_seen_at": w.first_seen_at,
        "last_seen_at": w.last_seen_at,
        "leases": w.leases,
    }


@router.put(
    "/queues/{name}",
    summary="Configure a queue",
    openapi_extra=body_schema(QueuePutIn, required=False),
    responses={200: {"model": QueueOut, "description": "The queue"}},
)
async def put_queue(name: str, call: TenantCall, request: Request) -> Response:
    """Replace the queue's settings (a field left out takes its default): ``paused`` stops
    every claim of its tasks, ``max_concurrency`` caps how many run at once,
    ``rate_limit_per_second`` with ``burst`` bounds starts per second (a token bucket), and
    ``max_concurrency_per_key`` caps how many tasks of one ``concurrency_key`` run at once.
    Every limit holds across nodes and applies to push deliveries and worker leases alike."""
    queue = queue_name(name)
    body = await json_body(request, QueuePutIn, optional=True)
    retention = parse_retention(body.retention or {})
    stored = await call.store.queue_put(call.tenant_id, queue, queue_settings(body))
    if call.creator.flows is not None:
        call.creator.flows.forget(call.tenant_id, queue)
    await call.store.queue_retention_put(call.tenant_id, queue, retention)
    stats = await call.store.queue_stats(call.tenant_id, queue)
    found = queue_json(queue, stored, stats[0] if stats else None, await call.store.now())
    found = await with_keys(call.store, stored, found)
    return render.json_response({**found, "retention": retention.to_json()})


@router.get(
    "/queues",
    summary="List queues",
    responses={200: {"model": QueueListOut, "description": "Every queue, by name"}},
)
async def list_queues(call: TenantCall) -> Response:
    """Every queue of the tenant, configured or holding tasks, by name."""
    configured, figures, retention, now = await asyncio.gather(
        call.store.queue_list(call.tenant_id),
        call.store.queue_stats(call.tenant_id),
        call.store.queue_retention_list(call.tenant_id),
        call.store.now(),
    )
    settings = {q.name: q for q in configured}
    stats = {s.name: s for s in figures}
    empty = RetentionPolicy()
    items = [
        {
            **queue_json(n, settings.get(n), stats.get(n), now),
            "retention": retention.get(n, empty).to_json(),
        }
        for n in sorted({*settings, *stats})
    ]
    return render.json_response({"items": items})


@router.get(
    "/queues/{name}",
    summary="Read one queue",
    responses={200: {"model": QueueOut, "description": "The queue"}, **problem_responses(404)},
)
async def get_queue(name: str, call: TenantCall) -> Response:
    """The queue's settings and live figures; 404 when it is neither configured nor named by
    any task. A queue with limits per key lists its busiest keys (``keys``: ready and running
    tasks, its rate limit's bucket, what holds each one and why), and ``held_by`` says
    ``key_limit`` while a key's rate limit holds ready tasks back."""
    queue = queue_name(name)
    stored, figures = await asyncio.gather(
        call.store.queue_get(call.tenant_id, queue), call.store.queue_stats(call.tenant_id, queue)
    )
    if stored is None and not figures:
        raise NotFound(f"no queue {queue!r}: no task names it and it was never configured")
    found = queue_json(queue, stored, figures[0] if figures else None, await call.store.now())
    retention: RetentionPolicy = await call.store.queue_retention_get(call.tenant_id, queue)
    found = await with_keys(call.store, stored, found)
    return render.json_response({**found, "retention": retention.to_json()})


async def with_keys(
    store: QueueStore, queue: Queue | None, found: dict[str, Any]
) -> dict[str, Any]:
    """``found`` (a queue's JSON) with its busiest keys when it has limits per key, and
    ``key_limit`` in ``held_by`` while a key's rate limit holds ready tasks back."""
    if queue is None or not keyed(queue.settings):
        return found
    figures = await store.queue_keys(queue, KEYS_SHOWN)
    keys = [key_json(f, queue.settings, queue.name) for f in figures]
    held = found["held_by"]
    if any("rate" in k["held_by"] for k in keys) and "key_limit" not in held:
        held = [*held, "key_limit"]
    return {**found, "keys": keys, "held_by": held}


@router.get(
    "/workers",
    summary="List live pull workers",
    responses={200: {"model": WorkerListOut, "description": "Workers seen recently"}},
)
async def list_workers(
    call: TenantCall,
    live_within_seconds: Annotated[
        float, Query(gt=0, le=7 * 86400, description="Seen within this many seconds")
    ] = DEFAULT_LIVE_WITHIN_SECONDS,
) -> Response:
    """Workers that polled or heart-beat within ``live_within_seconds`` (default 60), with the
    queues they poll, when they were last seen and how many leases they hold."""
    found = await call.store.worker_list(call.tenant_id, live_within_seconds)
    return render.json_response({"items": [worker_json(w) for w in found]})
