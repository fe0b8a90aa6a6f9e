"""The one place where errors become HTTP: RFC 9457 ``application/problem+json`` responses.

=====================================  ======  ====================================
raised                                 status  notes
=====================================  ======  ====================================
:class:`PayloadTooLarge`               413     names the field (``payload``)
:class:`RequestTooLarge`               413     the whole body is over the server's cap
``errors.ValidationError``             422     ``field``, ``errors``; no driver's words
FastAPI ``RequestValidationError``     422     field path such as ``tasks.3.target.url``
malformed JSON body                    400
``errors.Unauthorized``                401     ``WWW-Authenticate: Bearer``
``errors.NotFound``                    404     also another tenant's resource
``errors.Conflict`` / ``StaleLease``   409
``errors.TooManyRequests``             429     names the ``limit``; ``Retry-After``
``errors.StoreFull``                   507     out of disk space; ``Retry-After``
``errors.StoreUnavailable``            503     ``Retry-After``; no internals in the body
:class:`ShuttingDown`                  503     ``Retry-After``; the node stopped the call's work
Starlette ``HTTPException``            its own (unknown route 404, wrong method 405, ...)
Starlette ``ClientDisconnect``         400     nobody reads it; logged as one line
anything else                          500     the server logs it; the body says nothing internal
=====================================  ======  ====================================

Every problem carries ``type`` (a stable ``urn:duetime:problem:<slug>``), ``title``, ``status``,
``detail`` and ``instance`` (the request path).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect
from starlette.responses import Response

from duetime.api.fields import NO_CONTROL, NO_CONTROL_OR_EMPTY
from duetime.api.target_auth import AUTH_KINDS
from duetime.errors import (
    BadCursor,
    Conflict,
    DuetimeError,
    Forbidden,
    NotFound,
    PayloadTooLarge,
    StaleLease,
    StoreFull,
    StoreUnavailable,
    TooManyRequests,
    Unauthorized,
    ValidationError,
)
from duetime.metrics import STORE_ERRORS
from duetime.target_types import TARGETS

log = logging.getLogger(__name__)

PROBLEM_MEDIA_TYPE = "application/problem+json"
RETRY_AFTER_SECONDS = 2
"""What a 503 asks clients to wait: a store outage is usually a fail-over or a restart."""

_BODY_LOC = frozenset({"body", "query", "path", "header", "cookie"})
_NO_CONTROL = frozenset({NO_CONTROL, NO_CONTROL_OR_EMPTY})
CONTROL_CHARACTERS = "must not contain control characters or lone surrogates"
"""What a text field's ``NO_CONTROL`` pattern means, said instead of the pattern."""
_DRIVERS = frozenset({"asyncpg", "sqlite3", "aiosqlite", "psycopg"})
UNSTORABLE = "the request holds text the store cannot keep, such as the NUL character (U+0000)"
"""The detail of a validation error a database driver raised: its own words never reach a
client (they name the server's internals and differ between the stores)."""
_TARGET_TAGS = frozenset(t.value for t in TARGETS)  # the Target union's tags: the type names


class RequestTooLarge(DuetimeError):
    """The request body is over the server's cap (413)."""


class ShuttingDown(DuetimeError):
    """The node is shutting down and stopped the call's work (503, ``Retry-After``): another
    node, or this one once restarted, takes the call again."""


# Most specific first: the first class an exception is an instance of decides.
_MAPPING: Sequence[tuple[type[DuetimeError], int, str, str]] = (
    (PayloadTooLarge, 413, "payload-too-large", "Payload too large"),
    (RequestTooLarge, 413, "request-too-large", "Request too large"),
    (BadCursor, 400, "bad-cursor", "Not a cursor this server issued"),
    (ValidationError, 422, "validation", "Invalid request"),
    (Unauthorized, 401, "unauthorized", "Unauthorized"),
    (Forbidden, 403, "forbidden", "Forbidden"),
    (NotFound, 404, "not-found", "Not found"),
    (StaleLease, 409, "stale-lease", "Lease is no longer current"),
    (Conflict, 409, "conflict", "Conflict"),
    (TooManyRequests, 429, "too-many-requests", "Too many requests"),
    (StoreFull, 507, "store-full", "Store out of space"),
    (StoreUnavailable, 503, "store-unavailable", "Store unavailable"),
    (ShuttingDown, 503, "shutting-down", "Shutting down"),
)


