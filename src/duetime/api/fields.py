"""Field types and validators shared by the API's request models, and their base
(:class:`StrictModel`): date-times within the supported range, text without control characters,
JSON without non-finite numbers, webhook headers. Each raises a pydantic error, so a bad value
is a 422 naming its field.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
    WithJsonSchema,
)
from pydantic_core import CoreSchema, PydanticCustomError, core_schema

from duetime.delivery.headers import is_reserved_header
from duetime.ids import uuid_text
from duetime.text import is_clean

EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
LATEST = datetime(9000, 1, 1, tzinfo=UTC)
DATE_RANGE = "must be from 1970-01-01T00:00:00Z up to (not including) 9000-01-01"
"""Every date-time the API accepts lies in ``[EARLIEST, LATEST)``: far enough from the ends of
Python's, SQLite's and PostgreSQL's ranges that arithmetic on it (delays, retries, schedule
steps) cannot overflow."""
_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})")
NO_CONTROL = r"^[^\x00-\x1f\x7f-\x9f]+$"
NO_CONTROL_OR_EMPTY = r"^[^\x00-\x1f\x7f-\x9f]*$"
HEADER_NAME = r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,256}"
"""A header name (an RFC 9110 token), unanchored."""
HEADER_VALUE = r"^[^\x00-\x08\x0a-\x1f\x7f-\x9f]*$"
"""A header value: no control character but tab (RFC 9110 field-vchar)."""
_HEADER_NAME = re.compile(HEADER_NAME)


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
    if isinstance(value, datetime):
        return _in_range(value)
    return _parsed_text(str(value))


@functools.lru_cache(maxsize=4096)
def _parsed_text(value: str) -> datetime:
    """An RFC 3339 text's instant (cached: a batch's tasks mostly share their ``run_at``, and
    the datetime is immutable)."""
    return _in_range(value)


def _in_range(value: datetime | str) -> datetime:
    try:
        if isinstance(value, datetime):
            parsed = value.astimezone(UTC)
        else:
            parsed = datetime.fromisoformat(value.upper()).astimezone(UTC)
    except (ValueError, OverflowError) as exc:
        raise PydanticCustomError(
            "rfc3339", "not a valid date-time: {error}", {"error": str(exc)}
        ) from None
    if not EARLIEST <= parsed < LATEST:
        raise PydanticCustomError("date_range", DATE_RANGE)
    return parsed


def canonical_uuid(value: str) -> str:
    """``value`` as a canonical UUID string; a pydantic error when it is not one."""
    canonical = uuid_text(value)
    if canonical is None:
        raise PydanticCustomError("uuid", "must be a task id (a UUID)")
    return canonical


_VISIBLE = r"[^\s\x00-\x1f\x7f-\x9f"
_URL_REST = (
    rf"://({_VISIBLE}/?#@]*@)?({_VISIBLE}/?#@:\[\]]+|\[[0-9A-Fa-f:.]+\])(:[0-9]{{1,5}})?"
    rf"([/?#]{_VISIBLE}]*)?$"
)


@functools.cache
def url_pattern(schemes: tuple[str, ...]) -> str:
    """The regular expression (Python's and JSON Schema's alike) of an absolute URL with one of
    ``schemes`` (any case), a host, an optional port, and no space or control character: what
    :func:`url_has_scheme` accepts, written into the OpenAPI document."""
    spelled = (
        "".join(f"[{c.upper()}{c.lower()}]" if c.isalpha() else c for c in s) for s in schemes
    )
    return f"^({'|'.join(spelled)}){_URL_REST}"


@functools.cache
def _url_regex(schemes: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile(url_pattern(schemes))


BRACKETED_HOST = "the host in brackets is not an IPv6 address"


@functools.lru_cache(maxsize=4096)
def url_has_scheme(value: str, schemes: tuple[str, ...]) -> bool:
    """Whether ``value`` is an absolute URL with one of ``schemes`` and a host (see
    :func:`url_pattern`); ``ValueError`` (:data:`BRACKETED_HOST`) for a host in brackets that
    is no IPv6 address. Cached: a batch's tasks mostly share their URL."""
    if _url_regex(schemes).match(value) is None:
        return False
    try:
        return bool(urlsplit(value).hostname)
    except ValueError:
        raise ValueError(BRACKETED_HOST) from None


