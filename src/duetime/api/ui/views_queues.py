"""Queues: depth by status, lag, limits and what holds their ready tasks (``GET /v1/queues``'s
``queue_json``); pause and resume; and the limits edited in a form validated by the API's own
model (:class:`~duetime.api.queue_schemas.QueuePutIn`, then
:func:`~duetime.api.routes.queues.queue_settings`), each refusal shown next to its field.

A queue's settings are replaced as a whole, as ``PUT /v1/queues/{name}`` replaces them; its
retention periods and keyed flow rules are not part of the form and stay as they are. A queue
with limits per key shows its rules and its busiest keys, each with what holds it.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import RedirectResponse, Response

from duetime.api.flow_view import key_json, keyed
from duetime.api.queue_schemas import QueuePutIn
from duetime.api.routes.queues import queue_json, queue_name, queue_settings
from duetime.api.ui import forms
from duetime.api.ui.pages import act, error_page, html, serve, url
from duetime.api.ui.session import UiCall, first, local_path, read_form, same_origin, set_flash
from duetime.errors import ValidationError
from duetime.history.actor import acting_as
from duetime.types import QueueSettings

router = APIRouter(prefix="/ui")

QUEUES_PAGE = 100
KEYS_SHOWN = 5
"""The busiest keys shown for each queue with limits per key."""
LIMITS = ("max_concurrency", "rate_limit_per_second", "burst", "max_concurrency_per_key")
"""The numeric settings of the edit form, as ``PUT /v1/queues/{name}`` names them."""
DEPTH_ORDER = ("ready", "running", "scheduled", "retrying", "blocked", "failed")


def depth_bar(counts: dict[str, int]) -> list[dict[str, Any]]:
    """Segments of a queue's stacked depth bar (percent widths of the live statuses and the
    dead letters; finished work is left out so a busy queue's backlog stays visible)."""
    total = sum(counts.get(s, 0) for s in DEPTH_ORDER)
    if not total:
        return []
    segments, left = [], 0.0
    for status in DEPTH_ORDER:
        n = counts.get(status, 0)
        if n:
            width = n / total * 100
            segments.append({"status": status, "n": n, "x": round(left, 3), "w": round(width, 3)})
            left += width
    return segments


def _values(settings: QueueSettings) -> dict[str, str]:
    found = {name: forms.shown(getattr(settings, name)) for name in LIMITS}
    return found | {"paused": "on" if settings.paused else ""}


async def _page(
    request: Request,
    call: UiCall,
    after: str,
    editing: dict[str, Any] | None = None,
    status_code: int = 200,
) -> Response:
    configured, figures, now = await asyncio.gather(
        call.store.queue_list(call.tenant_id),
        call.store.queue_stats(call.tenant_id),
        call.store.now(),
    )
    settings = {q.name: q for q in configured}
    stats = {s.name: s for s in figures}
    names = [n for n in sorted({*settings, *stats}) if n > after]
    page = names[:QUEUES_PAGE]
    items = [queue_json(n, settings.get(n), stats.get(n), now) for n in page]
    for item in items:
        item["depth"] = depth_bar(item["counts"])
        item["busiest"] = []
        found = settings.get(item["name"])
        if found is not None and keyed(found.settings):
            busiest = await call.store.queue_keys(found, KEYS_SHOWN)
            item["busiest"] = [key_json(f, found.settings, found.name) for f in busiest]
    if editing is not None and "values" not in editing:
        found = settings.get(editing["name"])
        editing["values"] = _values(found.settings if found else QueueSettings())
    return html(
        request,
        "queues.html",
        status_code,
        call=call,
        now=now,
        items=items,
        editing=editing,
        live_url=url("/ui/queues", after=after),
        next_after=page[-1] if len(names) > QUEUES_PAGE else None,
        paged=bool(after),
    )


@router.get("/queues")
async def queues_page(request: Request, after: str = "", edit: str = "") -> Response:
    """The queues; ``edit`` opens the limits form of that queue."""

    async def view(request: Request, call: UiCall) -> Response:
        editing = {"name": queue_name(edit), "errors": {}} if edit else None
        return await _page(request, call, after, editing)

    return await serve(request, view)


@router.post("/queues/{name}/settings")
async def save_settings(request: Request, name: str) -> Response:
    """Replace the queue's settings as the form gives them; refused values are shown next to
    their fields (422) and nothing changes."""
    if not same_origin(request):
        return error_page(request, 403, "refused: this form was not posted from this dashboard")

    async def view(request: Request, call: UiCall) -> Response:
        queue = queue_name(name)
        form = await read_form(request)
        parsed, errors = forms.validate(QueuePutIn, forms.body_of(form, LIMITS, ("paused",)))
        settings = None
        if parsed is not None:
            try:
                settings = queue_settings(parsed)
            except ValidationError as exc:
                errors = forms.error_of(exc)
        if settings is None:
            typed = {n: first(form, n) for n in LIMITS} | {"paused": first(form, "paused")}
            editing = {"name": queue, "values": typed, "errors": errors}
            return await _page(request, call, "", editing, 422)
        # Keyed flow rules are not part of the form: they stay as they are.
        current = await call.store.queue_get(call.tenant_id, queue)
        if current is not None:
            settings = dataclasses.replace(settings, flow=current.settings.flow)
        with acting_as(call.audit_actor()):
            await call.store.queue_put(call.tenant_id, queue, settings)
        response = RedirectResponse(local_path(first(form, "back"), "/ui/queues"), 303)
        set_flash(response, request, f"queue {queue}: settings saved")
        return response

    return await serve(request, view)


async def _set_paused(call: UiCall, name: str, paused: bool) -> str:
    queue = queue_name(name)
    current = await call.store.queue_get(call.tenant_id, queue)
    settings = current.settings if current is not None else QueueSettings()
    await call.store.queue_put(call.tenant_id, queue, dataclasses.replace(settings, paused=paused))
    return f"queue {queue} {'paused' if paused else 'resumed'}"


@router.post("/queues/{name}/pause")
async def pause_queue(request: Request, name: str) -> Response:
    return await act(request, lambda c, f: _set_paused(c, name, True), "/ui/queues")


@router.post("/queues/{name}/resume")
async def resume_queue(request: Request, name: str) -> Response:
    return await act(request, lambda c, f: _set_paused(c, name, False), "/ui/queues")
