"""The hot routes answered in front of FastAPI's routing stack (ADR 0010).

A single create through the SDK spends most of its node CPU outside the endpoint: uvicorn, then
Starlette's and FastAPI's layers (the server-error, telemetry and body-limit wrappers, the
exception middleware, the exit-stack middleware, the router walking the included routers, the
request/response wrapper), then the endpoint; none of those layers has anything to do for the
hot routes, and together they cost ~16 % of the node's CPU per single create (ADR 0010).

:class:`HotLane` is the outermost ASGI app. A request for one of :data:`HOT_ROUTES` goes
through duetime's own middlewares (the app's ``user_middleware``: metrics, header limits, the
dev-mode guard, in the same order) straight to the route's lean handler
(:class:`~duetime.api.lean.LeanRoute`); every other request goes to FastAPI's stack unchanged.
Nothing about the answer changes: the same handler runs, errors become the same problems
through the app's own exception handlers, an unexpected error is the same 500 and is re-raised
for the server to log (as Starlette's ``ServerErrorMiddleware`` does), the route is in the scope
for the metrics' route label. The OpenAPI document is FastAPI's, untouched.

Only a request the router would send to that same route takes the lane: the method and the path
match, no ``root_path`` (a mounted app's paths are the router's to strip), and
``tests/api/test_hot_lane.py`` pins that the router resolves each hot path to the same route.
Tracing does not change which code serves a request: the lane serves the hot routes with
tracing on too, and duetime's own task spans (:mod:`duetime.observe.tracing`) cover them.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from duetime.api.lean import LeanRoute, is_lean

__all__ = ["HOT_ROUTES", "HotLane", "hot_lane"]

HOT_ROUTES: tuple[tuple[str, str], ...] = (
    ("POST", "/v1/tasks"),
    ("POST", "/v1/tasks/batch"),
    ("POST", "/v1/queues/{name}/lease"),
    ("POST", "/v1/leases/complete"),
    ("POST", "/v1/leases/fail"),
    ("POST", "/v1/leases/{lease_id}/heartbeat"),
)
"""(method, path template) of the routes a task's life runs through: creates, leases, acks."""

ExceptionHandler = Callable[[Request, Exception], Any]
"""Starlette's: returns a response, or an awaitable of one."""


@dataclass(frozen=True)
class _Hot:
    route: APIRoute
    answer: ASGIApp


class HotLane:
    """ASGI app: :data:`HOT_ROUTES` through ``middleware`` to their handlers, the rest to
    ``rest`` (FastAPI's whole stack)."""

    def __init__(
        self,
        rest: ASGIApp,
        routes: Iterable[APIRoute],
        middleware: Sequence[Middleware],
        exception_handlers: Mapping[Any, ExceptionHandler],
    ) -> None:
        self.rest = rest
        self._handlers = dict(exception_handlers)
        self._static: dict[tuple[str, str], _Hot] = {}
        self._patterns: list[tuple[str, re.Pattern[str], _Hot]] = []
        for route in routes:
            answer: ASGIApp = _Answer(route.get_route_handler(), self._on_error)
            for cls, args, kwargs in reversed(middleware):
                answer = cls(answer, *args, **kwargs)
            hot = _Hot(route, answer)
            for method in route.methods or ():
                if route.param_convertors:
                    self._patterns.append((method, route.path_regex, hot))
                else:
                    self._static[method, route.path] = hot

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not scope.get("root_path"):
            method, path = scope["method"], scope["path"]
            hot = self._static.get((method, path))
            params: dict[str, Any] = {}
            if hot is None:
                for wanted, pattern, candidate in self._patterns:
                    found = pattern.match(path) if method == wanted else None
                    if found is not None:
                        convert = candidate.route.param_convertors
                        params = {k: convert[k].convert(v) for k, v in found.groupdict().items()}
                        hot = candidate
                        break
            if hot is not None:
                # What the router puts in the scope: the metrics label routes by scope["route"].
                scope["route"] = hot.route
                scope["endpoint"] = hot.route.endpoint
                scope["path_params"] = params
                await hot.answer(scope, receive, send)
                return
        await self.rest(scope, receive, send)

    async def _on_error(self, request: Request, exc: Exception) -> tuple[Response, bool]:
        """The app's problem for ``exc`` (its handler found by the exception's class, as
        Starlette looks it up: an HTTP exception's status code first), and whether it must be
        re-raised: the catch-all ``Exception`` handler's 500 is, so that the server logs it."""
        keys: list[Any] = list(type(exc).__mro__)
        if isinstance(exc, HTTPException):
            keys.insert(0, exc.status_code)
        for cls in keys:
            handler = self._handlers.get(cls)
            if handler is not None:
                answer = handler(request, exc)
                if inspect.isawaitable(answer):
                    answer = await answer
                return answer, cls is Exception
        raise exc


class _Answer:
    """The innermost ASGI app of a hot route: its lean handler, errors made problems."""

    def __init__(
        self,
        handle: Callable[[Request], Awaitable[Response]],
        on_error: Callable[[Request, Exception], Awaitable[tuple[Response, bool]]],
    ) -> None:
        self.handle = handle
        self.on_error = on_error

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        started = False

        async def sending(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            response = await self.handle(request)
            await response(scope, receive, sending)
        except Exception as exc:
            if started:  # too late for a problem: the client has a status already
                raise
            problem, reraise = await self.on_error(request, exc)
            await problem(scope, receive, sending)
            if reraise:
                raise


def hot_lane(
    rest: ASGIApp,
    routes: Iterable[Any],
    middleware: Sequence[Middleware],
    exception_handlers: Mapping[Any, ExceptionHandler],
) -> HotLane:
    """A :class:`HotLane` in front of ``rest`` for the :data:`HOT_ROUTES` among ``routes``
    (the app's API routes); each must be a lean route, or this raises ``LookupError``."""
    wanted = set(HOT_ROUTES)
    found: list[APIRoute] = []
    for route in routes:
        if not isinstance(route, APIRoute):
            continue
        keys = {(method, route.path) for method in route.methods or ()}
        if keys & wanted:
            if not isinstance(route, LeanRoute) or not is_lean(route.dependant):
                raise LookupError(f"hot route {route.path} is not a lean route")
            found.append(route)
            wanted -= keys
    if wanted:
        raise LookupError(f"hot routes not found: {sorted(wanted)}")
    return HotLane(rest, found, middleware, exception_handlers)
