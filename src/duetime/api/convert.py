"""Query and path parameters, cursors and PATCH bodies → :mod:`duetime.types` values (task
specs become tasks in :mod:`duetime.lifecycle.create`).

Errors are :class:`duetime.errors.ValidationError` naming the field by its dotted path;
:mod:`duetime.api.problems` turns them into 422 (413 for a payload over the size limit).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from pydantic_core import PydanticCustomError

from duetime.api.fields import parse_rfc3339
from duetime.api.schemas import TaskPatchIn
from duetime.errors import BadCursor, ValidationError
from duetime.ids import ID_PREFIX_MIN_DIGITS, id_prefix_range, is_uuid, uuid_text
from duetime.lifecycle.create import TaskBuilder
from duetime.text import check
from duetime.types import TaskFilter, TaskPatch, TaskStatus, Tick, TickOutcome

MAX_FILTER_CHARS = 1024
"""A text filter longer than this cannot match anything stored (names, queues, labels are
shorter) and is refused instead of being sent to the store."""

_H = "[0-9A-Fa-f]"
ID_PREFIX = {
    "pattern": rf"^ *({_H}{{4,32}}|{_H}{{8}}-({_H}{{0,4}}|{_H}{{4}}-({_H}{{0,4}}|{_H}{{4}}-"
    rf"({_H}{{0,4}}|{_H}{{4}}-{_H}{{0,12}})))) *$"
}
"""The OpenAPI ``json_schema_extra`` of ``id_prefix``: what :func:`duetime.ids.id_prefix_range`
takes (4 to 32 hex digits, or dashed where an id has its dashes; spaces around them, but no
other blank, which is a control character)."""
LABEL_FILTER = {
    "items": {"type": "string", "pattern": r"^[^:\x00-\x1f\x7f-\x9f]+:[^\x00-\x1f\x7f-\x9f]*$"}
}
"""The OpenAPI ``json_schema_extra`` of a ``label`` query parameter: ``key:value`` items."""


def word_list(words: Sequence[str]) -> dict[str, Any]:
    """The OpenAPI ``json_schema_extra`` of a repeatable query parameter whose items are comma
    lists of ``words`` (blanks around them and empty items allowed), as the routes read them."""
    word = "(?:" + "|".join(words) + ")"
    pattern = rf"^\s*(?:{word}\s*)?(?:,\s*(?:{word}\s*)?)*$"
    return {"items": {"type": "string", "pattern": pattern}}


# In a query string an unescaped "+" arrives as a space: "...T15:00:00 01:00" meant "+01:00".
_SPACE_OFFSET = re.compile(r"^(.*\d) (\d{2}:\d{2})$")


def task_patch(builder: TaskBuilder, body: TaskPatchIn) -> TaskPatch:
    """The changes a PATCH asks for (the payload bounded as on create); an empty body is
    refused."""
    given = body.model_fields_set
    if not given:
        raise ValidationError("give at least one of run_at, payload, priority, labels")
    return TaskPatch(
        run_at=body.run_at,
        payload_json=builder.payload_json(body.payload, "payload") if "payload" in given else None,
        priority=body.priority,
        labels=body.labels,
    )


def encode_cursor(task_id: str) -> str:
    """The opaque cursor that continues a listing after ``task_id``."""
    return base64.urlsafe_b64encode(task_id.encode()).rstrip(b"=").decode()


def decode_cursor(cursor: str) -> str:
    """The task id inside a cursor made by :func:`encode_cursor`."""
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        text = ""
    if not is_uuid(text):
        raise BadCursor()
    return text


def query_time(value: str | None, field: str) -> datetime | None:
    """An RFC 3339 query parameter (tolerating ``+`` decoded to a space before the offset);
    None when it is left out or empty."""
    if not value:  # left out, or given empty (as a form leaves it): no bound
        return None
    check(value, field, max_length=MAX_FILTER_CHARS)
    match = _SPACE_OFFSET.match(value)
    if match:
        value = f"{match.group(1)}+{match.group(2)}"
    try:
        return parse_rfc3339(value)
    except PydanticCustomError as exc:
        raise ValidationError(exc.message(), field=field) from None


def text_filter(value: str | None, field: str) -> str | None:
    """A text query parameter, refused (422 naming ``field``) when it holds a control character
    or a lone surrogate, or is too long to match anything."""
    return None if value is None else check(value, field, max_length=MAX_FILTER_CHARS)


def path_text(raw: str, field: str) -> str:
    """A path segment naming a resource, refused (422 naming ``field``) when it holds a control
    character or a lone surrogate, or is too long to name anything."""
    return check(raw, field, max_length=MAX_FILTER_CHARS)


def path_id(raw: str, field: str) -> str | None:
    """The canonical form of a UUID path id; None when it is not one (the caller's 404). A
    control character or lone surrogate is a 422 naming ``field``."""
    check(raw, field, max_length=MAX_FILTER_CHARS)
    return uuid_text(raw)


def task_filter(
    tenant_id: str,
    *,
    status: Sequence[str],
    queue: str | None,
    name: str | None,
    schedule_id: str | None,
    label: Sequence[str],
    run_after: str | None,
    run_before: str | None,
    limit: int,
    cursor: str | None,
    id_prefix: str | None = None,
) -> TaskFilter:
    """The store query for ``GET /v1/tasks``. ``status`` items may be comma lists; ``label`` items
    read ``key:value``; ``id_prefix`` is the start of an id (at least 4 hex digits, dashes where
    the id has them)."""
    statuses: list[TaskStatus] = []
    for item in status:
        for word in item.split(","):
            word = word.strip()
            if not word:
                continue
            try:
                statuses.append(TaskStatus(word))
            except ValueError:
                choices = ", ".join(s.value for s in TaskStatus)
                detail = f"unknown status {word!r}; one of {choices}"
                raise ValidationError(detail, field="status") from None
    labels: dict[str, str] = {}
    for item in label:
        check(item, "label", max_length=MAX_FILTER_CHARS)
        key, sep, value = item.partition(":")
        if not sep or not key:
            raise ValidationError(f"{item!r} is not key:value", field="label")
        labels[key] = value
    return TaskFilter(
        tenant_id=tenant_id,
        statuses=tuple(dict.fromkeys(statuses)),
        queue=text_filter(queue, "queue"),
        name=text_filter(name, "name"),
        schedule_id=text_filter(schedule_id, "schedule_id"),
        labels=labels,
        run_after=query_time(run_after, "run_after"),
        run_before=query_time(run_before, "run_before"),
        limit=limit,
        cursor=decode_cursor(cursor) if cursor else None,
        id_prefix=_id_prefix(id_prefix),
    )


def _id_prefix(value: str | None) -> str | None:
    if value is None:
        return None
    check(value, "id_prefix", max_length=MAX_FILTER_CHARS)
    if id_prefix_range(value) is None:
        raise ValidationError(
            f"{value!r} is not the start of an id: give at least {ID_PREFIX_MIN_DIGITS} hex "
            "digits, with dashes only where the id has them",
            field="id_prefix",
        )
    return value.strip().lower()


# -- the cursors of schedule lists, ticks and revisions ------------------------------------


def encode(text: str) -> str:
    """An opaque cursor."""
    return base64.urlsafe_b64encode(text.encode()).rstrip(b"=").decode()


def decode(cursor: str) -> str:
    """The text inside a cursor made by :func:`encode`; ``ValidationError`` (field ``cursor``)
    for anything else."""
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        text = base64.b64decode(padded, altchars=b"-_", validate=True).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        text = ""
    if not text:
        raise BadCursor()
    return text


def decode_schedule_cursor(cursor: str) -> str:
    text = decode(cursor)
    if not is_uuid(text):
        raise BadCursor()
    return text


def tick_cursor(t: Tick) -> str:
    micros = int(t.nominal.timestamp()) * 1_000_000 + t.nominal.microsecond
    return encode(f"{micros}:{t.outcome.value}")


def decode_tick_cursor(cursor: str) -> tuple[datetime, str]:
    """``(nominal, outcome)`` of a cursor :func:`tick_cursor` made; ``ValidationError`` (field
    ``cursor``) for anything else: ASCII digits of an instant the API can hold, and an
    outcome."""
    micros, _, outcome = decode(cursor).partition(":")
    try:
        TickOutcome(outcome)
        seconds, rest = divmod(_whole(micros), 1_000_000)
        at = datetime.fromtimestamp(seconds, UTC).replace(microsecond=rest)
    except (ValueError, OverflowError, OSError):
        raise BadCursor() from None
    return at, outcome


def decode_revision_cursor(cursor: str) -> int:
    """The revision id of a cursor made from one; ``ValidationError`` (field ``cursor``) for
    anything else."""
    try:
        return _whole(decode(cursor))
    except ValueError:
        raise BadCursor() from None


_WHOLE = re.compile(r"[0-9]{1,19}")
_INT64_MAX = 2**63 - 1


def _whole(text: str) -> int:
    """``text`` as a number of ASCII digits within a 64-bit integer (what both stores hold), or
    ``ValueError``: ``int()`` alone would also take ``+1``, ``1_0``, spaces and other scripts'
    digits."""
    if not _WHOLE.fullmatch(text) or int(text) > _INT64_MAX:
        raise ValueError(text)
    return int(text)
