"""Tasks as the API reads and changes them (get, list, patch, cancel, replay, attempts, leases),
once for both backends.

A change is one ``UPDATE`` conditional on the statuses that allow it, so it cannot race another
writer; when it matches nothing, the task is read to tell ``NotFound`` from ``Conflict``. Task
and lease ids are UUIDs: anything else names no task (PostgreSQL could not even compare it).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import fields
from typing import Any

import orjson

from duetime.errors import BadCursor, Conflict, NotFound, ValidationError
from duetime.ids import id_prefix_range, is_uuid
from duetime.store.core import rows
from duetime.store.core.follow import settle
from duetime.store.core.plan import Into, Plan, Wake, all_, execute, one, wake_for
from duetime.store.core.runner import Runs
from duetime.types import (
    PATCHABLE_STATUSES,
    Attempt,
    Lease,
    PayloadMatch,
    Task,
    TaskFilter,
    TaskPatch,
    TaskStatus,
)

PATCHABLE = sorted(s.value for s in PATCHABLE_STATUSES)
CANCELLABLE = [s.value for s in TaskStatus if not s.terminal]
"""Waiting tasks are cancelled at once; a running one is flagged and ends with its attempt."""
REPLAYABLE = [TaskStatus.FAILED.value, TaskStatus.CANCELLED.value]
_PAYLOAD_KEY = re.compile(r"(?=.{1,64}$)[A-Za-z0-9_-]*[A-Za-z_-][A-Za-z0-9_-]*")
"""An object key of a payload path; never all digits, which PostgreSQL's ``#>`` would read as an
array position where SQLite's path reads a key."""


def _fields(value: Any) -> dict[str, Any]:
    """A dataclass's fields by name (``dataclasses.asdict`` deep-copies them, slowly)."""
    return {field.name: getattr(value, field.name) for field in fields(value)}


def task_get(tenant_id: str, task_id: str) -> Plan[Task | None]:
    if not is_uuid(task_id):
        return None
    found: Task | None = yield one("task_get", rows.task, tenant_id=tenant_id, id=task_id)
    return found


def _payload_params(match: PayloadMatch | None) -> dict[str, Any]:
    """A payload path equality as both dialects bind it: ``payload_path``, the JSON path
    ``$."k1"."k2"`` (keys quoted; PostgreSQL reads it as a strict ``jsonpath``), and
    ``payload_json``, the value as canonical JSON (SQLite tells its type by ``json_type``)."""
    if match is None:
        return {"payload_equals": None, "payload_path": None, "payload_json": None}
    if not match.keys or not all(_PAYLOAD_KEY.fullmatch(key) for key in match.keys):
        raise ValidationError(
            "a payload path is object keys of A-Z a-z 0-9 _ - (not all digits)", field="payload"
        )
    try:
        value = orjson.loads(match.value_json)
    except orjson.JSONDecodeError:
        value = ...
    if value is ... or isinstance(value, dict | list):
        raise ValidationError("a payload match compares one JSON scalar", field="payload")
    if isinstance(value, int) and not isinstance(value, bool) and not -(2**63) <= value < 2**63:
        value = float(value)  # SQLite keeps larger JSON numbers as reals
    return {
        "payload_equals": None,
        "payload_path": "$" + "".join(f'."{key}"' for key in match.keys),
        "payload_json": orjson.dumps(value).decode(),
    }


def task_list(query: TaskFilter) -> Plan[list[Task]]:
    """Newest first (id descending), after ``query.cursor``, every filter applied. An
    ``id_prefix`` is a range of ids (:func:`~duetime.ids.id_prefix_range`): its lower end is
    ``id_low``, its upper end tightens the cursor's, so the scan has one range on ``id``."""
    if query.cursor is not None and not is_uuid(query.cursor):
        raise BadCursor("cursor is not one this server issued")
    if query.limit <= 0:
        return []
    low, before = None, query.cursor
    if query.id_prefix is not None:
        found_range = id_prefix_range(query.id_prefix)
        if found_range is None:
            raise ValidationError("not a prefix of a task id", field="id_prefix")
        low, high = found_range
        # One upper bound for the index range: the cursor's or the prefix's, the lower.
        if high is not None and (before is None or high < before):
            before = high
    statuses = list(dict.fromkeys(str(status) for status in query.statuses))
    labels = dict(query.labels) or None
    params = (
        _fields(query)
        | {"labels": labels, "cursor": before, "id_low": low}
        | _payload_params(query.payload_equals)
    )
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
    if task.status is TaskStatus.CANCELLED:
        if has_dependents:
            yield from settle([(task.id, task.status.value)])
        yield Wake(ended=(task.id,))
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
