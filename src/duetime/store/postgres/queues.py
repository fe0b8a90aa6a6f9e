"""Lease lookups of :class:`~duetime.store.postgres.backend.PostgresStore`, and the hook that
keeps its cache of limited queues true (queue settings and workers are in
:mod:`duetime.store.core.queueing`; claims, limited queues' included, in :mod:`.hot`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from importlib import resources

import asyncpg

from duetime.ids import is_uuid
from duetime.store.postgres import rows
from duetime.store.postgres.hot import PgHot
from duetime.store.postgres.sql import parse_queries
from duetime.types import Lease

QQ: dict[str, str] = parse_queries(
    resources.files(__package__).joinpath("queues.sql").read_text(encoding="utf-8")
)
"""The named queries of ``queues.sql``."""


class QueueOps(PgHot):
    """Lease lookups; extends the hot path (a mixin: the store provides connections)."""

    # A recount over its time budget (counts_recount_budget) is cancelled: that round skips it.
    _over_budget: tuple[type[BaseException], ...] = (asyncpg.QueryCanceledError,)

    def _queues_changed(self) -> None:
        """After ``queue_put``: drop this store's cache of limited queues."""
        self._limited_at = -math.inf

    async def task_leases_get(
        self, lease_ids: Sequence[str], *, tenant_id: str | None = None
    ) -> dict[str, Lease]:
        """The current leases among ``lease_ids`` (running under them), optionally one tenant's."""
        wanted = sorted({lid for lid in lease_ids if is_uuid(lid)})
        if not wanted:
            return {}
        async with self._connection() as conn:
            found = await conn.fetch(QQ["task_leases_get"], wanted, tenant_id)
        leases = (rows.lease_from_row(r) for r in found)
        return {lease.lease_id: lease for lease in leases}
