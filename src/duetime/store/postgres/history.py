"""History, retention and audit on PostgreSQL (SPEC §8): the ``history_*``, ``queue_retention_*``
and ``task_retention_sweep`` methods of :class:`~duetime.store.postgres.backend.PostgresStore`.

The audit records themselves are written by triggers (``migrations/0007_history.sql``) in the
transaction of each change. This module reads them, keeps per-queue retention, and sweeps
finished tasks past it. The rules (periods, cursors, filter checks) are in :mod:`duetime.history`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import date, datetime
from importlib import resources
from typing import TYPE_CHECKING, Any

import asyncpg
import orjson

from duetime.errors import NotFound
from duetime.history.actor import current_actor
from duetime.history.events import HistoryEvent, HistoryFilter, check_history_filter
from duetime.history.partitions import month_bounds
from duetime.history.retention import ArchiveFailed, RetentionPolicy, TaskArchiver
from duetime.ids import is_uuid
from duetime.store.postgres import rows
from duetime.store.postgres.sql import parse_queries
from duetime.types import Attempt

if TYPE_CHECKING:
    from asyncpg.pool import PoolConnectionProxy

    Conn = PoolConnectionProxy[asyncpg.Record]

HQ: dict[str, str] = parse_queries(
    resources.files(__package__).joinpath("history.sql").read_text(encoding="utf-8")
)
"""The named queries of ``history.sql``."""


def event_from_row(r: asyncpg.Record) -> HistoryEvent:
    """A ``history`` row as a :class:`HistoryEvent`."""
    return HistoryEvent(
        at=r["at"],
        id=r["id"],
        kind=r["kind"],
        task_id=None if r["task_id"] is None else str(r["task_id"]),
        schedule_id=r["schedule_id"],
        name=r["name"],
        queue=r["queue"],
        labels=orjson.loads(r["labels"]) if r["labels"] else {},
        from_status=r["from_status"],
        to_status=r["to_status"],
        actor=r["actor"],
        fields=orjson.loads(r["fields"]) if r["fields"] else None,
        attempt=r["attempt"],
        outcome=r["outcome"],
        error=r["error"],
        http_status=r["http_status"],
        duration_ms=r["duration_ms"],
        worker=r["worker"],
        started_at=r["started_at"],
    )


class HistoryOps:
    """History methods of the PostgreSQL store (a mixin: the store provides connections)."""

    def _pinned(self) -> datetime | None:
        raise NotImplementedError

    def _connection(self) -> AbstractAsyncContextManager[Conn]:
        raise NotImplementedError

    def _transaction(self) -> AbstractAsyncContextManager[Conn]:
        raise NotImplementedError

    @contextlib.asynccontextmanager
    async def _acting(self) -> AsyncIterator[Conn]:
        """A connection whose changes the audit triggers attribute to
        :data:`~duetime.history.actor.current_actor`, when set: then the block runs in a
        transaction whose local ``duetime.actor`` setting names it (it ends with the
        transaction, so no pooled connection keeps it)."""
        actor = current_actor.get()
        async with self._connection() as conn:
            if actor is None:
                yield conn
                return
            async with conn.transaction():
                await conn.execute(HQ["actor_set"], actor)
                yield conn

    # -- retention -----------------------------------------------------------------------------

    async def queue_retention_put(
        self, tenant_id: str, queue: str, policy: RetentionPolicy | None
    ) -> None:
        """Set the queue's retention (None or an empty policy: back to the defaults)."""
        async with self._connection() as conn:
            if policy is None or policy == RetentionPolicy():
                await conn.execute(HQ["queue_retention_delete"], tenant_id, queue)
            else:
                await conn.execute(
                    HQ["queue_retention_put"], tenant_id, queue,
                    policy.succeeded, policy.failed, policy.cancelled,
                )  # fmt: skip

    async def queue_retention_get(self, tenant_id: str, queue: str) -> RetentionPolicy:
        """The queue's own retention (fields it does not set are None)."""
        async with self._connection() as conn:
            r = await conn.fetchrow(HQ["queue_retention_get"], tenant_id, queue)
        if r is None:
            return RetentionPolicy()
        return RetentionPolicy.of_row(r)

    async def queue_retention_list(self, tenant_id: str) -> dict[str, RetentionPolicy]:
        """Every queue of the tenant with its own retention, by name."""
        async with self._connection() as conn:
            found = await conn.fetch(HQ["queue_retention_list"], tenant_id)
        return {r["queue"]: RetentionPolicy.of_row(r) for r in found}

    async def task_retention_sweep(
        self, defaults: RetentionPolicy, limit: int, *, archive: TaskArchiver | None = None
    ) -> int:
        """Delete up to ``limit`` finished tasks past their retention (handed to ``archive``
        before the deletion commits); returns how many."""
        async with self._transaction() as conn:
            gone = await conn.fetch(
                HQ["task_retention_sweep"], self._pinned(),
                defaults.succeeded, defaults.failed, defaults.cancelled, limit,
            )  # fmt: skip
            if gone and archive is not None:
                try:
                    await asyncio.to_thread(archive, [dict(r) for r in gone])
                except Exception as exc:  # rolls the deletion back
                    raise ArchiveFailed(f"{type(exc).__name__}: {exc}") from exc
        return len(gone)

    # -- history reads -------------------------------------------------------------------------

    async def history_query(self, query: HistoryFilter) -> list[HistoryEvent]:
        """Up to ``query.limit`` hot-tier records matching every filter, newest first."""
        check_history_filter(query)
        if query.task_id is not None and not is_uuid(query.task_id):
            return []
        at, event_id = query.cursor if query.cursor else (None, None)
        args: list[Any] = [
            query.tenant_id, query.task_id, query.schedule_id, query.name, query.queue,
            list(query.kinds) or None, list(query.outcomes) or None,
            rows.to_json(query.labels) if query.labels else None,
            query.since, query.until, at, event_id, query.limit,
        ]  # fmt: skip
        async with self._transaction() as conn:
            await conn.execute(HQ["history_plan_custom"])
            found = await conn.fetch(HQ["history_query"], *args)
        return [event_from_row(r) for r in found]

    async def history_attempts(self, tenant_id: str, task_id: str) -> list[Attempt]:
        """The attempts of a task from its history records, by number (also after the task
        left the hot store). ``NotFound`` when the tenant has no record of it."""
        if not is_uuid(task_id):
            raise NotFound(f"no task {task_id}")
        async with self._connection() as conn:
            found = await conn.fetch(HQ["history_attempts"], task_id, tenant_id)
            if not found and not await conn.fetchval(HQ["history_task_known"], task_id, tenant_id):
                raise NotFound(f"no task {task_id}")
        return [rows.attempt_from_row(r) for r in found]

    # -- partitions and export (the cold tier: duetime.history.archive) ------------------------

    async def history_partitions_ensure(self, months: Sequence[date]) -> int:
        """Make the monthly partitions of ``months`` and of every month stranded in the default
        partition (moving its rows in). Returns how many were made."""
        async with self._connection() as conn:
            stranded = [r["month"] for r in await conn.fetch(HQ["history_default_months"])]
            made = 0
            for month in sorted({*months, *stranded}):
                async with conn.transaction():
                    made += bool(await conn.fetchval(HQ["history_partition_ensure"], month))
        return made

    async def history_months(self) -> list[date]:
        """The months (first days, UTC) that have a partition or hold hot records."""
        async with self._connection() as conn:
            return [r["month"] for r in await conn.fetch(HQ["history_months"])]

    async def history_month_counts(self, month: date) -> dict[str, int]:
        """Hot records of ``month`` per tenant."""
        lo, hi = month_bounds(month)
        async with self._connection() as conn:
            found = await conn.fetch(HQ["history_month_counts"], lo, hi)
        return {r["tenant_id"]: r["n"] for r in found}

    async def history_month_rows(
        self, month: date, batch: int
    ) -> AsyncIterator[list[dict[str, Any]]]:
        """Every hot record of ``month`` as column → value (JSON columns as text), grouped by
        tenant, then name, each name's by time, in lists of up to ``batch`` (one snapshot, a
        server-side cursor)."""
        lo, hi = month_bounds(month)
        async with self._transaction() as conn:
            cursor = await conn.cursor(HQ["history_month_rows"], lo, hi)
            while True:
                found = await cursor.fetch(batch)
                if not found:
                    return
                yield [dict(r) for r in found]

    async def history_month_drop(self, month: date) -> bool:
        """Detach and drop the month's partition (never a mass DELETE). False when it has none."""
        async with self._transaction() as conn:
            return bool(await conn.fetchval(HQ["history_partition_drop"], month))
