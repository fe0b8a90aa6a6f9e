"""Operations: ``/healthz``, ``/readyz`` and ``/metrics`` (SPEC §3 "Operations"). No auth: they
are for load balancers and Prometheus and reveal no tenant data."""

from __future__ import annotations

from fastapi import APIRouter, Request
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.responses import Response

from duetime import metrics
from duetime.api import render
from duetime.api.deps import services
from duetime.api.problems import not_ready, problem_responses
from duetime.errors import StoreUnavailable

router = APIRouter(tags=["operations"])


@router.get("/healthz", summary="The process is up")
async def healthz() -> Response:
    return render.json_response({"status": "ok"})


@router.get(
    "/readyz", summary="The store is reachable and migrated", responses=problem_responses(503)
)
async def readyz(request: Request) -> Response:
    """200 when the store answers and no migration is pending, else 503 (with ``Retry-After``)."""
    store = services(request).store
    await store.ping()
    pending = await store.migrations_pending()
    if pending:
        return not_ready(request, f"migrations pending: {', '.join(pending)}; run duetime migrate")
    return render.json_response({"status": "ready"})


@router.get(
    "/metrics",
    summary="Prometheus metrics",
    response_class=Response,
    responses={200: {"content": {CONTENT_TYPE_LATEST: {}}, "description": "Text exposition"}},
)
async def prometheus_metrics(request: Request) -> Response:
    """This process's metrics; ``duetime_tasks`` is read from the store at scrape time (and left
    as it was when the store is unreachable)."""
    store = services(request).store
    try:
        counts = await store.task_count_by_status()
    except StoreUnavailable:
        metrics.STORE_ERRORS.labels("api").inc()
    else:
        metrics.TASKS.clear()
        for count in counts:
            metrics.TASKS.labels(count.queue, count.status.value).set(count.count)
    return Response(generate_latest(metrics.REGISTRY), media_type=CONTENT_TYPE_LATEST)
