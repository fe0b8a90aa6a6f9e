"""Tasks: the filtered list, one task with its attempts, and the dead-letter set grouped by
error — with cancel and replay. Every read is the JSON API's: :func:`~duetime.api.convert.
task_filter` and ``task_list`` (newest first over the ``(tenant, status, id)`` index, cursor
paged), ``task_get``, ``attempt_list``; every action is the store call its API route makes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Query, Request
from starlette.responses import Response

from duetime.api.convert import encode_cursor, task_filter
from duetime.api.ui.pages import act, html, serve
from duetime.api.ui.session import UiCall
from duetime.errors import Conflict, NotFound, ValidationError
from duetime.ids import is_uuid
from duetime.types import Task, TaskStatus

router = APIRouter(prefix="/ui")

PAGE_SIZE = 50
DEAD_PAGE_SIZE = 200
"""Dead letters grouped per page: enough to see the patterns, bounded for the store."""
MAX_BULK = DEAD_PAGE_SIZE
"""Most ids one replay or cancel form may name."""
ERROR_KEY_CHARS = 160
STATUSES = [s.value for s in TaskStatus]


def _task_id(raw: str) -> str:
    if not is_uuid(raw):
        raise NotFound(f"no task {raw!r}")
    return raw.lower()


async def _page(
    call: UiCall,
    *,
    status: Sequence[str],
    queue: str | None,
    name: str | None,
    label: Sequence[str],
    limit: int,
    cursor: str | None,
) -> tuple[list[Task], str | None]:
    """One page of the API's task list and the cursor of the next (None on the last)."""
    query = task_filter(
        call.tenant_id,
        status=status,
        queue=queue or None,
        name=name or None,
        schedule_id=None,
        label=[item for item in label if item],
        run_after=None,
        run_before=None,
        limit=limit + 1,
        cursor=cursor or None,
    )
    found = await call.store.task_list(query)
    page = found[:limit]
    return page, encode_cursor(page[-1].id) if len(found) > limit else None


async def running_page(call: UiCall, cursor: str, limit: int) -> tuple[list[Task], str | None]:
    """A page of the tenant's running tasks (who holds them, until when)."""
    return await _page(
        call, status=["running"], queue=None, name=None, label=[], limit=limit, cursor=cursor
    )


@router.get("/tasks")
async def tasks_page(
    request: Request,
    status: str = "",
    queue: str = "",
    name: str = "",
    label: Annotated[list[str], Query()] = [],  # noqa: B006
    cursor: str = "",
) -> Response:
    async def view(request: Request, call: UiCall) -> Response:
        items, next_cursor = await _page(
            call,
            status=[status] if status else [],
            queue=queue,
            name=name,
            label=label,
            limit=PAGE_SIZE,
            cursor=cursor,
        )
        filters = {"status": status, "queue": queue, "name": name, "label": label}
        return html(
            request,
            "tasks.html",
            call=call,
            now=await call.store.now(),
            items=items,
            filters=filters,
            statuses=STATUSES,
            next_cursor=next_cursor,
            paged=bool(cursor),
        )

    return await serve(request, view)


@router.get("/tasks/{task_id}")
async def task_page(request: Request, task_id: str) -> Response:
    async def view(request: Request, call: UiCall) -> Response:
        found = await call.store.task_get(call.tenant_id, _task_id(task_id))
        if found is None:
            raise NotFound(f"no task {task_id!r}")
        attempts = await call.store.attempt_list(call.tenant_id, found.id)
        return html(
            request,
            "task.html",
            call=call,
            now=await call.store.now(),
            task=found,
            attempts=attempts,
            can_cancel=found.status not in _TERMINAL and not found.cancel_requested,
            can_retry=found.status in (TaskStatus.FAILED, TaskStatus.CANCELLED),
        )

    return await serve(request, view)


_TERMINAL = (TaskStatus.SUCCEEDED, TaskStatus.FAILED, TaskStatus.CANCELLED)


