"""Lease lookups of the SQLite store (queue settings and workers are in
:mod:`duetime.store.core.queueing`; claims, limited queues' included, in :mod:`.hot`).

The transaction function runs on the store's database thread inside a transaction the caller
opened; :class:`QueueOps` is the store's mixin that runs it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from importlib import resources
from typing import TypeVar

from duetime.store.sqlite.queries import parse_queries
from duetime.store.sqlite.rows import dumps, lease_from_row
from duetime.types import Lease

QQ: dict[str, str] = parse_queries(
    resources.files(__package__).joinpath("queues.sql").read_text(encoding="utf-8")
)
"""The named queries of ``queues.sql``."""

T = TypeVar("T")


def task_leases_get(
    conn: sqlite3.Connection, now: int, lease_ids: Sequence[str], tenant_id: str | None
) -> dict[str, Lease]:
    if not lease_ids:
        return {}
    found = conn.execute(
        QQ["task_leases_get"], {"lease_ids": dumps(list(lease_ids)), "tenant_id": tenant_id}
    )
    leases = (lease_from_row(row) for row in found)
    return {lease.lease_id: lease for lease in leases}


class QueueOps:
    """Lease-lookup methods of :class:`~duetime.store.sqlite.backend.SqliteStore` (which
    provides ``_read``: one transaction on its database thread)."""

    async def _read(self, body: Callable[[sqlite3.Connection, int], T]) -> T:
        raise NotImplementedError

    async def task_leases_get(
        self, lease_ids: Sequence[str], *, tenant_id: str | None = None
    ) -> dict[str, Lease]:
        ids = sorted(set(lease_ids))
        return await self._read(lambda conn, now: task_leases_get(conn, now, ids, tenant_id))
