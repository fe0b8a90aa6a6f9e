"""Task transactions the API asks for: create, read, list, patch, cancel, replay.

Every function runs on the store's database thread inside a transaction the caller opened (a
write transaction for anything that changes rows); ``now`` is the store's now in microseconds.
"""

from __future__ import annotations

import operator
import sqlite3
from collections.abc import Sequence
from typing import Any

from duetime.errors import Conflict, NotFound, ValidationError
from duetime.ids import new_id
from duetime.store.sqlite.dependencies import fail_dependents
from duetime.store.sqlite.queries import QUERIES as Q
from duetime.store.sqlite.rows import (
    attempt_from_row,
    dumps,
    retry_to_json,
    task_from_row,
    to_micros,
)
from duetime.store.sqlite.signals import Wakeups
from duetime.types import (
    PATCHABLE_STATUSES,
    Attempt,
    NewTask,
    Task,
    TaskCreated,
    TaskFilter,
    TaskPatch,
    TaskStatus,
)

INSERT_COLUMNS = (
    "id", "tenant_id", "name", "queue", "status", "version", "target_type", "target", "payload",
    "idempotency_key", "priority", "retry", "timeout_seconds", "depends_on", "pending_parents",
    "has_dependents", "concurrency_key", "labels", "attempts", "series_start", "schedule_id",
    "scheduled_for", "run_at", "due_at", "created_at", "updated_at", "started_at", "finished_at",
    "last_error", "result", "lease_id", "lease_expires_at", "worker_id", "cancel_requested",
    "traceparent", "request_hash", "payload_ref",
)  # fmt: skip
"""Column order of the positional ``task_insert`` query."""

_insert_values = operator.itemgetter(*INSERT_COLUMNS)

_ABOVE_EVERY_ID = "\U0010ffff"
"""First-page cursor: sorts after any id (SQLite compares text as UTF-8 bytes)."""

_DEAD_PARENT = frozenset({"failed", "cancelled"})
_DEPENDENCY_FAILED = "a task it depends on failed or was cancelled"  # the same text as in SQL


def task_create_many(
    conn: sqlite3.Connection, now: int, tasks: Sequence[NewTask], wake: Wakeups
) -> list[TaskCreated]:
    """Create ``tasks`` all or nothing; repeats of an idempotency key return the existing task."""
    if not tasks:
        return []
    known = _existing_by_idempotency_key(conn, tasks)
    parents = _parent_states(conn, tasks)
    results: list[TaskCreated] = []
    inserts: list[tuple[Any, ...]] = []
    edges: list[tuple[str, str]] = []
    for new in tasks:
        key = None if new.idempotency_key is None else (new.tenant_id, new.idempotency_key)
        if key is not None and key in known:
            results.append(TaskCreated(task=known[key], created=False))
            continue
        row = _new_row(new, now, parents)
        task = task_from_row(row)
        if key is not None:
            known[key] = task  # a repeat later in this batch is an idempotent hit too
        inserts.append(_insert_values(row))
        edges.extend((parent, task.id) for parent in dict.fromkeys(new.depends_on))
        results.append(TaskCreated(task=task, created=True))
        if task.status is TaskStatus.READY:
            wake.ready = True
        elif task.status is TaskStatus.SCHEDULED:
            wake.due = True
    conn.executemany(Q["task_insert"], inserts)
    if edges:
        conn.executemany(Q["task_dep_insert"], edges)
        parent_ids = list(dict.fromkeys(parent for parent, _ in edges))
        conn.execute(Q["task_mark_has_dependents"], {"ids": dumps(parent_ids)})
    return results


def _existing_by_idempotency_key(
    conn: sqlite3.Connection, tasks: Sequence[NewTask]
) -> dict[tuple[str, str], Task]:
    keys_by_tenant: dict[str, list[str]] = {}
    for new in tasks:
        if new.idempotency_key is not None:
            keys_by_tenant.setdefault(new.tenant_id, []).append(new.idempotency_key)
    known: dict[tuple[str, str], Task] = {}
    for tenant_id, keys in keys_by_tenant.items():
        params = {"tenant_id": tenant_id, "keys": dumps(keys)}
        for row in conn.execute(Q["task_find_by_idempotency_keys"], params):
            known[(tenant_id, row["idempotency_key"])] = task_from_row(row)
    return known


def _parent_states(conn: sqlite3.Connection, tasks: Sequence[NewTask]) -> dict[str, str]:
    """Status of every parent named in ``tasks``; ``ValidationError`` for an unknown one (or one
    of another tenant)."""
    wanted = list(dict.fromkeys(parent for new in tasks for parent in new.depends_on))
    if not wanted:
        return {}
    found = {
        row["id"]: (row["tenant_id"], row["status"])
        for row in conn.execute(Q["task_parent_states"], {"ids": dumps(wanted)})
    }
    for new in tasks:
        for parent in new.depends_on:
            owner = found.get(parent)
            if owner is None or owner[0] != new.tenant_id:
                raise ValidationError(f"depends_on: no task with id {parent!r}", "depends_on")
    return {parent: status for parent, (_, status) in found.items()}


def _new_row(new: NewTask, now: int, parents: dict[str, str]) -> dict[str, Any]:
    """The ``tasks`` row for a new task, with its initial status."""
    target_type = new.target.get("type")
    if not isinstance(target_type, str):
        raise ValidationError("target.type is required", "target.type")
    run_at = now if new.run_at is None else to_micros(new.run_at)
    distinct_parents = dict.fromkeys(new.depends_on)
    dead = any(parents[p] in _DEAD_PARENT for p in distinct_parents)
    pending = sum(1 for p in distinct_parents if parents[p] != "succeeded")
    if dead:
        status = "failed"
    elif pending:
        status = "blocked"
    elif run_at <= now:
        status = "ready"
    else:
        status = "scheduled"
    return {
        "id": new_id(),
        "tenant_id": new.tenant_id,
        "name": new.name,
        "queue": new.queue,
        "status": status,
        "version": 1,
        "target_type": target_type,
        "target": dumps(new.target),
        "payload": new.payload_json,
        "idempotency_key": new.idempotency_key,
        "priority": new.priority,
        "retry": retry_to_json(new.retry),
        "timeout_seconds": float(new.timeout_seconds),
        "depends_on": dumps(list(new.depends_on)),
        "pending_parents": pending,
        "has_dependents": 0,
        "concurrency_key": new.concurrency_key,
        "labels": dumps(dict(new.labels)),
        "attempts": 0,
        "series_start": 0,
        "schedule_id": new.schedule_id,
        "scheduled_for": None if new.scheduled_for is None else to_micros(new.scheduled_for),
        "run_at": run_at,
        "due_at": run_at,
        "created_at": now,
        "updated_at": now,
        "started_at": None,
        "finished_at": now if dead else None,
        "last_error": _DEPENDENCY_FAILED if dead else None,
        "result": None,
        "lease_id": None,
        "lease_expires_at": None,
        "worker_id": None,
        "cancel_requested": 0,
        "traceparent": new.traceparent,
        "request_hash": new.request_hash,
        "payload_ref": new.payload_ref,
    }


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
