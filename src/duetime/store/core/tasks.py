"""Tasks as the API reads and changes them (get, list, patch, cancel, replay, attempts, leases),
once for both backends.

A change is one ``UPDATE`` conditional on the statuses that allow it, so it cannot race another
writer; when it matches nothing, the task is read to tell ``NotFound`` from ``Conflict``. Task
and lease ids are UUIDs: anything else names no task (PostgreSQL could not even compare it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields
from typing import Any

from duetime.errors import Conflict, NotFound, ValidationError
from duetime.ids import is_uuid
from duetime.store.core import rows
from duetime.store.core.dependencies import fail_dependents
from duetime.store.core.plan import Into, Plan, Wake, all_, execute, one, wake_for
from duetime.store.core.runner import Runs
from duetime.types import (
    PATCHABLE_STATUSES,
    Attempt,
    Lease,
    Task,
    TaskFilter,
    TaskPatch,
    TaskStatus,
)

PATCHABLE = sorted(s.value for s in PATCHABLE_STATUSES)
CANCELLABLE = [s.value for s in TaskStatus if not s.terminal]
"""Waiting tasks are cancelled at once; a running one is flagged and ends with its attempt."""
REPLAYABLE = [TaskStatus.FAILED.value, TaskStatus.CANCELLED.value]


def _fields(value: Any) -> dict[str, Any]:
    """A dataclass's fields by name (``dataclasses.asdict`` deep-copies them, slowly)."""
    return {field.name: getattr(value, field.name) for field in fields(value)}


def task_get(tenant_id: str, task_id: str) -> Plan[Task | None]:
    if not is_uuid(task_id):
        return None
    found: Task | None = yield one("task_get", rows.task, tenant_id=tenant_id, id=task_id)
    return found


def task_list(query: TaskFilter) -> Plan[list[Task]]:
    """Newest first (id descending), after ``query.cursor``, every filter applied."""
    if query.cursor is not None and not is_uuid(query.cursor):
        raise ValidationError("cursor is not one this server issued", field="cursor")
    if query.limit <= 0:
        return []
    statuses = list(dict.fromkeys(str(status) for status in query.statuses))
    labels = dict(query.labels) or None
    params = _fields(query) | {"labels": labels}
    yield execute("plan_custom")
    if len(statuses) == 1:
        params |= {"status": statuses[0]}
        found: list[Task] = yield all_("task_list_status", rows.task, **params)
    else:
        params |= {"statuses": statuses or None}
        found = yield all_("task_list", rows.task, **params)
    return found


def _change(query: str, tenant_id: str, task_id: str, into: Into, **params: Any) -> Plan[Any]:
    """Run ``query``, one ``UPDATE`` of the task conditional on ``params["statuses"]``, and return
    its row; when it matches nothing, ``NotFound`` (not the tenant's task) or ``Conflict``."""
    found = None
    if is_uuid(task_id):
        found = yield one(query, into, id=task_id, tenant_id=tenant_id, **params)
    if found is None:
        task = yield from task_get(tenant_id, task_id)
        if task is None:
            raise NotFound(f"no task {task_id}")
        raise Conflict(f"cannot {query.removeprefix('task_')} task {task_id}: it is {task.status}")
    return found


def task_update(tenant_id: str, task_id: str, patch: TaskPatch) -> Plan[Task]:
    """Patch a waiting task; a new ``run_at`` moves ``due_at`` and may flip ready/scheduled."""
    task: Task = yield from _change(
        "task_update", tenant_id, task_id, rows.task, statuses=PATCHABLE, **_fields(patch)
    )
    if patch.run_at is not None:
        yield wake_for([task.status])
    return task


def task_cancel(tenant_id: str, task_id: str) -> Plan[Task]:
    """Cancel a waiting task (failing its dependents) or flag a running one."""
    found: tuple[Task, bool] = yield from _change(
        "task_cancel", tenant_id, task_id, rows.task_and_dependents, statuses=CANCELLABLE
    )
    task, has_dependents = found
    if task.status is TaskStatus.CANCELLED and has_dependents:
        yield from fail_dependents([task.id])
    return task


def task_retry(tenant_id: str, task_id: str) -> Plan[Task]:
    """Replay a failed or cancelled task as a new attempt series, ready now."""
    task: Task = yield from _change(
        "task_retry", tenant_id, task_id, rows.task, statuses=REPLAYABLE
    )
    yield Wake(ready=True)
    return task


def attempt_list(tenant_id: str, task_id: str) -> Plan[list[Attempt]]:
    """Every attempt of the task, by number; one row without an attempt when it has none."""
    found: list[Attempt | None] = []
    if is_uuid(task_id):
        found = yield all_("attempt_list", rows.attempt_or_none, id=task_id, tenant_id=tenant_id)
    if not found:
        raise NotFound(f"no task {task_id}")
    return [attempt for attempt in found if attempt is not None]


def task_leases_get(lease_ids: Sequence[str], tenant_id: str | None) -> Plan[dict[str, Lease]]:
    wanted = sorted({lease_id for lease_id in lease_ids if is_uuid(lease_id)})
    if not wanted:
        return {}
    found: list[Lease] = yield all_(
        "task_leases_get", rows.lease, lease_ids=wanted, tenant_id=tenant_id
    )
    return {lease.lease_id: lease for lease in found}


class TaskMethods(Runs):
    """The API's task methods of :class:`~duetime.store.protocols.Store`, for both backends."""

    async def task_get(self, tenant_id: str, task_id: str) -> Task | None:
        return await self._run(task_get(tenant_id, task_id))

    async def task_list(self, query: TaskFilter) -> list[Task]:
        return await self._run(task_list(query))

    async def task_update(self, tenant_id: str, task_id: str, patch: TaskPatch) -> Task:
        return await self._run(task_update(tenant_id, task_id, patch), write=True)

    async def task_cancel(self, tenant_id: str, task_id: str) -> Task:
        return await self._run(task_cancel(tenant_id, task_id), write=True)

    async def task_retry(self, tenant_id: str, task_id: str) -> Task:
        return await self._run(task_retry(tenant_id, task_id), write=True)

    async def attempt_list(self, tenant_id: str, task_id: str) -> list[Attempt]:
        return await self._run(attempt_list(tenant_id, task_id))

    async def task_leases_get(
        self, lease_ids: Sequence[str], *, tenant_id: str | None = None
    ) -> dict[str, Lease]:
        return await self._run(task_leases_get(lease_ids, tenant_id))