def url_credential(value: object) -> bool:
    """Whether ``value`` is a URL with user info (a user name, with or without a password)."""
    if not isinstance(value, str) or "@" not in value:
        return False
    try:
        parts = urlsplit(value)
    except ValueError:
        return False
    return parts.username is not None or parts.password is not None


def url_checker(*schemes: str) -> AfterValidator:
    """A validator accepting absolute URLs with one of ``schemes`` and a host (document it with
    ``Field(json_schema_extra={"pattern": url_pattern(schemes)})``)."""

    def check(value: str) -> str:
        try:
            fits = url_has_scheme(value, schemes)
        except ValueError:
            raise PydanticCustomError("url_host", BRACKETED_HOST) from None
        if not fits:
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


def rules(*refusals: tuple[str, str]) -> dict[str, Any]:
    """A schema's ``x-rules``: what a request must also hold that JSON Schema cannot say (one
    field against another, a grammar, a range of instants). Each is a (field, detail) pair: the
    field a refusal names — its last part, or the part after a list's name (``nodes.target``
    for ``nodes.3.target``; ``*``: the field the schema is of) — and the words its ``detail``
    starts with (``""``: any refusal of that field, whose rule its description gives)."""
    return {"x-rules": [{"field": field, "detail": detail} for field, detail in refusals]}


Rfc3339 = Annotated[
    datetime,
    BeforeValidator(parse_rfc3339),
    WithJsonSchema(
        {
            "type": "string",
            "format": "date-time",
            "example": "2026-12-01T15:00:00Z",
            "description": f"RFC 3339 with an offset; {DATE_RANGE}.",
            **rules(("*", DATE_RANGE)),
        }
    ),
]
"""An aware UTC datetime parsed from an RFC 3339 string with an offset."""


def whole_number(value: Any) -> Any:
    """A float with no fractional part (``240.0``) as the integer it is: JSON (and its schema's
    ``integer``) does not tell them apart, so neither does an integer field. Anything else is
    left to the field's own (strict) check."""
    if type(value) is float and value.is_integer():
        return int(value)
    return value


Whole = BeforeValidator(whole_number)
"""Put on every integer field of a request body (see :func:`whole_number`)."""


def patch_schema(
    *not_null: str, refusals: Sequence[tuple[str, str]] = ()
) -> Callable[[dict[str, Any]], None]:
    """A PATCH body model's ``json_schema_extra``: the document says what the route checks — at
    least one field (``minProperties``), the fields ``not_null`` optional but not nullable
    (left out means "keep", null is refused), and the model's ``refusals`` (its :func:`rules`).
    Their type stays ``X | None`` in Python, where None is what "left out" looks like."""
    documented = rules(*refusals) if refusals else {}

    def edit(schema: dict[str, Any]) -> None:
        schema["minProperties"] = 1
        schema.update(documented)
        for name in not_null:
            field = schema["properties"][name]
            kept = [s for s in field.pop("anyOf", []) if s != {"type": "null"}]
            if len(kept) == 1:
                field.update(kept[0])
            elif kept:
                field["anyOf"] = kept
            field.pop("default", None)

    return edit


"""Put on every integer field of a request body (see :func:`whole_number`)."""


class _CleanText:
    """:func:`clean_text` after a text field's own checks; in the document, the pattern that
    says it (unless the field has a stricter one)."""

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> CoreSchema:
        return core_schema.no_info_after_validator_function(clean_text, handler(source))

    def __get_pydantic_json_schema__(
        self, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> dict[str, Any]:
        found: dict[str, Any] = handler(schema)
        if found.get("type") == "string":
            found.setdefault("pattern", NO_CONTROL_OR_EMPTY)
        return found


CleanText = _CleanText()
"""Refuses control characters and lone surrogates in a text field (a 422 naming it)."""
HEADERS_DOC = {
    "propertyNames": {"pattern": f"^{HEADER_NAME}$"},
    "additionalProperties": {"type": "string", "maxLength": 8192, "pattern": HEADER_VALUE},
    **rules(("*", "header ")),  # a name duetime sets itself (docs/api.md)
}
"""The document of a target's ``headers`` (what :func:`check_headers` takes)."""
JsonAny = Annotated[
    Any,
    Field(
        json_schema_extra=rules(
            ("*", "must not contain NaN or infinite numbers"),
            ("*", "must not contain integers beyond 64 bits"),
        )
    ),
    AfterValidator(finite_json),
]
"""Any JSON value without NaN or infinities, and integers within 64 bits."""


class StrictModel(BaseModel):
    """Base of every request body: unknown fields and type coercion are refused."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)
