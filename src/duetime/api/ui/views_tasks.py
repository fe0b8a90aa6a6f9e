"""Tasks: the list with its filters and searches (each row saying what it waits for), one task
with its attempts (a failing worker's traceback shown apart) and what it waits for — with cancel
and replay. Reads are the JSON API's (:mod:`~duetime.api.ui.task_query` over ``task_list``,
``task_get``, ``attempt_list``); actions are the store calls their API routes make.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Query, Request
from starlette.responses import Response

from duetime.api.flow_view import keyed
from duetime.api.routes.queues import held_by
from duetime.api.ui import waiting
from duetime.api.ui.pages import act, html, serve
from duetime.api.ui.session import UiCall
from duetime.api.ui.task_query import FIELDS, ListQuery, list_page
from duetime.delivery.redact import public_target
from duetime.errors import NotFound, ValidationError
from duetime.ids import is_uuid
from duetime.types import Attempt, KeyFigure, Task, TaskStatus

router = APIRouter(prefix="/ui")

PAGE_SIZE = 50
STATUSES = [s.value for s in TaskStatus]
PARENTS_READ = 20
"""Parents of a blocked task read for its page (the rest are counted, not listed)."""
TRACEBACK_SHOWN_BYTES = 8 * 1024
_TRACEBACK = re.compile(r"^Traceback \(most recent call last\):$", re.MULTILINE)
"""Where a Python traceback starts in an attempt's logs (the SDK worker puts one there)."""


def task_id_of(raw: str) -> str:
    """``raw`` as a task id; ``NotFound`` when it cannot name one."""
    if not is_uuid(raw):
        raise NotFound(f"no task {raw!r}")
    return raw.lower()


async def list_context(call: UiCall, now: datetime) -> waiting.Context:
    """What every row's wait reason is read from: the tenant's circuits and queue settings
    (two small reads, once per page)."""
    circuits, queues = await asyncio.gather(
        call.store.circuit_list(call.tenant_id), call.store.queue_list(call.tenant_id)
    )
    return waiting.Context(
        now=now, circuits={c.origin: c for c in circuits}, queues={q.name: q for q in queues}
    )


async def running_page(call: UiCall, cursor: str, limit: int) -> tuple[list[Task], str | None]:
    """A page of the tenant's running tasks (who holds them, until when)."""
    return await list_page(call, ListQuery(status="running"), limit, cursor or None)


@router.get("/tasks")
async def tasks_page(
    request: Request,
    status: str = "",
    queue: str = "",
    name: str = "",
    label: Annotated[list[str], Query()] = [],  # noqa: B006
    id: str = "",
    error: str = "",
    payload: str = "",
    cursor: str = "",
) -> Response:
    query = ListQuery(status, queue, name, label[0] if label else "", id, error, payload)

    async def view(request: Request, call: UiCall) -> Response:
        now = await call.store.now()
        items: list[Task] = []
        next_cursor, problems = None, {}
        try:
            items, next_cursor = await list_page(call, query, PAGE_SIZE, cursor or None)
        except ValidationError as exc:  # shown next to the field, the form kept as typed
            problems[exc.field or ""] = exc.detail
        ctx = await list_context(call, now)
        filters = query.params()
        return html(
            request,
            "tasks.html",
            422 if problems else 200,
            call=call,
            now=now,
            rows=[(t, waiting.summary(t, ctx)) for t in items],
            query=query,
            filters=filters,
            fields=FIELDS,
            problems=problems,
            statuses=STATUSES,
            next_cursor=next_cursor,
            paged=bool(cursor),
        )

    return await serve(request, view)


@dataclass(frozen=True, slots=True)
class AttemptView:
    """An attempt as its timeline entry shows it: the logs a worker attached, with the Python
    traceback among them (from its first ``Traceback`` line) shown apart, its last
    :data:`TRACEBACK_SHOWN_BYTES`."""

    attempt: Attempt
    logs: str | None
    traceback: str | None
    traceback_cut: bool


