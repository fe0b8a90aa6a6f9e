"""What the history holds and how it is queried (SPEC §8 "Query"), for every tier.

A :class:`HistoryEvent` is one audit record: a task's state change (``kind="task"``, with
``from_status`` → ``to_status``, the actor and, for API changes, the ``fields`` changed), an
attempt (``kind="attempt"``: number, outcome, error, HTTP status, duration, worker, the worker's
logs, the webhook answer's start) or a schedule
change (``kind="schedule"``: the revision's action in ``to_status``). Records are ordered newest
first by ``(at, id)``; the cursor of a page is the ``(at, id)`` of its last record.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from duetime.errors import BadCursor, ValidationError

KINDS = ("task", "attempt", "schedule")
OUTCOMES = ("succeeded", "failed", "timed_out", "lease_expired")
MAX_HISTORY_LIMIT = 1000


@dataclass(frozen=True, slots=True)
class HistoryEvent:
    """One audit record (see the module docstring). ``id`` orders records of the same ``at``."""

    at: datetime
    id: int
    kind: str
    task_id: str | None
    schedule_id: str | None
    name: str | None
    queue: str | None
    labels: Mapping[str, str]
    from_status: str | None
    to_status: str | None
    actor: str | None
    fields: Mapping[str, Any] | None
    attempt: int | None
    outcome: str | None
    error: str | None
    http_status: int | None
    duration_ms: float | None
    worker: str | None
    started_at: datetime | None = None
    """For attempts: when the attempt started (``at`` is when it ended)."""
    logs: str | None = None
    """For attempts: the text the worker attached on complete or fail (at most 64 KiB)."""
    response: str | None = None
    """For webhook attempts: the start of the target's answer body (at most 4 KiB)."""


@dataclass(frozen=True, slots=True)
class HistoryFilter:
    """A history query: one tenant's records matching every filter given, newest first, in
    ``[since, until)``, after ``cursor`` (the ``(at, id)`` of the previous page's last record)."""

    tenant_id: str
    task_id: str | None = None
    schedule_id: str | None = None
    name: str | None = None
    queue: str | None = None
    kinds: Sequence[str] = ()
    outcomes: Sequence[str] = ()
    labels: Mapping[str, str] = field(default_factory=dict)
    since: datetime | None = None
    until: datetime | None = None
    limit: int = 100
    cursor: tuple[datetime, int] | None = None


def encode_history_cursor(event: HistoryEvent) -> str:
    """The opaque cursor that continues after ``event``."""
    micros = round(event.at.timestamp() * 1_000_000)
    return base64.urlsafe_b64encode(f"h1.{micros}.{event.id}".encode()).decode().rstrip("=")


def decode_history_cursor(cursor: str) -> tuple[datetime, int]:
    """``(at, id)`` of a cursor :func:`encode_history_cursor` made; ``ValidationError`` (field
    ``cursor``) for anything else. Both numbers must be ASCII digits within a 64-bit integer (a
    tampered one must not reach the store, which would refuse it in its own words)."""
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        tag, micros, event_id = text.split(".")
        if tag != "h1" or not (_WHOLE.fullmatch(micros) and _WHOLE.fullmatch(event_id)):
            raise ValueError(text)
        number = int(event_id)
        if number > _INT64_MAX:
            raise ValueError(event_id)
        at = datetime.fromtimestamp(int(micros) / 1_000_000, UTC)
        return at, number
    except (ValueError, UnicodeDecodeError, binascii.Error, OverflowError, OSError):
        raise BadCursor("cursor is not one this server issued") from None


_WHOLE = re.compile(r"[0-9]{1,19}")
_INT64_MAX = 2**63 - 1


def check_history_filter(query: HistoryFilter) -> HistoryFilter:
    """Refuse filters no tier can answer (``ValidationError`` naming the field)."""
    for kind in query.kinds:
        if kind not in KINDS:
            raise ValidationError(f"unknown kind {kind!r}; one of {', '.join(KINDS)}", "kind")
    for outcome in query.outcomes:
        if outcome not in OUTCOMES:
            detail = f"unknown outcome {outcome!r}; one of {', '.join(OUTCOMES)}"
            raise ValidationError(detail, "outcome")
    if query.since and query.until and query.until <= query.since:
        raise ValidationError("until must be later than since", "until")
    if not 1 <= query.limit <= MAX_HISTORY_LIMIT + 1:
        raise ValidationError(f"limit must be 1..{MAX_HISTORY_LIMIT}", "limit")
    return query