async def _cancel(call: UiCall, form: dict[str, list[str]], task_id: str) -> str:
    task = await call.store.task_cancel(call.tenant_id, _task_id(task_id))
    if task.status is TaskStatus.RUNNING:
        return "cancel requested: the task ends cancelled when its running attempt ends"
    return "task cancelled"


async def _retry(call: UiCall, form: dict[str, list[str]], task_id: str) -> str:
    await call.store.task_retry(call.tenant_id, _task_id(task_id))
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


@dataclass
class ErrorGroup:
    """Tasks of one page that failed with the same error (its first line, trimmed)."""

    error: str
    tasks: list[Task] = field(default_factory=list)
    queues: set[str] = field(default_factory=set)
    last_at: datetime | None = None


def error_key(text: str | None) -> str:
    """What groups errors: the first line, trimmed, without its tail beyond
    :data:`ERROR_KEY_CHARS` (so ids or timings at the end of long messages matter less)."""
    if not text:
        return "(no error recorded)"
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line[:ERROR_KEY_CHARS] or "(no error recorded)"


def group_by_error(tasks: Sequence[Task]) -> list[ErrorGroup]:
    """``tasks`` grouped by :func:`error_key`, largest group first."""
    groups: dict[str, ErrorGroup] = {}
    for task in tasks:
        key = error_key(task.last_error)
        group = groups.setdefault(key, ErrorGroup(key))
        group.tasks.append(task)
        group.queues.add(task.queue)
        at = task.finished_at or task.updated_at
        if group.last_at is None or at > group.last_at:
            group.last_at = at
    return sorted(groups.values(), key=lambda g: (-len(g.tasks), g.error))


@router.get("/dead-letters")
async def dead_letters_page(
    request: Request, queue: str = "", name: str = "", cursor: str = "", retrying_cursor: str = ""
) -> Response:
    async def view(request: Request, call: UiCall) -> Response:
        failed, next_cursor = await _page(
            call, status=["failed"], queue=queue, name=name, label=[],
            limit=DEAD_PAGE_SIZE, cursor=cursor,
        )  # fmt: skip
        retrying, next_retrying = await _page(
            call, status=["retrying"], queue=queue, name=name, label=[],
            limit=DEAD_PAGE_SIZE, cursor=retrying_cursor,
        )  # fmt: skip
        return html(
            request,
            "dead_letters.html",
            call=call,
            now=await call.store.now(),
            groups=group_by_error(failed),
            failing=group_by_error(retrying),
            count=len(failed),
            failing_count=len(retrying),
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
    return [_task_id(i) for i in ids]


async def _each(call: UiCall, ids: list[str], retry: bool) -> tuple[int, int]:
    """Replay (or cancel) each task; (changed, skipped): a task that moved on meanwhile (already
    replayed, finished) is skipped, as the bulk API would."""
    changed = skipped = 0
    for task_id in ids:
        try:
            if retry:
                await call.store.task_retry(call.tenant_id, task_id)
            else:
                await call.store.task_cancel(call.tenant_id, task_id)
            changed += 1
        except (Conflict, NotFound):
            skipped += 1
    return changed, skipped


async def _replay_many(call: UiCall, form: dict[str, list[str]]) -> str:
    changed, skipped = await _each(call, _ids(form), retry=True)
    return f"replayed {changed} task(s)" + (f"; {skipped} had moved on" if skipped else "")


async def _cancel_many(call: UiCall, form: dict[str, list[str]]) -> str:
    changed, skipped = await _each(call, _ids(form), retry=False)
    return f"cancelled {changed} task(s)" + (f"; {skipped} had moved on" if skipped else "")


@router.post("/dead-letters/replay")
async def replay_many(request: Request) -> Response:
    return await act(request, _replay_many, "/ui/dead-letters")


@router.post("/dead-letters/cancel")
async def cancel_many(request: Request) -> Response:
    return await act(request, _cancel_many, "/ui/dead-letters")
