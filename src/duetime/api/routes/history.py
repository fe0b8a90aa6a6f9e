"""``GET /v1/history``: the tenant's audit trail over the hot and cold tiers (SPEC §8)."""

from __future__ import annotations

import functools
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from starlette.responses import Response

from duetime.api import render
from duetime.api.convert import LABEL_FILTER, query_time, text_filter, word_list
from duetime.api.deps import TenantCall, services
from duetime.api.fields import rules
from duetime.api.history_schemas import HistoryListOut
from duetime.api.problems import problem_responses
from duetime.errors import ValidationError
from duetime.history.events import (
    KINDS,
    MAX_HISTORY_LIMIT,
    OUTCOMES,
    HistoryEvent,
    HistoryFilter,
    decode_history_cursor,
    encode_history_cursor,
)
from duetime.history.query import ColdTier, history_page
from duetime.secrets.sealed import redact

_KINDS = word_list(KINDS)
_OUTCOMES = word_list(OUTCOMES)

router = APIRouter(prefix="/v1", tags=["history"], responses=problem_responses(400, 401, 422, 503))


@functools.cache
def _cold(location: str) -> ColdTier | None:
    """The archive at ``location``, or None when the cold-tier extra is not installed."""
    try:
        from duetime.history.archive import Archive
    except ImportError:
        return None
    return Archive(location)


def cold_tier(request: Request) -> ColdTier | None:
    """This server's archive (``DUETIME_ARCHIVE_URL``; on SQLite by default ``<data
    dir>/archive``), when the cold-tier extra is installed."""
    settings = services(request).settings
    if not (settings.archive_url or settings.is_sqlite):
        return None
    return _cold(settings.archive_location)


def _words(items: list[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(w.strip() for item in items for w in item.split(",") if w.strip()))


def event_json(e: HistoryEvent) -> dict[str, Any]:
    return {
        "id": e.id,
        "at": e.at,
        "kind": e.kind,
        "task_id": e.task_id,
        "schedule_id": e.schedule_id,
        "name": e.name,
        "queue": e.queue,
        "labels": dict(e.labels),
        "from_status": e.from_status,
        "to_status": e.to_status,
        "actor": e.actor,
        "fields": None if e.fields is None else redact(dict(e.fields)),
        "attempt": e.attempt,
        "outcome": e.outcome,
        "error": e.error,
        "http_status": e.http_status,
        "duration_ms": e.duration_ms,
        "worker": e.worker,
        "logs": e.logs,
        "response": e.response,
    }


@router.get(
    "/history",
    summary="The audit trail: state changes, attempts and schedule changes",
    responses={200: {"model": HistoryListOut, "description": "A page of records, newest first"}},
)
async def list_history(
    call: TenantCall,
    request: Request,
    task_id: str | None = None,
    schedule_id: str | None = None,
    name: str | None = None,
    queue: str | None = None,
    kind: Annotated[
        list[str],
        Query(description="task, attempt, schedule; repeat or comma", json_schema_extra=_KINDS),
    ] = [],  # noqa: B006
    outcome: Annotated[
        list[str],
        Query(description="Attempt outcomes; repeat or comma", json_schema_extra=_OUTCOMES),
    ] = [],  # noqa: B006
    label: Annotated[
        list[str], Query(description="key:value, repeatable", json_schema_extra=LABEL_FILTER)
    ] = [],  # noqa: B006
    since: Annotated[str | None, Query(description="RFC 3339; at >= this")] = None,
    until: Annotated[
        str | None,
        Query(
            description="RFC 3339; at < this",
            json_schema_extra=rules(("until", "until must be later than since")),
        ),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_HISTORY_LIMIT)] = 100,
    cursor: Annotated[str | None, Query(description="next_cursor of the previous page")] = None,
) -> Response:
    """One page of the tenant's records matching every filter, newest first, over the hot store
    and the archive alike; ``next_cursor`` is null on the last page."""
    labels: dict[str, str] = {}
    for item in label:
        text_filter(item, "label")
        key, sep, value = item.partition(":")
        if not sep or not key:
            raise ValidationError(f"{item!r} is not key:value", field="label")
        labels[key] = value
    query = HistoryFilter(
        tenant_id=call.tenant_id,
        task_id=text_filter(task_id, "task_id"),
        schedule_id=text_filter(schedule_id, "schedule_id"),
        name=text_filter(name, "name"),
        queue=text_filter(queue, "queue"),
        kinds=_words(kind),
        outcomes=_words(outcome),
        labels=labels,
        since=query_time(since, "since"),
        until=query_time(until, "until"),
        limit=limit + 1,  # one extra row tells whether another page exists
        cursor=decode_history_cursor(cursor) if cursor else None,
    )
    found = await history_page(call.store, cold_tier(request), query)
    page = found[:limit]
    next_cursor = encode_history_cursor(page[-1]) if len(found) > limit else None
    return render.json_response(
        {"items": [event_json(e) for e in page], "next_cursor": next_cursor}
    )
