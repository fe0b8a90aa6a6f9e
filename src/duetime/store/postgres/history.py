"""History on PostgreSQL, the part that is not a plan (the rest: :mod:`duetime.store.core.history`).

``history_month_rows`` reads a month in keyset pages whose statement depends on where the page
before ended (the name index read forwards, history_export.sql), which a plan cannot express.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from datetime import date
from typing import TYPE_CHECKING, Any

import asyncpg

from duetime.history.partitions import month_bounds
from duetime.store.core.history import PENDING_BATCH
from duetime.store.sql import load

if TYPE_CHECKING:
    from asyncpg.pool import PoolConnectionProxy

    Conn = PoolConnectionProxy[asyncpg.Record]

EXPORT = load(__package__ or "duetime.store.postgres", "postgres", "history_export.sql")
"""The month export's pages (not plans, so not in ``duetime.store.sql.PLAN_FILES``)."""


class PgHistory:
    """PostgreSQL's ``history_month_rows`` (a mixin: the store provides connections)."""

    def _connection(self) -> AbstractAsyncContextManager[Conn]:
        raise NotImplementedError

    if TYPE_CHECKING:  # HistoryMethods' (after this class in the store's bases)

        async def history_pending_move(self, limit: int) -> int: ...

    async def history_month_rows(
        self, month: date, batch: int
    ) -> AsyncIterator[list[dict[str, Any]]]:
        """Every hot record of ``month`` as column → value (JSON columns as text), grouped by
        tenant, then name, each name's by time, in lists of up to ``batch``: keyset pages, each
        its own statement (history_export.sql; a month that ended is not written any more), once
        every pending record has been moved into the history table."""
        lo, hi = month_bounds(month)
        # The pages read the month's partition: first the records still pending go there (a
        # record a concurrent mover holds is counted by history_month_counts, so an export that
        # missed it is refused and made again).
        while await self.history_pending_move(PENDING_BATCH):
            pass
        last: dict[str, Any] | None = None
        while True:
            async with self._connection() as conn:
                if last is None:
                    found = await _page(conn, "history_month_first", lo=lo, hi=hi, limit=batch)
                else:
                    suffix = "" if last["name"] is not None else "_null"
                    key = {"tenant_id": last["tenant_id"], "name": last["name"]}
                    found = await _page(
                        conn, f"history_month_group{suffix}", lo=lo, hi=hi, limit=batch,
                        at=last["at"], id=last["id"], **key,
                    )  # fmt: skip
                    if len(found) < batch:
                        found += await _page(
                            conn, f"history_month_after{suffix}", lo=lo, hi=hi,
                            limit=batch - len(found), **key,
                        )  # fmt: skip
            if not found:
                return
            yield found
            last = found[-1]


async def _page(conn: Conn, statement: str, **params: Any) -> list[dict[str, Any]]:
    query = EXPORT[statement]
    return [dict(r) for r in await conn.fetch(query.text, *(params[n] for n in query.names))]