@dataclass(frozen=True, slots=True)
class Problem:
    """What a problem response says, before it has a request to answer (the SQL API's
    workflow requests record one: :mod:`duetime.api.sql_intake`)."""

    status: int
    slug: str
    title: str
    detail: str
    errors: Sequence[tuple[str, str]] = ()
    """(field, detail) pairs; the first names ``field``."""
    headers: Mapping[str, str] = field(default_factory=dict)
    extra: Mapping[str, Any] = field(default_factory=dict)
    """Members added to the body (RFC 9457 extensions such as ``limit``)."""

    def body(self, instance: str) -> dict[str, Any]:
        """The problem document, for a request to ``instance`` (its path)."""
        body: dict[str, Any] = {
            "type": f"urn:duetime:problem:{self.slug}",
            "title": self.title,
            "status": self.status,
            "detail": self.detail,
            "instance": instance,
        }
        if self.errors:
            body["field"] = self.errors[0][0]
            body["errors"] = [{"field": name, "detail": text} for name, text in self.errors]
        body.update(self.extra)
        return body


def problem(
    request: Request,
    status: int,
    slug: str,
    title: str,
    detail: str,
    *,
    errors: Sequence[tuple[str, str]] = (),
    headers: Mapping[str, str] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> Response:
    """A problem response (with ``X-Content-Type-Options: nosniff``). ``errors`` are (field,
    detail) pairs; the first names ``field``; ``extra`` adds members (RFC 9457 extensions such
    as ``limit``)."""
    found = Problem(status, slug, title, detail, errors, headers or {}, extra or {})
    return respond(request, found)


def respond(request: Request, found: Problem) -> Response:
    """``found`` as the response to ``request``."""
    # Said here too, not only by the app's NoSniff middleware: the catch-all 500 is answered
    # outside the middlewares.
    return Response(
        orjson.dumps(found.body(request.url.path)),
        status_code=found.status,
        headers={**found.headers, "X-Content-Type-Options": "nosniff"},
        media_type=PROBLEM_MEDIA_TYPE,
    )


def not_ready(request: Request, detail: str) -> Response:
    """503 for ``/readyz``: the process is up but cannot serve (e.g. migrations pending)."""
    return problem(
        request,
        503,
        "not-ready",
        "Not ready",
        detail,
        headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
    )


def field_path(loc: Sequence[str | int]) -> str:
    """A pydantic error location as a dotted field path: ``("body", "tasks", 3, "target", "http",
    "url")`` → ``tasks.3.target.url`` (the request part and the union tag are dropped)."""
    parts: list[str] = []
    for i, item in enumerate(loc):
        if i == 0 and item in _BODY_LOC:
            continue
        if parts and parts[-1] == "target" and item in _TARGET_TAGS:
            continue
        if i > 0 and loc[i - 1] == "auth" and item in AUTH_KINDS:
            continue  # the auth union's tag (its kind): the field that follows names it again
        parts.append(str(item))
    return ".".join(parts) or "body"


def _message(error: Mapping[str, Any]) -> str:
    kind = error.get("type")
    if kind == "extra_forbidden":
        return "unknown field"
    if kind == "missing":
        return "required"
    if kind == "string_pattern_mismatch" and (error.get("ctx") or {}).get("pattern") in _NO_CONTROL:
        return CONTROL_CHARACTERS
    return str(error.get("msg", "invalid"))


def _driver_error(exc: BaseException) -> bool:
    """Whether ``exc`` was raised by a database driver (its text may name tables, types or the
    server, and differs between the stores)."""
    cause = exc.__cause__
    return cause is not None and type(cause).__module__.split(".")[0] in _DRIVERS


def error_problem(exc: DuetimeError) -> Problem | None:
    """The problem ``exc`` is answered with (None for a ``DuetimeError`` no route should let
    out, e.g. ``ConfigError``: a 500)."""
    match = next((m for m in _MAPPING if isinstance(exc, m[0])), None)
    if match is None:
        return None
    _, status, slug, title = match
    headers: dict[str, str] = {}
    extra: dict[str, Any] = {}
    detail = exc.detail
    errors: list[tuple[str, str]] = []
    if isinstance(exc, ValidationError):
        name = exc.field or "body"
        if _driver_error(exc):
            detail = UNSTORABLE
        errors.append((name, detail))
        if exc.field and not detail.startswith(exc.field):
            detail = f"{exc.field}: {detail}"
    elif isinstance(exc, Unauthorized):
        headers["WWW-Authenticate"] = "Bearer"
    elif isinstance(exc, TooManyRequests):
        headers["Retry-After"] = str(max(1, math.ceil(exc.retry_after or 1)))
        extra["limit"] = exc.limit
    elif isinstance(exc, ShuttingDown):
        headers["Retry-After"] = str(RETRY_AFTER_SECONDS)
    elif isinstance(exc, StoreUnavailable):
        # The store's own message may name hosts or drivers: it is not sent.
        headers["Retry-After"] = str(RETRY_AFTER_SECONDS)
        detail = "the store cannot be reached right now; accepted work is safe, retry later"
        if isinstance(exc, StoreFull):
            detail = (
                "the store has no disk space left and takes no new work until space is freed; "
                "accepted work is safe, retry later"
            )
    return Problem(status, slug, title, detail, errors, headers, extra)


def validation_problem(exc: RequestValidationError) -> Problem:
    """The problem a request that failed validation is answered with: 400 for malformed JSON,
    else 422 naming every field."""
    raw = list(exc.errors())
    for error in raw:
        if error.get("type") == "json_invalid":
            reason = (error.get("ctx") or {}).get("error", "invalid JSON")
            loc = error.get("loc", ())
            where = f" at position {loc[1]}" if len(loc) > 1 else ""
            return Problem(400, "malformed-json", "Malformed JSON", f"{reason}{where}")
    errors = [(field_path(e.get("loc", ())), _message(e)) for e in raw]
    if not errors:
        errors = [("body", "invalid request")]
    detail = f"{errors[0][0]}: {errors[0][1]}"
    if len(errors) > 1:
        detail += f" (and {len(errors) - 1} more)"
    return Problem(422, "validation", "Invalid request", detail, errors)


async def _on_duetime_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, DuetimeError)
    found = error_problem(exc)
    if found is None:
        log.error("unmapped error on %s %s", request.method, request.url.path, exc_info=exc)
        return _internal_error(request)
    if isinstance(exc, ValidationError) and _driver_error(exc):
        log.debug("store refused input on %s %s: %s", request.method, request.url.path, exc)
    elif isinstance(exc, StoreUnavailable):
        # Counted and logged, not sent. Debug level: an outage would otherwise log once per
        # request.
        STORE_ERRORS.labels("api").inc()
        log.debug("store unavailable on %s %s: %s", request.method, request.url.path, exc.detail)
    return respond(request, found)


