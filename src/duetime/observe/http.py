"""HTTP-server metrics as a pure ASGI middleware: requests by method, *route template* (never
the raw path, so ``/v1/tasks/{task_id}`` is one series however many tasks exist) and status, and
their latency."""

from __future__ import annotations

import time
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from duetime import metrics

_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})

UNMATCHED = "unmatched"
"""The route label of a request no route matched (a 404 for an unknown path)."""


def route_template(scope: Scope) -> str:
    """The path template of the route that served ``scope`` (set by the router), else
    :data:`UNMATCHED`."""
    route: Any = scope.get("route")
    path = getattr(route, "path", None)
    return path if isinstance(path, str) else UNMATCHED


class HttpMetrics:
    """Counts every HTTP request in ``duetime_http_requests_total`` and times it in
    ``duetime_http_request_duration_seconds`` (to the last byte of the response)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # an app that raises before answering is a 500 to the client

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        metrics.HTTP_IN_PROGRESS.inc()
        try:
            await self.app(scope, receive, sending)
        finally:
            metrics.HTTP_IN_PROGRESS.dec()
            method = scope.get("method", "GET")
            method = method if method in _METHODS else "other"
            route = route_template(scope)
            metrics.child(metrics.HTTP_REQUESTS, method, route, str(status)).inc()
            metrics.child(metrics.HTTP_SECONDS, method, route).observe(
                time.perf_counter() - started
            )
