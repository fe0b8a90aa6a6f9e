"""Unknown query parameters are refused (422 naming them), so a misspelt filter
(``?stauts=failed``) is an error instead of a silently unfiltered answer.

An app-wide dependency: it compares the request's query names with those the matched route
declares (its own and its dependencies'), for the ``/v1/`` API only (the dashboard's forms and
links are not API calls).
"""

from __future__ import annotations

from fastapi import Request
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute

from duetime.errors import ValidationError

_ALLOWED: dict[int, frozenset[str]] = {}


def _query_names(dependant: Dependant) -> set[str]:
    names = {p.alias for p in dependant.query_params}
    for sub in dependant.dependencies:
        names |= _query_names(sub)
    return names


def _declared(route: APIRoute) -> frozenset[str]:
    found = _ALLOWED.get(id(route))
    if found is None:
        found = _ALLOWED[id(route)] = frozenset(_query_names(route.dependant))
    return found


async def reject_unknown_query(request: Request) -> None:
    """Raise ``ValidationError`` (422) naming the first query parameter the route does not take."""
    # The raw query string first: most calls have none, and parsing an empty one is not free.
    if not request.scope.get("query_string") or not request.query_params:
        return
    if not request.url.path.startswith("/v1/"):
        return
    route = request.scope.get("route")
    if not isinstance(route, APIRoute):
        return
    allowed = _declared(route)
    for name in request.query_params:
        if name not in allowed:
            takes = ", ".join(sorted(allowed)) or "none"
            raise ValidationError(
                f"unknown query parameter {name!r} (this call takes: {takes})", field=name
            )