def attempt_view(attempt: Attempt) -> AttemptView:
    found = _TRACEBACK.search(attempt.logs or "")
    if found is None:
        return AttemptView(attempt, attempt.logs, None, False)
    text = attempt.logs or ""
    logs, trace = text[: found.start()].rstrip("\n") or None, text[found.start() :]
    raw = trace.encode()
    if len(raw) <= TRACEBACK_SHOWN_BYTES:
        return AttemptView(attempt, logs, trace, False)
    tail = raw[-TRACEBACK_SHOWN_BYTES:].decode("utf-8", errors="ignore")
    return AttemptView(attempt, logs, tail[tail.find("\n") + 1 :], True)


async def _wait_context(call: UiCall, task: Task, now: datetime) -> waiting.Context:
    """Everything that may hold ``task``: circuits, its queue and what holds its ready tasks,
    its parents (the first :data:`PARENTS_READ`)."""
    ctx = await list_context(call, now)
    if task.status not in waiting.WAITING:
        return ctx
    stats = await call.store.queue_stats(call.tenant_id, task.queue)
    counts = stats[0].counts if stats else {}
    parents: list[Task] | None = None
    if task.status is TaskStatus.BLOCKED:
        found = await asyncio.gather(
            *(call.store.task_get(call.tenant_id, p) for p in task.depends_on[:PARENTS_READ])
        )
        parents = [p for p in found if p is not None]
    queue = ctx.queues.get(task.queue)
    key: KeyFigure | None = None
    if task.status is TaskStatus.READY and queue is not None and keyed(queue.settings):
        mine = task.flow_key if queue.settings.flow.key_rate is not None else task.concurrency_key
        if mine:
            found_keys = await call.store.queue_keys(queue, 0, [mine])
            key = next((f for f in found_keys if f.key == mine), None)
    return waiting.Context(
        now=now,
        circuits=ctx.circuits,
        queues=ctx.queues,
        held_by=held_by(queue, counts, now),
        parents=parents,
        key=key,
    )


@router.get("/tasks/{task_id}")
async def task_page(request: Request, task_id: str) -> Response:
    async def view(request: Request, call: UiCall) -> Response:
        found = await call.store.task_get(call.tenant_id, task_id_of(task_id))
        if found is None:
            raise NotFound(f"no task {task_id!r}")
        now = await call.store.now()
        attempts, ctx = await asyncio.gather(
            call.store.attempt_list(call.tenant_id, found.id), _wait_context(call, found, now)
        )
        return html(
            request,
            "task.html",
            call=call,
            now=now,
            task=found,
            target=public_target(found.target),  # credentials as *** and a fingerprint
            attempts=[attempt_view(a) for a in attempts],
            waits=waiting.reasons(found, ctx),
            next_try=waiting.next_try(found, ctx),
            can_cancel=found.status not in _TERMINAL and not found.cancel_requested,
            can_retry=found.status in (TaskStatus.FAILED, TaskStatus.CANCELLED),
        )

    return await serve(request, view)


_TERMINAL = (TaskStatus.SUCCEEDED, TaskStatus.FAILED, TaskStatus.CANCELLED)


async def _cancel(call: UiCall, form: dict[str, list[str]], task_id: str) -> str:
    task = await call.store.task_cancel(call.tenant_id, task_id_of(task_id))
    if task.status is TaskStatus.RUNNING:
        return "cancel requested: the task ends cancelled when its running attempt ends"
    return "task cancelled"


async def _retry(call: UiCall, form: dict[str, list[str]], task_id: str) -> str:
    await call.store.task_retry(call.tenant_id, task_id_of(task_id))
    return "task replayed: it is ready again with a new attempt series"


@router.post("/tasks/{task_id}/cancel")
async def cancel_task(request: Request, task_id: str) -> Response:
    return await act(
        request, lambda call, form: _cancel(call, form, task_id), f"/ui/tasks/{task_id}"
    )


@router.post("/tasks/{task_id}/retry")
async def retry_task(request: Request, task_id: str) -> Response:
    return await act(
        request, lambda call, form: _retry(call, form, task_id), f"/ui/tasks/{task_id}"
    )
