"""The HTTP API v1 as a FastAPI app: :func:`create_app` wires the store, auth, routers and the
problem-details error handlers together.

Routers live in :mod:`duetime.api.routes`, one module per resource; a new resource adds its module
to :data:`ROUTERS` (and any body model it reads with ``json_body`` to :data:`DOCUMENTED_MODELS`).
Routes reach shared state through ``app.state``: ``store`` (the contract with the server) and
``services`` (:class:`~duetime.api.deps.Services`: store, settings, auth, task builder), usually
via the ``TenantCall`` / ``AdminCall`` dependencies of :mod:`duetime.api.deps`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from fastapi import APIRouter, Depends, FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute
from pydantic import BaseModel
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from duetime.api import problems
from duetime.api.bulk import CancelIn, ReplayIn
from duetime.api.convert import MAX_FILTER_CHARS
from duetime.api.deps import Authenticator, Services
from duetime.api.fields import DATE_RANGE, NO_CONTROL, NO_CONTROL_OR_EMPTY, rules
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
from duetime.api.routes import (
    admin,
    bulk,
    client_certificates,
    credentials,
    history,
    leases,
    notifications,
    ops,
    payloads,
    queues,
    schedule_keys,
    schedules,
    sessions,
    targets,
    tasks,
    tenant,
    wellknown,
    workflows,
)
from duetime.api.routes.client_certificates import CERTIFICATE_NAME
from duetime.api.routes.schedule_keys import MAX_KEY_LENGTH
from duetime.api.schedule_schemas import (
    BackfillIn,
    PauseIn,
    ResumeIn,
    ScheduleCreate,
    SchedulePatchIn,
    TriggerIn,
)
from duetime.api.schemas import (
    QUEUE_NAME,
    ProblemOut,
    RotateIn,
    TaskBatchCreate,
    TaskCreate,
    TaskIdItemsOut,
    TaskItemsOut,
    TaskPatchIn,
    TenantCreateIn,
    TenantQuotasIn,
)
from duetime.api.target_auth import CREDENTIAL_NAME
from duetime.api.ui import router as ui_router
from duetime.api.workflow_schemas import SpawnIn, WorkflowCreate, WorkflowNodeIn, document_nodes
from duetime.clock import Clock
from duetime.config import Settings
from duetime.delivery.outbound import OutboundIdentity
from duetime.delivery.sealing import sealer_for
from duetime.engine.pressure import Pulse
from duetime.lifecycle.create import Creator, TargetCheck, TaskBuilder
from duetime.lifecycle.flow import FlowGate
from duetime.lifecycle.lease import LeaseHub
from duetime.lifecycle.quotas import QuotaGate
from duetime.lifecycle.waits import EndWatch
from duetime.observe import tracing
from duetime.observe.http import HttpMetrics
from duetime.schedule.evaluation import EvaluationPool, node_pool
from duetime.store.protocols import ApiStore
from duetime.version import __version__

ROUTERS: Sequence[APIRouter] = (
    tasks.router,
    workflows.router,
    bulk.router,
    history.router,
    schedule_keys.router,
    schedules.router,
    queues.router,
    leases.router,
    targets.router,
    tenant.router,
    client_certificates.router,
    payloads.router,
    wellknown.router,
    notifications.router,
    credentials.router,
    admin.router,
    sessions.router,
    ops.router,
    ui_router,
)
"""Every router the app serves, in order."""

BATCH_BODY_LIMIT_BYTES = 64 * 1024 * 1024
"""A batch body's cap: a batch whose payloads add up to more must be split."""