async def _on_request_validation(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    return respond(request, validation_problem(exc))


async def _on_http_exception(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    status = exc.status_code
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = "Error"
    detail = exc.detail if isinstance(exc.detail, str) else phrase
    slug = phrase.lower().replace(" ", "-").replace("'", "")
    headers = dict(exc.headers or {})
    allowed = getattr(request.app.state, "allowed_methods", None)
    if status == 405 and allowed is not None:
        # Every method the path has (Starlette lists only the first matching route's).
        headers["Allow"] = ", ".join(allowed(request.url.path))
    return problem(request, status, slug, phrase, detail, headers=headers)


async def _on_client_disconnect(request: Request, exc: Exception) -> Response:
    # The client went away before its request was read whole: nobody reads an answer, and the
    # event is the client's, not a fault here — one line, not a traceback.
    log.info(
        "client disconnected before sending the whole request: %s %s",
        request.method,
        request.url.path,
    )
    detail = "the connection closed before the request body was complete"
    return problem(request, 400, "client-disconnected", "Client disconnected", detail)


async def _on_unexpected(request: Request, exc: Exception) -> Response:
    # Starlette re-raises the exception after this response is sent, so the server logs it.
    return _internal_error(request)


def _internal_error(request: Request) -> Response:
    return problem(
        request,
        500,
        "internal",
        "Internal server error",
        "an unexpected error occurred; it has been logged",
    )


def install(app: FastAPI) -> None:
    """Make every error ``app`` raises a problem response."""
    app.add_exception_handler(DuetimeError, _on_duetime_error)
    app.add_exception_handler(RequestValidationError, _on_request_validation)
    app.add_exception_handler(StarletteHTTPException, _on_http_exception)
    app.add_exception_handler(ClientDisconnect, _on_client_disconnect)
    # Registered on Exception, Starlette answers from its outermost middleware and re-raises
    # afterwards so the server still logs the crash.
    app.add_exception_handler(Exception, _on_unexpected)


PROBLEM_SCHEMA_REF = "#/components/schemas/ProblemOut"


def problem_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` entries for the problems a route may answer with (the app adds the
    ``ProblemOut`` schema to the document's components)."""
    return {
        status: {
            "description": HTTPStatus(status).phrase,
            "content": {PROBLEM_MEDIA_TYPE: {"schema": {"$ref": PROBLEM_SCHEMA_REF}}},
        }
        for status in statuses
    }
