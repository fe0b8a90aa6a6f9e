"""Typed errors the SDK raises, built from RFC 9457 ``application/problem+json`` responses.

Each API error also subclasses the matching class of :mod:`duetime.errors`, so code written
against duetime's own exception tree works unchanged over HTTP::

    DuetimeError
     ├── ApiError                  any non-2xx response (status, title, detail, field, errors)
     │    ├── ApiValidationError   400, 413, 422   (also a duetime.errors.ValidationError)
     │    ├── ApiUnauthorized      401, 403        (also a duetime.errors.Unauthorized)
     │    ├── ApiNotFound          404             (also a duetime.errors.NotFound)
     │    ├── ApiConflict          409             (also a duetime.errors.Conflict)
     │    │    └── ApiStaleLease   409 for a lost lease (also a duetime.errors.StaleLease)
     │    ├── ApiTooManyRequests   429, over a limit, with retry_after (also a
     │    │                        duetime.errors.TooManyRequests)
     │    └── ApiUnavailable       503 (and 507, store out of space), with retry_after (also a
     │                             duetime.errors.StoreUnavailable)
     └── TransportError            the server could not be reached or did not answer in time

``except duetime.errors.NotFound`` therefore catches a 404 from the API as well as the store's
own ``NotFound``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from email.utils import parsedate_to_datetime
from typing import Any

from duetime import errors
from duetime.clock import SystemClock

__all__ = [
    "ApiConflict",
    "ApiError",
    "ApiNotFound",
    "ApiStaleLease",
    "ApiTooManyRequests",
    "ApiUnauthorized",
    "ApiUnavailable",
    "ApiValidationError",
    "TransportError",
    "error_from_response",
]


class ApiError(errors.DuetimeError):
    """A non-2xx answer from the duetime API.

    ``status`` is the HTTP status; ``title``, ``detail``, ``type`` and ``instance`` come from the
    problem document (or the HTTP reason phrase when the body is not a problem). ``field`` names
    the offending input for validation errors (a dotted path such as ``target.url``) and
    ``errors`` lists every field problem when the server reported several. ``problem`` is the
    whole parsed body.
    """

    def __init__(
        self,
        status: int,
        title: str,
        detail: str = "",
        *,
        field: str | None = None,
        errors: Sequence[Mapping[str, Any]] = (),
        type: str = "about:blank",
        instance: str | None = None,
        problem: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(detail or title)
        self.status = status
        self.title = title
        self.detail = detail
        self.field = field
        self.errors = tuple(errors)
        self.type = type
        self.instance = instance
        self.problem: Mapping[str, Any] = problem or {}

    def __str__(self) -> str:
        text = f"{self.status} {self.title}"
        if self.detail and self.detail != self.title:
            text += f": {self.detail}"
        if self.field:
            text += f" (field: {self.field})"
        return text


class ApiValidationError(ApiError, errors.ValidationError):
    """The request was rejected as invalid (400, 413, 422); ``field`` says where."""


class ApiUnauthorized(ApiError, errors.Unauthorized):
    """The API key (or admin token) is missing, unknown or not allowed to make this call."""


class ApiNotFound(ApiError, errors.NotFound):
    """No such resource for this tenant (another tenant's resource is a 404 too)."""


class ApiConflict(ApiError, errors.Conflict):
    """The resource's state forbids the call (e.g. cancelling a finished task); nothing changed."""


class ApiStaleLease(ApiConflict, errors.StaleLease):
    """The lease was lost (expired, reclaimed or already acked); the call changed nothing."""


class ApiUnavailable(ApiError, errors.StoreUnavailable):
    """The server cannot serve right now (503, or 507: its store is out of space).
    ``retry_after`` is the server's hint in seconds, or None when it gave none."""

    retry_after: float | None = None


class ApiTooManyRequests(ApiError, errors.TooManyRequests):
    """Over a limit (429); nothing was done. ``limit`` names it (from the problem) and
    ``retry_after`` is the server's hint in seconds, or None."""

    retry_after: float | None = None
    limit: str = ""


class TransportError(errors.DuetimeError):
    """No HTTP answer: connection refused, DNS failure, timeout, broken connection.

    A create that raised this may or may not have reached the server: repeat it with the same
    ``idempotency_key`` to be sure nothing is created twice.
    """


_BY_STATUS: dict[int, type[ApiError]] = {
    400: ApiValidationError,
    401: ApiUnauthorized,
    403: ApiUnauthorized,
    404: ApiNotFound,
    409: ApiConflict,
    413: ApiValidationError,
    422: ApiValidationError,
    429: ApiTooManyRequests,
    503: ApiUnavailable,
    507: ApiUnavailable,
}


def _retry_after_seconds(value: str | None) -> float | None:
    """``Retry-After`` as seconds: delta-seconds, or an HTTP date (a past date gives 0)."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
        return max(0.0, (when - SystemClock().now()).total_seconds())
    except (TypeError, ValueError):
        return None


def _fastapi_errors(items: Sequence[Any]) -> list[dict[str, Any]]:
    """Normalise FastAPI's ``{"detail": [{"loc", "msg", "type"}]}`` into problem ``errors``."""
    out: list[dict[str, Any]] = []
    for item in items:
        if not isinstance(item, Mapping):
            continue
        loc = [str(p) for p in item.get("loc", ()) if p not in ("body", "query", "path")]
        out.append({"field": ".".join(loc) or None, "detail": str(item.get("msg", ""))})
    return out


def error_from_response(
    status: int,
    reason: str,
    body: Any,
    headers: Mapping[str, str] | None = None,
) -> ApiError:
    """Build the typed error for a non-2xx response.

    ``body`` is the decoded JSON body (a problem document, ideally) or None/text when the body was
    not JSON. Never raises: a body of an unexpected shape still yields an :class:`ApiError` with
    the status and reason phrase.
    """
    problem: Mapping[str, Any] = body if isinstance(body, Mapping) else {}
    title = str(problem.get("title") or reason or f"HTTP {status}")
    raw_detail = problem.get("detail")
    field_errors: list[dict[str, Any]] = []
    if isinstance(raw_detail, list):  # FastAPI's own validation shape
        field_errors = _fastapi_errors(raw_detail)
        raw_detail = "; ".join(
            f"{e['field']}: {e['detail']}" if e["field"] else e["detail"] for e in field_errors
        )
    elif isinstance(problem.get("errors"), list):
        field_errors = [dict(e) for e in problem["errors"] if isinstance(e, Mapping)]
    detail = "" if raw_detail is None else str(raw_detail)
    if not detail and isinstance(body, str):
        detail = body.strip()[:500]
    field = problem.get("field")
    if field is None and field_errors:
        field = field_errors[0].get("field")
    ptype = str(problem.get("type") or "about:blank")
    cls = _BY_STATUS.get(status, ApiError)
    if cls is ApiConflict and ptype.endswith(("stale-lease", "stale_lease")):
        cls = ApiStaleLease
    error = cls(
        status,
        title,
        detail,
        field=None if field is None else str(field),
        errors=field_errors,
        type=ptype,
        instance=problem.get("instance"),
        problem=problem,
    )
    if isinstance(error, ApiUnavailable | ApiTooManyRequests):
        error.retry_after = _retry_after_seconds((headers or {}).get("retry-after"))
    if isinstance(error, ApiTooManyRequests):
        error.limit = str(problem.get("limit") or "")
    return error
