"""History, retention and audit (SPEC §8): the rules, once for both backends.

The audit records are written by triggers (``migrations/0007_history.sql``) inside the
transaction of each change (PostgreSQL's behind: into ``history_pending``, one row per statement,
which the leader moves into ``history`` with :func:`history_pending_move`; its reads take both,
migration 0019, ADR 0008); both backends' ``_run`` attribute a write plan's changes to the
caller's actor with :func:`acting`. PostgreSQL cuts the history into monthly partitions (made
ahead, dropped after export); SQLite has one table, where a month is a time range: its partition
statements make nothing and a month's drop deletes in batches. The export of a month
(``history_month_rows``) streams differently on each backend (``store/<backend>/history.py``).
The rules of periods, cursors and filters are in :mod:`duetime.history`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date
from typing import Any, TypeVar

from duetime.errors import NotFound
from duetime.history.events import HistoryEvent, HistoryFilter, check_history_filter
from duetime.history.partitions import month_bounds
from duetime.history.retention import ArchiveFailed, RetentionPolicy, TaskArchiver
from duetime.ids import is_uuid
from duetime.store.core import rows
from duetime.store.core.plan import Call, Json, Plan, all_, count, execute, one, value
from duetime.store.core.runner import Runs
from duetime.types import Attempt

T = TypeVar("T")


def acting(plan: Plan[T], actor: str | None) -> Plan[T]:
    """``plan`` with its changes attributed to ``actor`` in the audit trail (None: the triggers
    name the actor themselves). Set and cleared inside the plan's transaction: PostgreSQL's
    setting is transaction-local anyway, SQLite's is a row no other transaction may see."""
    return plan if actor is None else _acting(plan, actor)


def _acting(plan: Plan[T], actor: str) -> Plan[T]:
    yield execute("actor_set", actor=actor)
    result = yield from plan
    yield execute("actor_clear")
    return result


def queue_retention_put(tenant_id: str, queue: str, policy: RetentionPolicy | None) -> Plan[None]:
    if policy is None or policy == RetentionPolicy():
        yield execute("queue_retention_delete", tenant_id=tenant_id, queue=queue)
    else:
        yield execute(
            "queue_retention_put", tenant_id=tenant_id, queue=queue,
            succeeded=policy.succeeded, failed=policy.failed, cancelled=policy.cancelled,
        )  # fmt: skip


def queue_retention_get(tenant_id: str, queue: str) -> Plan[RetentionPolicy]:
    found = yield one("queue_retention_get", rows.retention, tenant_id=tenant_id, queue=queue)
    return RetentionPolicy() if found is None else found


def queue_retention_list(tenant_id: str) -> Plan[dict[str, RetentionPolicy]]:
    return dict((yield all_("queue_retention_list", rows.queue_retention, tenant_id=tenant_id)))


def task_retention_sweep(
    defaults: RetentionPolicy, limit: int, archive: TaskArchiver | None
) -> Plan[int]:
    """Delete up to ``limit`` finished tasks past their retention, handed to ``archive`` before
    the deletion commits; returns how many."""
    into = rows.swept_task if archive is not None else rows.nothing
    gone = yield all_(
        "task_retention_sweep", into, limit=limit,
        succeeded=defaults.succeeded, failed=defaults.failed, cancelled=defaults.cancelled,
    )  # fmt: skip
    if gone and archive is not None:
        yield Call(_archive, (archive, gone))
    return len(gone)


def _archive(archive: TaskArchiver, gone: list[dict[str, Any]]) -> None:
    try:
        archive(gone)
    except Exception as exc:  # rolls the deletion back
        raise ArchiveFailed(f"{type(exc).__name__}: {exc}") from exc


def history_query(query: HistoryFilter) -> Plan[list[HistoryEvent]]:
    if query.task_id is not None and not is_uuid(query.task_id):
        return []  # no task has such an id
    yield execute("plan_custom")
    cursor_at, cursor_id = query.cursor if query.cursor else (None, None)
    found: list[HistoryEvent] = yield all_(
        "history_query", rows.history_event,
        tenant_id=query.tenant_id, task_id=query.task_id, schedule_id=query.schedule_id,
        name=query.name, queue=query.queue,
        kinds=list(query.kinds) or None, outcomes=list(query.outcomes) or None,
        labels=Json(dict(query.labels)) if query.labels else None,
        since=query.since, until=query.until, cursor_at=cursor_at, cursor_id=cursor_id,
        limit=query.limit,
    )  # fmt: skip
    return found


