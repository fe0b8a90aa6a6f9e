"""Operations: ``/healthz``, ``/readyz`` and ``/metrics`` (SPEC §3 "Operations").

``/healthz`` and ``/readyz`` need no auth (load balancers) and reveal nothing. ``/metrics`` names
every tenant's queues and their sizes, so outside dev mode it needs a bearer token: the admin
token or ``DUETIME_METRICS_TOKEN`` (401 otherwise).
"""

from __future__ import annotations

import hmac

from fastapi import APIRouter, Request
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.responses import Response

from duetime import metrics
from duetime.api import render
from duetime.api.deps import Services, bearer_token, services
from duetime.api.problems import not_ready, problem_responses
from duetime.errors import StoreUnavailable, Unauthorized

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
    responses={
        200: {"content": {CONTENT_TYPE_LATEST: {}}, "description": "Text exposition"},
        **problem_responses(401),
    },
)
async def prometheus_metrics(request: Request) -> Response:
    """This process's metrics; ``duetime_tasks`` is read from the store's maintained counters at
    scrape time (and left as it was when the store is unreachable). Series of queues that no
    longer hold tasks are dropped."""
    found = services(request)
    _check_metrics_token(found, bearer_token(request))
    try:
        counts = await found.store.task_count_by_status()
    except StoreUnavailable:
        metrics.STORE_ERRORS.labels("api").inc()
    else:
        metrics.set_task_counts(counts)
        metrics.forget_queues({count.queue for count in counts})
    return Response(generate_latest(metrics.REGISTRY), media_type=CONTENT_TYPE_LATEST)


def _check_metrics_token(found: Services, token: str | None) -> None:
    """Open in dev mode; else the metrics token, or the admin token, or ``Unauthorized``."""
    settings = found.settings
    if settings.dev_mode:
        return
    metrics_token = settings.metrics_token
    if token and metrics_token and hmac.compare_digest(token.encode(), metrics_token.encode()):
        return
    if token is None:
        raise Unauthorized(
            "/metrics needs a token: send Authorization: Bearer <DUETIME_METRICS_TOKEN or the "
            "admin token>"
        )
    found.auth.check_admin(token)
