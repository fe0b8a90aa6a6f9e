"""Cancel or replay many tasks from the list: the ones selected with their boxes, or every
task matching the list's filter — always after a confirmation that says how many.

``POST /ui/tasks/confirm`` changes nothing: it counts what the action would touch and renders
the confirmation (htmx puts it above the list; without JavaScript it is a page of its own).
Its form posts ``/ui/tasks/bulk``, which acts through the bulk API's machinery: each selected
task by :func:`~duetime.api.bulk.change_task`, every matching one by
:func:`~duetime.api.bulk.bulk_change` over the list filter's walk — newest first, from the newest
task counted (so tasks made after the confirmation are left alone), at most as many as were
confirmed, throttled to :data:`RATE_PER_SECOND`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, cast

from fastapi import APIRouter, Request
from starlette.responses import Response

from duetime.api.bulk import Action, bulk_change
from duetime.api.ui.pages import act, error_page, html, serve
from duetime.api.ui.search import id_after
from duetime.api.ui.session import UiCall, first, local_path, read_form, same_origin
from duetime.api.ui.task_query import ListQuery, count_matching
from duetime.api.ui.views_dead import MAX_BULK, change_each, said
from duetime.api.ui.views_tasks import task_id_of
from duetime.clock import Clock, SystemClock
from duetime.errors import NotFound, ValidationError
from duetime.ids import is_uuid

router = APIRouter(prefix="/ui")

MAX_MATCHING = 1000
"""Most tasks one "all matching" action changes (the bulk API's default ``max_tasks``)."""
RATE_PER_SECOND = 200.0
"""How fast an "all matching" action changes them: 1,000 tasks take 5 s."""
SCOPES = ("selected", "matching")
_CLOCK: Clock = SystemClock()


def _do(form: dict[str, list[str]]) -> tuple[Action, str]:
    """The button pressed: ``cancel:selected``, ``replay:matching``…"""
    action, _, scope = first(form, "do").partition(":")
    if action not in ("cancel", "replay") or scope not in SCOPES:
        raise ValidationError("choose cancel or replay, of the selected or matching tasks", "do")
    return cast(Action, action), scope


def _selected(form: dict[str, list[str]]) -> list[str]:
    """The ticked task ids (``pick``: ``id`` is the list's id search)."""
    ids = list(dict.fromkeys(form.get("pick", [])))
    if not ids:
        raise ValidationError("no task selected: tick the box of each task first", field="pick")
    if len(ids) > MAX_BULK:
        raise ValidationError(f"at most {MAX_BULK} selected tasks at once", field="pick")
    try:
        return [task_id_of(i) for i in ids]
    except NotFound:
        raise ValidationError("a selected id is not a task id", field="pick") from None


@router.post("/tasks/confirm")
async def confirm(request: Request) -> Response:
    """The confirmation of a bulk action (changes nothing)."""
    if not same_origin(request):
        return error_page(request, 403, "refused: this form was not posted from this dashboard")

    async def view(request: Request, call: UiCall) -> Response:
        form = await read_form(request)
        query = ListQuery.from_form(form)
        back = local_path(first(form, "back"), "/ui/tasks")
        context: dict[str, Any] = {"call": call, "back": back, "filters": query.params()}
        try:
            action, scope = _do(form)
            context |= {"action": action, "scope": scope}
            if scope == "selected":
                ids = _selected(form)
                context |= {"ids": ids, "count": len(ids)}
            else:
                walk = query.bulk_query(call.tenant_id, action)
                count, newest = await count_matching(call, walk, MAX_MATCHING)
                context |= {
                    "count": min(count, MAX_MATCHING),
                    "more": count > MAX_MATCHING,
                    "upto": id_after(newest) if newest else "",
                    "statuses": [s.value for s in walk.statuses],
                }
        except ValidationError as exc:
            return html(request, "confirm.html", 422, problem=exc.detail, **context)
        return html(request, "confirm.html", problem=None, max_matching=MAX_MATCHING, **context)

    return await serve(request, view)


async def _matching(
    request: Request, call: UiCall, form: dict[str, list[str]], action: Action
) -> str:
    walk = ListQuery.from_form(form).bulk_query(call.tenant_id, action)
    upto, raw = first(form, "upto"), first(form, "count")
    if not is_uuid(upto) or not raw.isdigit() or not 1 <= int(raw) <= MAX_MATCHING:
        raise ValidationError("the confirmation is incomplete: ask again", field="count")
    clock: Clock = getattr(request.app.state, "clock", None) or _CLOCK
    done = await bulk_change(
        call.store,
        action,
        replace(walk, cursor=upto),
        max_tasks=int(raw),
        rate_per_second=RATE_PER_SECOND,
        monotonic=clock.monotonic,
        sleep=clock.sleep,
    )
    verb = "replayed" if action == "replay" else "cancelled"
    moved = done.matched - done.changed
    return f"{verb} {done.changed} matching task(s)" + (f"; {moved} had moved on" if moved else "")


async def _bulk(request: Request, call: UiCall, form: dict[str, list[str]]) -> str:
    action, scope = _do(form)
    if scope == "selected":
        return said(action, *await change_each(call, action, _selected(form)))
    return await _matching(request, call, form, action)


@router.post("/tasks/bulk")
async def bulk(request: Request) -> Response:
    """Act as confirmed, then back to the list with what was done."""
    return await act(request, lambda call, form: _bulk(request, call, form), "/ui/tasks")
