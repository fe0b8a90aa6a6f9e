"""The HTTP API v1 as a FastAPI app: :func:`create_app` wires the store, auth, routers and the
problem-details error handlers together.

Routers live in :mod:`duetime.api.routes`, one module per resource; a new resource adds its module
to :data:`ROUTERS` (and any body model it reads with ``json_body`` to :data:`DOCUMENTED_MODELS`).
Routes reach shared state through ``app.state``: ``store`` (the contract with the server) and
``services`` (:class:`~duetime.api.deps.Services`: store, settings, auth, task builder), usually
via the ``TenantCall`` / ``AdminCall`` dependencies of :mod:`duetime.api.deps`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from fastapi import APIRouter, Depends, FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel
from starlette.types import ASGIApp

from duetime.api import problems
from duetime.api.bulk import BulkIn
from duetime.api.convert import TaskBuilder
from duetime.api.deps import Authenticator, Services
from duetime.api.guard import DevModeGuard
from duetime.api.hot_lane import hot_lane
from duetime.api.limits import HeaderLimits
from duetime.api.query_guard import reject_unknown_query
from duetime.api.queue_schemas import (
    CompleteBatchIn,
    CompleteIn,
    FailBatchIn,
    FailIn,
    HeartbeatIn,
    LeaseIn,
    QueuePutIn,
    ReleaseBatchIn,
    ReleaseIn,
)
from duetime.api.quotas import QuotaGate
from duetime.api.routes import (
    admin,
    bulk,
    history,
    leases,
    notifications,
    ops,
    queues,
    schedule_keys,
    schedules,
    targets,
    tasks,
    tenant,
)
from duetime.api.schedule_schemas import (
    BackfillIn,
    PauseIn,
    ResumeIn,
    ScheduleCreate,
    SchedulePatchIn,
    TriggerIn,
)
from duetime.api.schemas import (
    ProblemOut,
    RotateIn,
    TaskBatchCreate,
    TaskCreate,
    TaskPatchIn,
    TenantCreateIn,
    TenantQuotasIn,
)
from duetime.api.ui import router as ui_router
from duetime.config import Settings
from duetime.observe import tracing
from duetime.observe.http import HttpMetrics
from duetime.store.protocols import ApiStore
from duetime.version import __version__

ROUTERS: Sequence[APIRouter] = (
    tasks.router,
    bulk.router,
    history.router,
    schedule_keys.router,
    schedules.router,
    queues.router,
    leases.router,
    targets.router,
    tenant.router,
    notifications.router,
    admin.router,
    ops.router,
    ui_router,
)
"""Every router the app serves, in order."""

BATCH_BODY_LIMIT_BYTES = 64 * 1024 * 1024
"""A batch body's cap: a batch whose payloads add up to more must be split."""

DOCUMENTED_MODELS: Sequence[type[BaseModel]] = (
    ProblemOut,
    BulkIn,
    TaskCreate,
    TaskBatchCreate,
    TaskPatchIn,
    RotateIn,
    TenantCreateIn,
    QueuePutIn,
    LeaseIn,
    HeartbeatIn,
    CompleteIn,
    FailIn,
    CompleteBatchIn,
    FailBatchIn,
    ReleaseIn,
    ReleaseBatchIn,
    TenantQuotasIn,
    ScheduleCreate,
    SchedulePatchIn,
    PauseIn,
    ResumeIn,
    TriggerIn,
    BackfillIn,
    notifications.NotificationsIn,
)
"""Models the OpenAPI document must carry although no route declares them as a parameter."""

DESCRIPTION = """\
duetime registers work to run at a future time and delivers it when due — to a webhook, a message
broker, or a worker that leases it — with retries, fencing and a history of every attempt.

Authenticate with `Authorization: Bearer <api key>`; admin calls take the admin token.
Errors are RFC 9457 `application/problem+json`.
"""


def create_app(
    settings: Settings,
    store: ApiStore,
    *,
    validate_target: Callable[[Mapping[str, Any]], Mapping[str, Any] | None] | None = None,
) -> FastAPI:
    """The API over an opened, migrated ``store`` (the caller owns its life cycle).

    ``validate_target`` is run on every task target at create time (e.g. the network guard that
    refuses private addresses); it raises ``duetime.errors.ValidationError`` naming the field.
    """
    # FastAPI's own OpenTelemetry instrumentation (FastAPI 0.165 and later; earlier versions
    # keep the option in app.extra) follows duetime's tracing: with it off, requests no longer
    # look up the global tracer, meter and logger providers (~5 us each request).
    traced = tracing.ENABLED
    app = (FastAPI if traced else _LanedApp)(
        title="duetime",
        version=__version__,
        description=DESCRIPTION,
        openapi_url="/openapi.json",
        docs_url="/docs",
        redoc_url=None,
        dependencies=[Depends(reject_unknown_query)],
        telemetry={"tracing": traced, "metrics": traced, "logs": traced},
    )
    app.state.store = store
    # Body caps guard memory; payloads are limited per task by max_payload_bytes. A request may
    # spell a payload ~3x longer than its stored form (\u escapes), hence the factor.
    body_limit = 4 * settings.max_payload_bytes + 1024 * 1024
    app.state.services = Services(
        store=store,
        settings=settings,
        auth=Authenticator(settings, store),
        builder=TaskBuilder(settings.max_payload_bytes, validate_target),
        quotas=QuotaGate(store),
        body_limit=body_limit,
        batch_body_limit=max(BATCH_BODY_LIMIT_BYTES, body_limit),
    )
    problems.install(app)
    if settings.dev_mode:  # no credentials: refuse cross-site and DNS-rebinding requests
        app.add_middleware(DevModeGuard)
    app.add_middleware(HeaderLimits)  # 431 for oversized header sets, before the routes
    app.add_middleware(HttpMetrics)  # added last, so outermost: every refusal counts too
    for router in ROUTERS:
        app.include_router(router)
    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    return app


class _LanedApp(FastAPI):
    """The app with :mod:`duetime.api.hot_lane` in front of FastAPI's stack."""

    def build_middleware_stack(self) -> ASGIApp:
        routes = [route for router in ROUTERS for route in router.routes]
        return hot_lane(
            super().build_middleware_stack(), routes, self.user_middleware, self.exception_handlers
        )


_SECURITY_SCHEMES = {
    "ApiKey": {"type": "http", "scheme": "bearer", "description": "A tenant's API key."},
    "AdminToken": {"type": "http", "scheme": "bearer", "description": "DUETIME_ADMIN_TOKEN."},
}


def _openapi(app: FastAPI) -> dict[str, Any]:
    """FastAPI's document plus what it cannot see: the models of bodies read by hand and of
    problems, and the bearer schemes (auth is checked in code, not declared per parameter)."""
    if app.openapi_schema is None:
        schema = get_openapi(
            title=app.title, version=app.version, description=app.description, routes=app.routes
        )
        components = schema.setdefault("components", {})
        models = components.setdefault("schemas", {})
        for model in DOCUMENTED_MODELS:
            found = model.model_json_schema(ref_template="#/components/schemas/{model}")
            models.update(found.pop("$defs", {}))
            models[model.__name__] = found
        components["securitySchemes"] = _SECURITY_SCHEMES
        for path, operations in schema.get("paths", {}).items():
            security: list[dict[str, list[str]]]
            if path.startswith("/v1/admin/"):
                security = [{"AdminToken": []}]
            elif path.startswith("/v1/"):
                security = [{"ApiKey": []}]
            else:
                continue
            for operation in operations.values():
                operation["security"] = security
        app.openapi_schema = schema
    return app.openapi_schema
