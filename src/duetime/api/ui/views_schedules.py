"""Schedules: the list, and one schedule with its next runs (and the DST changes ahead), its
tick ledger and its revisions — with pause (and a note), resume and trigger.

Reads are the JSON API's (``schedule_list``, ``schedule_get``, the tick and revision ledgers,
each cursor paged over its index; the next runs and DST changes ahead from
:mod:`duetime.schedule.preview`, in the evaluation pool as ``GET /v1/schedules/{id}/upcoming``);
actions are the API routes' own changes
(:func:`~duetime.api.routes.schedules.schedule_pause` and its siblings).
"""

from __future__ import annotations

import re
from datetime import date, datetime, time, tzinfo

from fastapi import APIRouter, Request
from starlette.responses import Response

from duetime.api.convert import (
    decode_revision_cursor,
    decode_schedule_cursor,
    decode_tick_cursor,
    encode,
    query_time,
    tick_cursor,
)
from duetime.api.deps import Caller
from duetime.api.routes.schedules import schedule_pause, schedule_resume, schedule_trigger
from duetime.api.schedule_ops import revision_json, schedules_json
from duetime.api.ui.pages import act, html, serve
from duetime.api.ui.session import UiCall, first
from duetime.errors import NotFound, ValidationError
from duetime.ids import is_uuid
from duetime.schedule.config import schedule_spec
from duetime.schedule.preview import schedule_preview
from duetime.text import clean
from duetime.types import Schedule, ScheduleFilter, TickFilter

router = APIRouter(prefix="/ui")

PAGE_SIZE = 50
TICKS_PAGE = 50
REVISIONS_PAGE = 20
MAX_UPCOMING = 100
NOTE_LIMIT_BYTES = 1000
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def _caller(call: UiCall) -> Caller:
    return Caller(call.tenant_id, call.store, call.services.creator)


def _schedule_id(raw: str) -> str:
    if not is_uuid(raw):
        raise NotFound(f"no schedule {raw!r}")
    return raw.lower()


async def _schedule(call: UiCall, schedule_id: str) -> Schedule:
    found = await call.store.schedule_get(call.tenant_id, _schedule_id(schedule_id))
    if found is None:
        raise NotFound(f"no schedule {schedule_id!r}")
    return found


@router.get("/schedules")
async def schedules_page(
    request: Request, paused: str = "", queue: str = "", name: str = "", cursor: str = ""
) -> Response:
    async def view(request: Request, call: UiCall) -> Response:
        query = ScheduleFilter(
            tenant_id=call.tenant_id,
            paused={"yes": True, "no": False}.get(paused),
            queue=queue or None,
            name=name or None,
            limit=PAGE_SIZE + 1,
            cursor=decode_schedule_cursor(cursor) if cursor else None,
        )
        found = await call.store.schedule_list(query)
        page = found[:PAGE_SIZE]
        now = await call.store.now()
        return html(
            request,
            "schedules.html",
            call=call,
            now=now,
            items=await schedules_json(call.services.evaluations, call.tenant_id, page, now),
            filters={"paused": paused, "queue": queue, "name": name},
            next_cursor=encode(page[-1].id) if len(found) > PAGE_SIZE else None,
            paged=bool(cursor),
        )

    return await serve(request, view)


def _start(raw: str, zone: tzinfo) -> datetime:
    """``after`` of the next-runs form: a date (midnight there, in the schedule's zone) or an
    RFC 3339 instant."""
    if _DATE.fullmatch(raw):
        try:
            return datetime.combine(date.fromisoformat(raw), time(0), tzinfo=zone)
        except ValueError:
            raise ValidationError(f"not a date: {raw!r}", field="after") from None
    found = query_time(raw, "after")
    assert found is not None
    return found


@router.get("/schedules/{schedule_id}")
async def schedule_page(
    request: Request,
    schedule_id: str,
    after: str = "",
    count: int = 10,
    ticks_cursor: str = "",
    revisions_cursor: str = "",
) -> Response:
    async def view(request: Request, call: UiCall) -> Response:
        s = await _schedule(call, schedule_id)
        now = await call.store.now()
        if not 1 <= count <= MAX_UPCOMING:
            raise ValidationError(f"count is 1 to {MAX_UPCOMING}", field="count")
        start = _start(after, schedule_spec(s).zone) if after else now
        ticks = await call.store.schedule_tick_list(
            TickFilter(
                tenant_id=call.tenant_id,
                schedule_id=s.id,
                limit=TICKS_PAGE + 1,
                cursor=decode_tick_cursor(ticks_cursor) if ticks_cursor else None,
            )
        )
        revisions = await call.store.schedule_revision_list(
            call.tenant_id,
            s.id,
            limit=REVISIONS_PAGE + 1,
            cursor=decode_revision_cursor(revisions_cursor) if revisions_cursor else None,
        )
        tick_page, revision_page = ticks[:TICKS_PAGE], revisions[:REVISIONS_PAGE]
        # Evaluations run in the pool, off the event loop, on the tenant's share of it.
        evaluations = call.services.evaluations
        runs, changes = await evaluations.run(call.tenant_id, schedule_preview, s, start, count)
        [shown] = await schedules_json(evaluations, call.tenant_id, [s], now)
        return html(
            request,
            "schedule.html",
            call=call,
            now=now,
            schedule=shown,
            zone=schedule_spec(s).zone,
            after=after,
            count=count,
            upcoming=runs,
            dst_ahead=changes,
            ticks=tick_page,
            next_ticks=tick_cursor(tick_page[-1]) if len(ticks) > TICKS_PAGE else None,
            revisions=[revision_json(r) for r in revision_page],
            next_revisions=(
                encode(str(revision_page[-1].id)) if len(revisions) > REVISIONS_PAGE else None
            ),
            paged=bool(ticks_cursor or revisions_cursor),
        )

    return await serve(request, view)


async def _pause(call: UiCall, form: dict[str, list[str]], schedule_id: str) -> str:
    note = clean(first(form, "note").strip(), NOTE_LIMIT_BYTES) or None
    await schedule_pause(_caller(call), _schedule_id(schedule_id), note, await call.actor())
    return "schedule paused" + (f": {note}" if note else "")


async def _resume(call: UiCall, form: dict[str, list[str]], schedule_id: str) -> str:
    catchup = first(form, "catchup", "none")
    if catchup not in ("none", "latest", "all"):
        raise ValidationError("catchup is none, latest or all", field="catchup")
    await schedule_resume(_caller(call), _schedule_id(schedule_id), catchup, await call.actor())
    return f"schedule resumed (catch-up: {catchup})"


async def _trigger(call: UiCall, form: dict[str, list[str]], schedule_id: str) -> str:
    made = await schedule_trigger(_caller(call), _schedule_id(schedule_id), await call.actor())
    return f"triggered: task {made.task.id}"


@router.post("/schedules/{schedule_id}/pause")
async def pause(request: Request, schedule_id: str) -> Response:
    return await act(
        request, lambda c, f: _pause(c, f, schedule_id), f"/ui/schedules/{schedule_id}"
    )


@router.post("/schedules/{schedule_id}/resume")
async def resume(request: Request, schedule_id: str) -> Response:
    return await act(
        request, lambda c, f: _resume(c, f, schedule_id), f"/ui/schedules/{schedule_id}"
    )


@router.post("/schedules/{schedule_id}/trigger")
async def trigger(request: Request, schedule_id: str) -> Response:
    return await act(
        request, lambda c, f: _trigger(c, f, schedule_id), f"/ui/schedules/{schedule_id}"
    )
