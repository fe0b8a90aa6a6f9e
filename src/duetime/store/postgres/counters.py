"""Maintained task counts of :class:`~duetime.store.postgres.backend.PostgresStore` (the rules
are in :mod:`duetime.store.counters`; the triggers in ``migrations/0004_counters.sql``).

Statement-level triggers append one delta row per (tenant, queue, status) a statement changed;
readers add the pending deltas to the totals, and the leader folds them in bounded rounds. The
reconcile round recounts one queue in a REPEATABLE READ transaction: the recount and the
counters are read from one snapshot, so their difference is exactly the drift, and the
correction is appended as a delta — it commutes with whatever commits meanwhile.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from datetime import datetime
from importlib import resources
from typing import TYPE_CHECKING

import asyncpg

from duetime.store.counters import CountKey, Reconciled, corrections, queue_stats_from
from duetime.store.postgres.sql import parse_queries
from duetime.types import QueueStats, StatusCount, TaskStatus

if TYPE_CHECKING:
    from asyncpg.pool import PoolConnectionProxy

    Conn = PoolConnectionProxy[asyncpg.Record]

CQ: dict[str, str] = parse_queries(
    resources.files(__package__).joinpath("counters.sql").read_text(encoding="utf-8")
)
"""The named queries of ``counters.sql``."""

_STATUS = {s.value: s for s in TaskStatus}


class CounterOps:
    """Count-reading and count-keeping methods (a mixin: the store provides connections and the
    pinned time)."""

    def _pinned(self) -> datetime | None:
        raise NotImplementedError

    def _connection(self) -> AbstractAsyncContextManager[Conn]:
        raise NotImplementedError

    async def task_count_by_status(self) -> list[StatusCount]:
        async with self._connection() as conn:
            found = await conn.fetch(CQ["counts_all"])
        return [
            StatusCount(
                tenant_id=r["tenant_id"],
                queue=r["queue"],
                status=_STATUS[r["status"]],
                count=r["n"],
            )
            for r in found
        ]

    async def queue_stats(self, tenant_id: str, name: str | None = None) -> list[QueueStats]:
        async with self._connection() as conn, conn.transaction(isolation="repeatable_read"):
            counts = await conn.fetch(CQ["counts_of_tenant"], tenant_id, name)
            lags = await conn.fetch(CQ["oldest_ready"], self._pinned(), tenant_id, name)
        return queue_stats_from(
            tenant_id,
            ((r["queue"], r["status"], r["n"]) for r in counts),
            {r["queue"]: r["lag"] for r in lags},
        )

    async def task_counts_fold(self, limit: int) -> int:
        async with self._connection() as conn, conn.transaction():
            folded: int = await conn.fetchval(CQ["counts_fold"], limit)
            await conn.execute(CQ["counts_drop_zeros"])
        return folded

    async def task_counts_reconcile(
        self, after: CountKey | None, max_rows: int
    ) -> Reconciled | None:
        key: CountKey | None = None
        async with self._connection() as conn:
            try:
                async with conn.transaction(isolation="repeatable_read"):
                    row = await conn.fetchrow(
                        CQ["counts_next_key"],
                        None if after is None else after.tenant_id,
                        None if after is None else after.queue,
                    )
                    if row is None:
                        return None
                    key = CountKey(row["tenant_id"], row["queue"])
                    return await _recount(conn, key, max_rows)
            except asyncpg.QueryCanceledError:  # over the recount's time budget
                assert key is not None
                return Reconciled(key, 0, skipped=True)


async def _recount(conn: Conn, key: CountKey, max_rows: int) -> Reconciled:
    """Inside a REPEATABLE READ transaction: compare and correct one queue's counts."""
    await conn.execute(CQ["counts_recount_timeout"])
    real = {
        r["status"]: r["n"]
        for r in await conn.fetch(CQ["counts_real"], key.tenant_id, key.queue, max_rows)
    }
    if sum(real.values()) > max_rows:
        return Reconciled(key, 0, skipped=True)
    counted = {
        r["status"]: r["n"]
        for r in await conn.fetch(CQ["counts_of_tenant"], key.tenant_id, key.queue)
    }
    fix = corrections(real, counted)
    if fix:
        await conn.execute(
            CQ["counts_correct"], key.tenant_id, key.queue, list(fix), list(fix.values())
        )
    return Reconciled(key, sum(abs(d) for d in fix.values()))