def history_attempts(tenant_id: str, task_id: str) -> Plan[list[Attempt]]:
    if is_uuid(task_id):
        where = {"task_id": task_id, "tenant_id": tenant_id}
        found: list[Attempt] = yield all_("history_attempts", rows.attempt, **where)
        if found or (yield value("history_task_known", **where)):
            return found
    raise NotFound(f"no task {task_id}")


def history_partition_months(months: Sequence[date]) -> Plan[list[date]]:
    """The months whose partitions to make (PostgreSQL: ``months`` and those stranded in the
    default partition; SQLite, without partitions: none)."""
    found: list[date] = yield all_("history_partition_months", rows.month, months=list(months))
    return found


def history_partition_ensure(month: date) -> Plan[bool]:
    return bool((yield value("history_partition_ensure", month=month)))


def history_months() -> Plan[list[date]]:
    found: list[date] = yield all_("history_months", rows.month)
    return found


def history_month_counts(month: date) -> Plan[dict[str, int]]:
    lo, hi = month_bounds(month)
    return dict((yield all_("history_month_counts", rows.tenant_count, lo=lo, hi=hi)))


PENDING_BATCH = 100
"""Statements' pending records moved per transaction (one statement records up to a few hundred)."""


def history_pending_move(limit: int) -> Plan[int]:
    """Move up to ``limit`` statements' pending records into the history table (PostgreSQL
    writes its audit trail behind, migration 0019; SQLite never has any pending): how many
    records moved."""
    return int((yield value("history_pending_move", limit=limit)))


def history_pending_rows() -> Plan[int]:
    return int((yield value("history_pending_rows")))


def history_month_drop(month: date) -> Plan[int]:
    """Remove (a batch of) the month's records: PostgreSQL drops its partition (1), SQLite
    deletes up to 10,000 rows; 0 once nothing is left."""
    return int((yield count("history_month_drop", month=month_bounds(month)[0])))


class HistoryMethods(Runs):
    """The history, retention and audit methods of :class:`~duetime.store.protocols.Store`
    for both backends (but ``history_month_rows``)."""

    async def queue_retention_put(
        self, tenant_id: str, queue: str, policy: RetentionPolicy | None
    ) -> None:
        await self._run(queue_retention_put(tenant_id, queue, policy), write=True)

    async def queue_retention_get(self, tenant_id: str, queue: str) -> RetentionPolicy:
        return await self._run(queue_retention_get(tenant_id, queue))

    async def queue_retention_list(self, tenant_id: str) -> dict[str, RetentionPolicy]:
        return await self._run(queue_retention_list(tenant_id))

    async def task_retention_sweep(
        self, defaults: RetentionPolicy, limit: int, *, archive: TaskArchiver | None = None
    ) -> int:
        return await self._run(task_retention_sweep(defaults, limit, archive), write=True)

    async def history_query(self, query: HistoryFilter) -> list[HistoryEvent]:
        check_history_filter(query)
        return await self._run(history_query(query), snapshot=True)

    async def history_attempts(self, tenant_id: str, task_id: str) -> list[Attempt]:
        return await self._run(history_attempts(tenant_id, task_id))

    async def history_partitions_ensure(self, months: Sequence[date]) -> int:
        """One transaction per partition made (SQLite: none to make)."""
        made = 0
        for month in await self._run(history_partition_months(months)):
            made += await self._run(history_partition_ensure(month), write=True)
        return made

    async def history_months(self) -> list[date]:
        return await self._run(history_months())

    async def history_month_counts(self, month: date) -> dict[str, int]:
        return await self._run(history_month_counts(month))

    async def history_pending_move(self, limit: int) -> int:
        return await self._run(history_pending_move(limit), write=True)

    async def history_pending_rows(self) -> int:
        return await self._run(history_pending_rows())

    async def history_month_drop(self, month: date) -> bool:
        """One transaction per batch, until none is left."""
        dropped = False
        while await self._run(history_month_drop(month), write=True):
            dropped = True
        return dropped
