"""Field types and validators shared by the API's request models: date-times within the
supported range, text without control characters, JSON without non-finite numbers, webhook
headers. Each raises a pydantic error, so a bad value is a 422 naming its field.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime
from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import AfterValidator, BeforeValidator, WithJsonSchema
from pydantic_core import PydanticCustomError

from duetime.delivery.headers import is_reserved_header
from duetime.ids import uuid_text
from duetime.text import is_clean

EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
LATEST = datetime(9000, 1, 1, tzinfo=UTC)
"""Every date-time the API accepts lies in ``[EARLIEST, LATEST)``: far enough from the ends of
Python's, SQLite's and PostgreSQL's ranges that arithmetic on it (delays, retries, schedule
steps) cannot overflow."""
_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})")
NO_CONTROL = r"^[^\x00-\x1f\x7f-\x9f]+$"
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,256}")


def parse_rfc3339(value: object) -> datetime:
    """An RFC 3339 date-time *with* an offset (``Z`` or ``±hh:mm``), as an aware UTC datetime.

    Raises a pydantic error for anything else — notably a naive time, whose zone would be a guess
    — and for an instant outside ``[EARLIEST, LATEST)``.
    """
    aware = isinstance(value, datetime) and value.tzinfo is not None
    if not aware and (not isinstance(value, str) or not _RFC3339.fullmatch(value)):
        raise PydanticCustomError(
            "rfc3339",
            "must be an RFC 3339 date-time with an offset, e.g. 2026-12-01T15:00:00Z",
        )
    try:
        if isinstance(value, datetime):
            parsed = value.astimezone(UTC)
        else:
            parsed = datetime.fromisoformat(str(value).upper()).astimezone(UTC)
    except (ValueError, OverflowError) as exc:
        raise PydanticCustomError(
            "rfc3339", "not a valid date-time: {error}", {"error": str(exc)}
        ) from None
    if not EARLIEST <= parsed < LATEST:
        raise PydanticCustomError(
            "date_range", "must be from 1970-01-01T00:00:00Z up to (not including) 9000-01-01"
        )
    return parsed


def canonical_uuid(value: str) -> str:
    """``value`` as a canonical UUID string; a pydantic error when it is not one."""
    canonical = uuid_text(value)
    if canonical is None:
        raise PydanticCustomError("uuid", "must be a task id (a UUID)")
    return canonical


def url_has_scheme(value: str, schemes: tuple[str, ...]) -> bool:
    """Whether ``value`` is an absolute URL with one of ``schemes`` and a host."""
    parts = urlsplit(value)
    return parts.scheme.lower() in schemes and bool(parts.hostname)


def url_checker(*schemes: str) -> AfterValidator:
    """A validator accepting absolute URLs with one of ``schemes`` and a host."""

    def check(value: str) -> str:
        if not url_has_scheme(value, schemes):
            raise PydanticCustomError(
                "url_scheme",
                "must be an absolute URL with scheme {schemes}",
                {"schemes": " or ".join(schemes)},
            )
        return value

    return AfterValidator(check)


def check_headers(headers: dict[str, str]) -> dict[str, str]:
    """Headers a target may set: valid names, none that
    :func:`~duetime.delivery.headers.is_reserved_header` reserves, clean values."""
    for name, value in headers.items():
        if not _HEADER_NAME.fullmatch(name):
            raise PydanticCustomError(
                "header_name", "{name} is not a valid header name", {"name": name}
            )
        if is_reserved_header(name):
            raise PydanticCustomError(
                "header_reserved", "header {name} is set by duetime itself", {"name": name}
            )
        # Tab is the one control character a header value may hold (RFC 9110 field-vchar).
        if not is_clean(value.replace("\t", " ")):
            raise PydanticCustomError(
                "header_value",
                "header {name} has a control character or lone surrogate in its value",
                {"name": name},
            )
    return headers


_INT_MIN, _INT_MAX = -(2**63), 2**64 - 1


def clean_text(value: str) -> str:
    """Refuse control characters and lone surrogates (the rule of :func:`duetime.text.check`)."""
    if not is_clean(value):
        raise PydanticCustomError(
            "control_characters", "must not contain control characters or lone surrogates"
        )
    return value


def finite_json(value: Any) -> Any:
    """Refuse ``NaN`` and infinities (``1e400`` parses as one) anywhere in a JSON value: JSON
    cannot hold them, and storing them would silently turn them into ``null``. Integers must fit
    in 64 bits (what the JSON encoder, and most receivers, can represent)."""
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is float:
            if not math.isfinite(item):
                raise PydanticCustomError(
                    "finite_number", "must not contain NaN or infinite numbers"
                )
        elif kind is int:
            if not _INT_MIN <= item <= _INT_MAX:
                raise PydanticCustomError("int_range", "must not contain integers beyond 64 bits")
        elif kind is dict:
            stack.extend(item.values())
        elif kind is list:
            stack.extend(item)
    return value


Rfc3339 = Annotated[
    datetime,
    BeforeValidator(parse_rfc3339),
    WithJsonSchema({"type": "string", "format": "date-time", "example": "2026-12-01T15:00:00Z"}),
]
"""An aware UTC datetime parsed from an RFC 3339 string with an offset."""

CleanText = AfterValidator(clean_text)
"""Refuses control characters and lone surrogates in a text field (a 422 naming it)."""
JsonAny = Annotated[Any, AfterValidator(finite_json)]
"""Any JSON value without NaN or infinities, and integers within 64 bits."""