DOCUMENTED_MODELS: Sequence[type[BaseModel]] = (
    ProblemOut,
    TaskItemsOut,
    TaskIdItemsOut,
    ReplayIn,
    CancelIn,
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
    sessions.SessionRevokeIn,
    client_certificates.ClientCertificateIn,
    credentials.CredentialIn,
    WorkflowCreate,
    WorkflowNodeIn,
    SpawnIn,
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
    validate_target: TargetCheck | None = None,
    clock: Clock | None = None,
    evaluations: EvaluationPool | None = None,
) -> FastAPI:
    """The API over an opened, migrated ``store`` (the caller owns its life cycle).

    ``validate_target`` is run on every task target at create time (e.g. the network guard that
    refuses private addresses); it raises ``duetime.errors.ValidationError`` naming the field.
    ``clock`` dates ID tokens and key rotations (tests pass the store's fake clock).
    Every target's credentials are then sealed with the key ring of ``settings``
    (:mod:`duetime.delivery.sealing`).
    ``evaluations``: where schedule expressions are evaluated (default: the process's pool,
    :func:`duetime.schedule.evaluation.node_pool`).
    """
    # FastAPI's own OpenTelemetry instrumentation (FastAPI 0.165 and later; earlier versions
    # keep the option in app.extra) follows duetime's tracing: with it off, requests no longer
    # look up the global tracer, meter and logger providers (~5 us each request). The hot routes
    # are answered by the lane either way; duetime's own task spans cover them.
    traced = tracing.ENABLED
    app = _LanedApp(
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
    # ID tokens' keys (/.well-known), client certificates' sealing, held payloads' tokens.
    app.state.identity = OutboundIdentity.from_settings(store, settings, clock)
    # Body caps guard memory; payloads are limited per task by max_payload_bytes. A request may
    # spell a payload ~3x longer than its stored form (\u escapes), hence the factor.
    body_limit = 4 * settings.max_payload_bytes + 1024 * 1024
    pulse = Pulse()
    leases = LeaseHub(store, pulse.add, handoff=settings.lease_handoff)
    app.state.services = Services(
        store=store,
        settings=settings,
        auth=Authenticator(settings, store),
        creator=Creator(
            TaskBuilder(settings.max_payload_bytes, validate_target, sealer_for(settings)),
            QuotaGate(store, report=store.notification_record),
            leases,
            pulse.add,
            FlowGate(),
        ),
        leases=leases,
        body_limit=body_limit,
        batch_body_limit=max(BATCH_BODY_LIMIT_BYTES, body_limit),
        pulse=pulse,
        evaluations=evaluations or node_pool(),
    )
    waits = app.state.waits = EndWatch(store)  # GET ...?wait=: lifecycle/waits.py
    leases.watch.on_close.append(waits.close)  # a server stopping answers waits too
    problems.install(app)
    if settings.dev_mode:  # no credentials: refuse cross-site and DNS-rebinding requests
        app.add_middleware(DevModeGuard)
    app.add_middleware(HeaderLimits)  # 431 for oversized header sets, before the routes
    app.add_middleware(HttpMetrics)  # every refusal counts too
    app.add_middleware(NoSniff)  # added last, so outermost
    for router in ROUTERS:
        app.include_router(router)
    app.state.allowed_methods = _allowed_methods(
        [route for router in ROUTERS for route in router.routes]
    )
    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    return app


class _LanedApp(FastAPI):
    """The app with :mod:`duetime.api.hot_lane` in front of FastAPI's stack."""

    def build_middleware_stack(self) -> ASGIApp:
        routes = [route for router in ROUTERS for route in router.routes]
        return hot_lane(
            super().build_middleware_stack(), routes, self.user_middleware, self.exception_handlers
        )


NOSNIFF = (b"x-content-type-options", b"nosniff")


class NoSniff:
    """``X-Content-Type-Options: nosniff`` on every answer (once: the dashboard and every
    problem, the catch-all 500 included, set their own): a browser never reads a JSON answer
    that echoes input, or a payload, as HTML or script."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", ()))
                if not any(name.lower() == NOSNIFF[0] for name, _ in headers):
                    message["headers"] = [*headers, NOSNIFF]
            await send(message)

        await self.app(scope, receive, sending)


def _allowed_methods(routes: Sequence[Any]) -> Callable[[str], list[str]]:
    """The methods of every route whose path matches a request's: what a 405's ``Allow`` must
    list (Starlette names only those of the first route that matched the path, and duetime
    declares one route per method)."""
    index: dict[str, set[str]] = {}
    patterns: dict[str, re.Pattern[str]] = {}
    for route in routes:
        if isinstance(route, APIRoute):
            index.setdefault(route.path, set()).update(route.methods or ())
            patterns[route.path] = route.path_regex

    def allowed(path: str) -> list[str]:
        # A path that is a route's own (``/v1/tasks/batch``) has that route's methods, not also
        # those of a template it happens to fit (``/v1/tasks/{task_id}``).
        if path in index:
            return sorted(index[path])
        found = set()
        for template, pattern in patterns.items():
            if pattern.match(path):
                found |= index[template]
        return sorted(found)

    return allowed


_SECURITY_SCHEMES = {
    "ApiKey": {"type": "http", "scheme": "bearer", "description": "A tenant's API key."},
    "AdminToken": {"type": "http", "scheme": "bearer", "description": "DUETIME_ADMIN_TOKEN."},
}


def _path_rule(path: str, name: str) -> dict[str, Any]:
    """What a path segment must be, as the routes check it: the name of a queue, a credential
    or a client certificate its pattern, a schedule's key at most 255 characters, anything else
    (ids) at most 1,024; none holds a control character (a 422 naming it; a clean id that
    names nothing is a 404)."""
    if name == "name" and path.startswith("/v1/queues/"):
        return {"pattern": f"^{QUEUE_NAME}$"}
    if name == "name" and path.startswith("/v1/credentials/"):
        return {"pattern": f"^{CREDENTIAL_NAME}$"}
    if name == "name" and path.startswith("/v1/client-certificates/"):
        return {"pattern": f"^{CERTIFICATE_NAME}$"}
    longest = MAX_KEY_LENGTH if name == "key" else MAX_FILTER_CHARS
    return {"pattern": NO_CONTROL, "maxLength": longest}


def _query_rule(parameter: dict[str, Any]) -> None:
    """What a text query parameter must be, as :mod:`duetime.api.convert` checks it: an RFC 3339
    instant in range where the description says so; else no control character and at most
    1,024 characters (longer matches nothing stored), unless it states its own pattern."""
    schema = parameter["schema"]
    branches = [schema, *schema.get("anyOf", ())]
    if not any(b.get("type") == "string" for b in branches) or "items" in schema:
        return
    if parameter.get("description", "").startswith("RFC 3339"):  # or empty: no bound
        schema["anyOf"] = [
            {"type": "string", "format": "date-time"},
            {"type": "string", "maxLength": 0},
        ]
        schema.setdefault("x-rules", []).extend(rules((parameter["name"], DATE_RANGE))["x-rules"])
    elif not any("pattern" in b for b in branches):
        schema.update({"pattern": NO_CONTROL_OR_EMPTY, "maxLength": MAX_FILTER_CHARS})


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
        document_nodes(models)
        components["securitySchemes"] = _SECURITY_SCHEMES
        for path, operations in schema.get("paths", {}).items():
            for operation in operations.values():
                for parameter in operation.get("parameters", ()):
                    if parameter["in"] == "path":
                        parameter["schema"].update(_path_rule(path, parameter["name"]))
                    elif parameter["in"] == "query":
                        _query_rule(parameter)
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
