"""History on SQLite, the part that is not a plan (the rest: :mod:`duetime.store.core.history`).

``history_month_rows`` reads a month in keyset pages, each in its own read transaction: the one
connection cannot keep a read open across the consumer's awaits while it serves writes.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Callable
from datetime import date
from typing import Any, TypeVar

import orjson

from duetime.history.partitions import month_bounds
from duetime.store.core.rows import history_fields
from duetime.store.sql import load
from duetime.store.sqlite.driver import SqliteDecode
from duetime.store.sqlite.rows import from_micros, to_micros

T = TypeVar("T")

EXPORT = load(__package__ or "duetime.store.sqlite", "sqlite", "history_export.sql")
"""The month export's page (PostgreSQL streams a cursor instead, so not in
``duetime.store.sql.PLAN_FILES``)."""


def _page(where: dict[str, Any], conn: sqlite3.Connection) -> list[dict[str, Any]]:
    found = []
    for r in conn.execute(EXPORT["history_month_rows"].text, where):
        row = dict(r)
        row["at"], row["started_at"] = from_micros(r["at"]), SqliteDecode.opt_time(r["started_at"])
        if r["fields"]:  # as PostgreSQL's export has them
            row["fields"] = orjson.dumps(history_fields(r["fields"], SqliteDecode)).decode()
        found.append(row)
    return found


class SqliteHistory:
    """SQLite's ``history_month_rows`` (a mixin: the store provides ``_read``)."""

    async def _read(self, body: Callable[[sqlite3.Connection, int], T]) -> T:
        raise NotImplementedError

    async def history_month_rows(
        self, month: date, batch: int
    ) -> AsyncIterator[list[dict[str, Any]]]:
        """Every hot record of ``month`` as column → value (JSON columns as text), grouped by
        tenant, then name, each name's by time, in lists of up to ``batch``."""
        lo, hi = month_bounds(month)
        where: dict[str, Any] = {"lo": to_micros(lo), "hi": to_micros(hi), "limit": batch}
        where.update(tenant_id="", name="", at=-(2**62), id=-1)
        while found := await self._read(lambda conn, now: _page(dict(where), conn)):
            yield found
            last = found[-1]
            where.update(
                tenant_id=last["tenant_id"], name=last["name"] or "", at=to_micros(last["at"]),
                id=last["id"],
            )  # fmt: skip
