"""The one place where errors become HTTP: RFC 9457 ``application/problem+json`` responses.

=====================================  ======  ====================================
raised                                 status  notes
=====================================  ======  ====================================
:class:`PayloadTooLarge`               413     names the field (``payload``)
:class:`RequestTooLarge`               413     the whole body is over the server's cap
``errors.ValidationError``             422     ``field`` + ``errors`` list
FastAPI ``RequestValidationError``     422     field path such as ``tasks.3.target.url``
malformed JSON body                    400
``errors.Unauthorized``                401     ``WWW-Authenticate: Bearer``
``errors.NotFound``                    404     also another tenant's resource
``errors.Conflict`` / ``StaleLease``   409
``errors.TooManyRequests``             429     names the ``limit``; ``Retry-After``
``errors.StoreFull``                   507     out of disk space; ``Retry-After``
``errors.StoreUnavailable``            503     ``Retry-After``; no internals in the body
Starlette ``HTTPException``            its own (unknown route 404, wrong method 405, ...)
anything else                          500     the server logs it; the body says nothing internal
=====================================  ======  ====================================

Every problem carries ``type`` (a stable ``urn:duetime:problem:<slug>``), ``title``, ``status``,
``detail`` and ``instance`` (the request path).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from http import HTTPStatus
from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response

from duetime.errors import (
    Conflict,
    DuetimeError,
    Forbidden,
    NotFound,
    StaleLease,
    StoreFull,
    StoreUnavailable,
    TooManyRequests,
    Unauthorized,
    ValidationError,
)
from duetime.metrics import STORE_ERRORS

log = logging.getLogger(__name__)

PROBLEM_MEDIA_TYPE = "application/problem+json"
RETRY_AFTER_SECONDS = 2
"""What a 503 asks clients to wait: a store outage is usually a fail-over or a restart."""

_BODY_LOC = frozenset({"body", "query", "path", "header", "cookie"})
_TARGET_TAGS = frozenset({"http", "amqp", "nats", "redis", "worker"})


class PayloadTooLarge(ValidationError):
    """A task's encoded payload is over ``Settings.max_payload_bytes`` (413, naming the field)."""


class RequestTooLarge(DuetimeError):
    """The request body is over the server's cap (413)."""


# Most specific first: the first class an exception is an instance of decides.
_MAPPING: Sequence[tuple[type[DuetimeError], int, str, str]] = (
    (PayloadTooLarge, 413, "payload-too-large", "Payload too large"),
    (RequestTooLarge, 413, "request-too-large", "Request too large"),
    (ValidationError, 422, "validation", "Invalid request"),
    (Unauthorized, 401, "unauthorized", "Unauthorized"),
    (Forbidden, 403, "forbidden", "Forbidden"),
    (NotFound, 404, "not-found", "Not found"),
    (StaleLease, 409, "stale-lease", "Lease is no longer current"),
    (Conflict, 409, "conflict", "Conflict"),
    (TooManyRequests, 429, "too-many-requests", "Too many requests"),
    (StoreFull, 507, "store-full", "Store out of space"),
    (StoreUnavailable, 503, "store-unavailable", "Store unavailable"),
)


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
    """A problem response. ``errors`` are (field, detail) pairs; the first names ``field``;
    ``extra`` adds members (RFC 9457 extensions such as ``limit``)."""
    body: dict[str, Any] = {
        "type": f"urn:duetime:problem:{slug}",
        "title": title,
        "status": status,
        "detail": detail,
        "instance": request.url.path,
    }
    if errors:
        body["field"] = errors[0][0]
        body["errors"] = [{"field": field, "detail": text} for field, text in errors]
    if extra:
        body.update(extra)
    return Response(
        orjson.dumps(body), status_code=status, headers=headers, media_type=PROBLEM_MEDIA_TYPE
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
        parts.append(str(item))
    return ".".join(parts) or "body"


def _message(error: Mapping[str, Any]) -> str:
    kind = error.get("type")
    if kind == "extra_forbidden":
        return "unknown field"
    if kind == "missing":
        return "required"
    return str(error.get("msg", "invalid"))


async def _on_duetime_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, DuetimeError)
    match = next((m for m in _MAPPING if isinstance(exc, m[0])), None)
    if match is None:  # a DuetimeError no route should let out, e.g. ConfigError
        log.error("unmapped error on %s %s", request.method, request.url.path, exc_info=exc)
        return _internal_error(request)
    _, status, slug, title = match
    headers: dict[str, str] = {}
    extra: dict[str, Any] = {}
    detail = exc.detail
    errors: list[tuple[str, str]] = []
    if isinstance(exc, ValidationError):
        field = exc.field or "body"
        errors.append((field, exc.detail))
        if exc.field and not exc.detail.startswith(exc.field):
            detail = f"{exc.field}: {exc.detail}"
    elif isinstance(exc, Unauthorized):
        headers["WWW-Authenticate"] = "Bearer"
    elif isinstance(exc, TooManyRequests):
        headers["Retry-After"] = str(max(1, math.ceil(exc.retry_after or 1)))
        extra["limit"] = exc.limit
    elif isinstance(exc, StoreUnavailable):
        # The store's own message may name hosts or drivers: count and log it, do not send it.
        # Debug level: an outage would otherwise log once per request.
        STORE_ERRORS.labels("api").inc()
        log.debug("store unavailable on %s %s: %s", request.method, request.url.path, exc.detail)
        headers["Retry-After"] = str(RETRY_AFTER_SECONDS)
        detail = "the store cannot be reached right now; accepted work is safe, retry later"
        if isinstance(exc, StoreFull):
            detail = (
                "the store has no disk space left and takes no new work until space is freed; "
                "accepted work is safe, retry later"
            )
    return problem(
        request, status, slug, title, detail, errors=errors, headers=headers, extra=extra
    )


async def _on_request_validation(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    raw = list(exc.errors())
    for error in raw:
        if error.get("type") == "json_invalid":
            reason = (error.get("ctx") or {}).get("error", "invalid JSON")
            loc = error.get("loc", ())
            where = f" at position {loc[1]}" if len(loc) > 1 else ""
            return problem(request, 400, "malformed-json", "Malformed JSON", f"{reason}{where}")
    errors = [(field_path(e.get("loc", ())), _message(e)) for e in raw]
    if not errors:
        errors = [("body", "invalid request")]
    detail = f"{errors[0][0]}: {errors[0][1]}"
    if len(errors) > 1:
        detail += f" (and {len(errors) - 1} more)"
    return problem(request, 422, "validation", "Invalid request", detail, errors=errors)


async def _on_http_exception(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    status = exc.status_code
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = "Error"
    detail = exc.detail if isinstance(exc.detail, str) else phrase
    slug = phrase.lower().replace(" ", "-").replace("'", "")
    return problem(request, status, slug, phrase, detail, headers=exc.headers)


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
