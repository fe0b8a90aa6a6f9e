"""History on PostgreSQL, the part that is not a plan (the rest: :mod:`duetime.store.core.history`).

``history_month_rows`` streams a month through a server-side cursor in one transaction (one
snapshot, the name index read backwards), which a plan cannot: it would have to keep its
transaction open across the consumer's awaits.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from datetime import date
from typing import TYPE_CHECKING, Any

import asyncpg

from duetime.history.partitions import month_bounds
from duetime.store.sql import load

if TYPE_CHECKING:
    from asyncpg.pool import PoolConnectionProxy

    Conn = PoolConnectionProxy[asyncpg.Record]

EXPORT = load(__package__ or "duetime.store.postgres", "postgres", "history_export.sql")
"""The month export's statement (a cursor's, so not in ``duetime.store.sql.PLAN_FILES``)."""


class PgHistory:
    """PostgreSQL's ``history_month_rows`` (a mixin: the store provides connections)."""

    def _connection(self) -> AbstractAsyncContextManager[Conn]:
        raise NotImplementedError

    def _transaction(self) -> AbstractAsyncContextManager[Conn]:
        raise NotImplementedError

    async def history_month_rows(
        self, month: date, batch: int
    ) -> AsyncIterator[list[dict[str, Any]]]:
        """Every hot record of ``month`` as column → value (JSON columns as text), grouped by
        tenant, then name, each name's by time, in lists of up to ``batch`` (one snapshot, a
        server-side cursor)."""
        lo, hi = month_bounds(month)
        query = EXPORT["history_month_rows"]
        bounds = {"lo": lo, "hi": hi}
        async with self._transaction() as conn:
            cursor = await conn.cursor(query.text, *(bounds[name] for name in query.names))
            while found := await cursor.fetch(batch):
                yield [dict(r) for r in found]
