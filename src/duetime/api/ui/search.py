"""The task list's search fields, read from the query string into store filters: an id or a
unique id prefix, error text, and a payload path equality (``payload.customer_id = 42``).

Each reader returns None for an empty field and raises ``ValidationError`` naming the field for
anything it does not take, so a mistyped search is an error message, never an unfiltered list.

An id prefix needs no index of its own: ids sort as their hex digits do (in both stores), so
every id with the prefix lies just below :attr:`IdSearch.upper`, and the list's own cursor,
set there, walks them first (newest first); the first row without the prefix ends the matches.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import orjson

from duetime.errors import ValidationError
from duetime.types import PayloadMatch

MAX_ERROR_SEARCH_CHARS = 200
MAX_PAYLOAD_SEARCH_CHARS = 300
MAX_PAYLOAD_KEYS = 8
_HEX_DIGITS = 32
_ID = re.compile(r"[0-9a-fA-F-]{1,36}")
_PAYLOAD = re.compile(r"\s*payload((?:\.[^.=\s]*)+)\s*=(?!=)\s*(.*?)\s*", re.S)
_KEY = re.compile(r"(?=.{1,64}$)[A-Za-z0-9_-]*[A-Za-z_-][A-Za-z0-9_-]*")
_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")
PAYLOAD_FORM = "payload.<key>[.<key>…] = <value>, e.g. payload.customer_id = 42"


@dataclass(frozen=True, slots=True)
class IdSearch:
    """Tasks whose id starts with ``prefix`` (lowercase hex digits, dashes left out)."""

    prefix: str
    upper: str | None
    """The smallest id above every id with the prefix (None: there is none); the list walks
    down from it."""

    def matches(self, task_id: str) -> bool:
        return task_id.replace("-", "").startswith(self.prefix)

    def cursor(self, cursor: str | None) -> str | None:
        """The list's cursor: the page's own, but never above the prefix's ids."""
        if cursor is None or self.upper is None:
            return cursor or self.upper
        return min(cursor, self.upper)


def _as_id(value: int) -> str:
    digits = f"{value:032x}"
    return f"{digits[:8]}-{digits[8:12]}-{digits[12:16]}-{digits[16:20]}-{digits[20:]}"


def id_after(task_id: str) -> str | None:
    """The smallest id above ``task_id`` (None above the largest): a list cursor that keeps
    ``task_id`` itself in the walk."""
    above = int(task_id.replace("-", ""), 16) + 1
    return _as_id(above) if above < 1 << 128 else None


def id_search(raw: str) -> IdSearch | None:
    """A task id or the start of one (hex digits, dashes allowed where a UUID has them)."""
    text = raw.strip()
    if not text:
        return None
    digits = text.replace("-", "").lower()
    if not _ID.fullmatch(text) or not digits or len(digits) > _HEX_DIGITS:
        raise ValidationError(
            "an id is a task's UUID or its first hex digits (e.g. 0190c3a2)", field="id"
        )
    above = int(digits.ljust(_HEX_DIGITS, "f"), 16) + 1
    return IdSearch(digits, _as_id(above) if above < 1 << 128 else None)


def error_search(raw: str) -> str | None:
    """Text the task's last error contains (ignoring case)."""
    text = raw.strip()
    if not text:
        return None
    if len(text) > MAX_ERROR_SEARCH_CHARS or not text.isprintable():
        raise ValidationError(
            f"error text is at most {MAX_ERROR_SEARCH_CHARS} printable characters", field="error"
        )
    return text


def _value(text: str) -> object:
    """A JSON scalar (``42``, ``-1.5``, ``"quoted"``, ``true``, ``null``); any other text is
    taken as a string as it stands (``eu`` is ``"eu"``)."""
    if not text:
        raise ValidationError(f"nothing after '=': write {PAYLOAD_FORM}", field="payload")
    if text.startswith('"') or text in ("true", "false", "null") or _NUMBER.fullmatch(text):
        try:
            value = orjson.loads(text)
        except orjson.JSONDecodeError:
            value = ...
        if value is ... or isinstance(value, dict | list):
            raise ValidationError(
                f"{text!r} is not a JSON string, number, true, false or null", field="payload"
            )
        return value
    if text[0] in "[{":
        raise ValidationError(
            "a payload search compares one value (a string, number, true, false or null), not "
            "an array or object",
            field="payload",
        )
    if '"' in text or not text.isprintable():
        raise ValidationError(
            'a value with quotes is one JSON string: "like this"', field="payload"
        )
    return text


def payload_search(raw: str) -> PayloadMatch | None:
    """``payload.<key>[.<key>…] = <value>``: the payload's value at that path of object keys
    equals ``value`` (see :func:`_value`). Nothing else is taken: no other operator, no array
    positions, at most :data:`MAX_PAYLOAD_KEYS` keys."""
    if not raw.strip():
        return None
    if len(raw) > MAX_PAYLOAD_SEARCH_CHARS:
        raise ValidationError(
            f"a payload search is at most {MAX_PAYLOAD_SEARCH_CHARS} characters", field="payload"
        )
    found = _PAYLOAD.fullmatch(raw)
    if found is None:
        raise ValidationError(f"write {PAYLOAD_FORM}", field="payload")
    keys = tuple(found.group(1).split(".")[1:])
    if len(keys) > MAX_PAYLOAD_KEYS:
        raise ValidationError(
            f"a payload path has at most {MAX_PAYLOAD_KEYS} keys", field="payload"
        )
    for key in keys:
        if not _KEY.fullmatch(key):
            raise ValidationError(
                f"payload key {key!r}: 1-64 of A-Z a-z 0-9 _ -, not all digits (array positions "
                "are not searched)",
                field="payload",
            )
    value = _value(found.group(2))
    return PayloadMatch(keys=keys, value_json=orjson.dumps(value).decode())
