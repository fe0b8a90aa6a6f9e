"""Task transactions the API asks for: read, list, patch, cancel, replay (create: ``hot.py``).

Every function runs on the store's database thread inside a transaction the caller opened (a
write transaction for anything that changes rows); ``now`` is the store's now in microseconds.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from duetime.errors import Conflict, NotFound
from duetime.store.sqlite.dependencies import fail_dependents
from duetime.store.sqlite.queries import QUERIES as Q
from duetime.store.sqlite.rows import (
    attempt_from_row,
    dumps,
    task_from_row,
    to_micros,
)
from duetime.store.sqlite.signals import Wakeups
from duetime.types import (
    PATCHABLE_STATUSES,
    Attempt,
    Task,
    TaskFilter,
    TaskPatch,
    TaskStatus,
)

_ABOVE_EVERY_ID = "\U0010ffff"
"""First-page cursor: sorts after any id (SQLite compares text as UTF-8 bytes)."""


def task_get(conn: sqlite3.Connection, now: int, tenant_id: str, task_id: str) -> Task | None:
    row = conn.execute(Q["task_get"], {"tenant_id": tenant_id, "id": task_id}).fetchone()
    return None if row is None else task_from_row(row)


def task_list(conn: sqlite3.Connection, now: int, query: TaskFilter) -> list[Task]:
    """Newest first (id descending), after ``query.cursor``, every filter applied."""
    if query.limit <= 0:
        return []
    params: dict[str, Any] = {
        "tenant_id": query.tenant_id,
        "cursor": query.cursor if query.cursor is not None else _ABOVE_EVERY_ID,
        "queue": query.queue,
        "name": query.name,
        "schedule_id": query.schedule_id,
        "run_after": None if query.run_after is None else to_micros(query.run_after),
        "run_before": None if query.run_before is None else to_micros(query.run_before),
        "labels": dumps(dict(query.labels)) if query.labels else None,
        "limit": query.limit,
    }
    statuses = list(dict.fromkeys(str(status) for status in query.statuses))
    if len(statuses) == 1:
        params["status"] = statuses[0]
        rows = conn.execute(Q["task_list_one_status"], params)
    elif statuses:
        params["statuses"] = dumps(statuses)
        rows = conn.execute(Q["task_list_by_status"], params)
    else:
        rows = conn.execute(Q["task_list"], params)
    return [task_from_row(row) for row in rows]


def task_update(
    conn: sqlite3.Connection, now: int, tenant_id: str, task_id: str, patch: TaskPatch,
    wake: Wakeups,
) -> Task:  # fmt: skip
    """Patch a waiting task; a new ``run_at`` moves ``due_at`` and may flip ready/scheduled."""
    current = _get_or_404(conn, tenant_id, task_id)
    if current.status not in PATCHABLE_STATUSES:
        raise Conflict(
            f"task {task_id} is {current.status}: only scheduled, blocked, ready or retrying "
            "tasks can be changed"
        )
    new_status = current.status
    run_at = None if patch.run_at is None else to_micros(patch.run_at)
    if run_at is not None and current.status is not TaskStatus.BLOCKED:
        new_status = TaskStatus.READY if run_at <= now else TaskStatus.SCHEDULED
    row = conn.execute(
        Q["task_update"],
        {
            "id": task_id,
            "old_status": str(current.status),
            "version": current.version,
            "new_status": str(new_status),
            "run_at": run_at,
            "payload": patch.payload_json,
            "priority": patch.priority,
            "labels": None if patch.labels is None else dumps(dict(patch.labels)),
            "now": now,
        },
    ).fetchone()
    if row is None:  # cannot happen under the write lock; the guard keeps the contract explicit
        raise Conflict(f"task {task_id} changed concurrently; nothing was changed")
    if new_status is TaskStatus.READY and current.status is not TaskStatus.READY:
        wake.ready = True
    elif new_status is TaskStatus.SCHEDULED and run_at is not None:
        wake.due = True
    return task_from_row(row)


def task_cancel(conn: sqlite3.Connection, now: int, tenant_id: str, task_id: str) -> Task:
    """Cancel a waiting task (failing its dependents) or flag a running one."""
    current = _get_or_404(conn, tenant_id, task_id)
    if current.status.terminal:
        raise Conflict(f"task {task_id} is already {current.status}")
    params = {"id": task_id, "now": now}
    if current.status is TaskStatus.RUNNING:
        row = conn.execute(Q["task_cancel_running"], params).fetchone()
    else:
        row = conn.execute(Q["task_cancel_waiting"], params).fetchone()
    if row is None:  # as in task_update: unreachable under the write lock
        raise Conflict(f"task {task_id} changed concurrently; nothing was changed")
    if row["status"] == "cancelled" and row["has_dependents"]:
        fail_dependents(conn, now, [task_id])
    return task_from_row(row)


def task_retry(
    conn: sqlite3.Connection, now: int, tenant_id: str, task_id: str, wake: Wakeups
) -> Task:
    """Replay a failed or cancelled task as a new attempt series, ready now."""
    current = _get_or_404(conn, tenant_id, task_id)
    if current.status not in (TaskStatus.FAILED, TaskStatus.CANCELLED):
        raise Conflict(f"task {task_id} is {current.status}: only failed or cancelled tasks retry")
    row = conn.execute(
        Q["task_retry"], {"id": task_id, "tenant_id": tenant_id, "now": now}
    ).fetchone()
    if row is None:  # as in task_update: unreachable under the write lock
        raise Conflict(f"task {task_id} changed concurrently; nothing was changed")
    wake.ready = True
    return task_from_row(row)


def attempt_list(conn: sqlite3.Connection, now: int, tenant_id: str, task_id: str) -> list[Attempt]:
    _get_or_404(conn, tenant_id, task_id)
    rows = conn.execute(Q["attempt_list"], {"task_id": task_id})
    return [attempt_from_row(row) for row in rows]


def _get_or_404(conn: sqlite3.Connection, tenant_id: str, task_id: str) -> Task:
    task = task_get(conn, 0, tenant_id, task_id)
    if task is None:
        raise NotFound(f"task {task_id} not found")
    return task
