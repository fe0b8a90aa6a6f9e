"""A route class for endpoints that read their request themselves (the tasks and leases routers).

Most API routes take ``request: Request`` and string path parameters, and parse and check their
body by hand (:func:`duetime.api.deps.json_body`); FastAPI's per-request machinery for such a
route — reading declared parameters, solving dependencies, preparing response validation —
finds nothing to do, yet costs ~7 % of the node's CPU per create. :class:`LeanRoute` runs those
endpoints directly through FastAPI's documented hook (``APIRoute.get_route_handler``): the
OpenAPI document, routing, middleware and exception handlers stay FastAPI's. A route that
declares anything else (query, header, cookie or body parameters, dependencies of its own, a path
parameter that is not ``str``) keeps FastAPI's handler (docs/adr/0007-lean-hot-routes.md).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from starlette.responses import Response

from duetime.api.query_guard import reject_unknown_query

__all__ = ["LeanRoute", "is_lean"]

Handler = Callable[[Request], Coroutine[Any, Any, Response]]


def is_lean(dependant: Dependant) -> bool:
    """Whether an endpoint takes only the request and ``str`` path parameters, and depends on
    nothing of its own but the app-wide :func:`reject_unknown_query` (which the lean handler
    always runs: ``tests/api/test_lean_routes.py`` checks that the app depends on nothing else)."""
    if dependant.request_param_name is None or dependant.call is None:
        return False
    if (
        dependant.query_params
        or dependant.header_params
        or dependant.cookie_params
        or dependant.body_params
        or dependant.websocket_param_name
        or dependant.background_tasks_param_name
        or dependant.response_param_name
        or dependant.security_scopes_param_name
    ):
        return False
    if any(sub.call is not reject_unknown_query for sub in dependant.dependencies):
        return False
    return all(p.field_info.annotation is str for p in dependant.path_params)


class LeanRoute(APIRoute):
    """An :class:`~fastapi.routing.APIRoute` that calls a lean endpoint (:func:`is_lean`) with
    the request and its path parameters, and any other endpoint as FastAPI does."""

    def get_route_handler(self) -> Handler:
        dependant = self.dependant
        if not is_lean(dependant):
            return super().get_route_handler()
        endpoint = dependant.call
        assert endpoint is not None
        request_name = dependant.request_param_name
        assert request_name is not None

        async def handle(request: Request) -> Response:
            await reject_unknown_query(request)
            response: Response = await endpoint(**request.path_params, **{request_name: request})
            return response

        return handle
