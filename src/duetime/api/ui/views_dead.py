"""Dead letters: the ``failed`` tasks grouped by error, and the tasks failing now that will be
tried again — ``retrying`` ones (in backoff) and those an open circuit (or a worker) handed back
``scheduled`` after failing (:func:`~duetime.api.ui.waiting.held_after_failing`) — grouped alike,
each group saying what its tasks wait for. Replay and cancel a group: each task through the
bulk API's one-task change (:func:`~duetime.api.bulk.change_task`).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from fastapi import APIRouter, Request
from starlette.responses import Response

from duetime.api.bulk import Action, change_task
from duetime.api.ui import waiting
from duetime.api.ui.pages import act, html, serve
from duetime.api.ui.session import UiCall
from duetime.api.ui.task_query import ListQuery, list_page
from duetime.api.ui.views_tasks import list_context, task_id_of
from duetime.errors import ValidationError
from duetime.types import TargetCircuit, Task, TaskFilter, TaskStatus

router = APIRouter(prefix="/ui")

DEAD_PAGE_SIZE = 200
"""Dead letters grouped per page: enough to see the patterns, bounded for the store."""
HELD_READ = DEAD_PAGE_SIZE
"""Tasks held after failing read for the page (the newest; the page says when there are more)."""
MAX_BULK = DEAD_PAGE_SIZE
"""Most ids one replay or cancel form may name."""
ERROR_KEY_CHARS = 160


@dataclass
class ErrorGroup:
    """Tasks of one page that failed with the same error (its first line, trimmed), and what
    the waiting ones among them wait for (reason → tasks)."""

    error: str
    tasks: list[Task] = field(default_factory=list)
    queues: set[str] = field(default_factory=set)
    last_at: datetime | None = None
    waits: Counter[str] = field(default_factory=Counter)


def error_key(text: str | None) -> str:
    """What groups errors: the first line, trimmed, without its tail beyond
    :data:`ERROR_KEY_CHARS` (so ids or timings at the end of long messages matter less)."""
    if not text:
        return "(no error recorded)"
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line[:ERROR_KEY_CHARS] or "(no error recorded)"


def group_by_error(tasks: Sequence[Task], ctx: waiting.Context | None = None) -> list[ErrorGroup]:
    """``tasks`` grouped by :func:`error_key`, largest group first; with ``ctx``, each group
    counts its tasks' wait reasons."""
    groups: dict[str, ErrorGroup] = {}
    for task in tasks:
        key = error_key(task.last_error)
        group = groups.setdefault(key, ErrorGroup(key))
        group.tasks.append(task)
        group.queues.add(task.queue)
        at = task.finished_at or task.updated_at
        if group.last_at is None or at > group.last_at:
            group.last_at = at
        wait = waiting.summary(task, ctx) if ctx is not None else None
        if wait is not None:
            group.waits[waiting.gist(wait)] += 1
    return sorted(groups.values(), key=lambda g: (-len(g.tasks), g.error))


def circuits_holding(call: UiCall, circuits: Sequence[TargetCircuit], now: datetime) -> bool:
    """Whether a circuit of the tenant may be holding tasks: one not closed, or closed more
    recently than the longest cool-down (a task it handed back may still wait that long)."""
    since = now - timedelta(seconds=call.services.settings.circuit_max_cooldown_seconds)
    return any(c.state != "closed" or c.changed_at >= since for c in circuits)


async def held_tasks(
    call: UiCall, queue: str | None, name: str | None, limit: int, holding: bool
) -> list[Task]:
    """The newest ``limit`` tasks handed back ``scheduled`` after failing (scheduled, with an
    error): what an open circuit holds. Read only while ``holding`` (:func:`circuits_holding`):
    the error is no index, so the read walks the tenant's scheduled tasks until it has
    ``limit`` — worth it only when a circuit holds some."""
    if not holding:
        return []
    query = TaskFilter(
        tenant_id=call.tenant_id,
        statuses=(TaskStatus.SCHEDULED,),
        queue=queue,
        name=name,
        error_contains="",
        limit=limit,
    )
    return await call.store.task_list(query)


@router.get("/dead-letters")
async def dead_letters_page(
    request: Request, queue: str = "", name: str = "", cursor: str = "", retrying_cursor: str = ""
) -> Response:
    async def view(request: Request, call: UiCall) -> Response:
        now = await call.store.now()
        ctx = await list_context(call, now)
        holding = circuits_holding(call, list(ctx.circuits.values()), now)
        failed_q = ListQuery(status="failed", queue=queue, name=name)
        retrying_q = ListQuery(status="retrying", queue=queue, name=name)
        (failed, next_cursor), (retrying, next_retrying), held = await asyncio.gather(
            list_page(call, failed_q, DEAD_PAGE_SIZE, cursor or None),
            list_page(call, retrying_q, DEAD_PAGE_SIZE, retrying_cursor or None),
            held_tasks(call, queue or None, name or None, HELD_READ + 1, holding),
        )
        return html(
            request,
            "dead_letters.html",
            call=call,
            now=now,
            groups=group_by_error(failed),
            failing=group_by_error([*retrying, *held[:HELD_READ]], ctx),
            count=len(failed),
            retrying_count=len(retrying),
            held_count=min(len(held), HELD_READ),
            held_more=len(held) > HELD_READ,
            filters={"queue": queue, "name": name},
            next_cursor=next_cursor,
            next_retrying=next_retrying,
            paged=bool(cursor or retrying_cursor),
        )

    return await serve(request, view)


def _ids(form: dict[str, list[str]]) -> list[str]:
    ids = list(dict.fromkeys(form.get("id", [])))
    if not ids:
        raise ValidationError("no task chosen", field="id")
    if len(ids) > MAX_BULK:
        raise ValidationError(f"at most {MAX_BULK} tasks at once", field="id")
    return [task_id_of(i) for i in ids]


async def change_each(call: UiCall, action: Action, ids: Sequence[str]) -> tuple[int, int]:
    """Replay (or cancel) each task; (changed, skipped): a task that moved on meanwhile
    (already replayed, finished) or is not the tenant's is skipped, as the bulk API skips it."""
    changed = 0
    for task_id in ids:
        changed += await change_task(call.store, action, call.tenant_id, task_id)
    return changed, len(ids) - changed


def said(action: Action, changed: int, skipped: int) -> str:
    verb = "replayed" if action == "replay" else "cancelled"
    return f"{verb} {changed} task(s)" + (f"; {skipped} had moved on" if skipped else "")


async def _replay_many(call: UiCall, form: dict[str, list[str]]) -> str:
    return said("replay", *await change_each(call, "replay", _ids(form)))


async def _cancel_many(call: UiCall, form: dict[str, list[str]]) -> str:
    return said("cancel", *await change_each(call, "cancel", _ids(form)))


@router.post("/dead-letters/replay")
async def replay_many(request: Request) -> Response:
    return await act(request, _replay_many, "/ui/dead-letters")


@router.post("/dead-letters/cancel")
async def cancel_many(request: Request) -> Response:
    return await act(request, _cancel_many, "/ui/dead-letters")
