"""The hook that keeps the cache of limited queues of
:class:`~duetime.store.postgres.backend.PostgresStore` true (queue settings and workers are in
:mod:`duetime.store.core.queueing`, lease lookups in :mod:`duetime.store.core.tasks`; claims,
limited queues' included, in :mod:`.hot`).
"""

from __future__ import annotations

import math

import asyncpg

from duetime.store.postgres.hot import PgHot


class QueueOps(PgHot):
    """Extends the hot path (a mixin: the store provides connections)."""

    # A recount over its time budget (counts_recount_budget) is cancelled: that round skips it.
    _over_budget: tuple[type[BaseException], ...] = (asyncpg.QueryCanceledError,)

    def _limits_changed(self) -> None:
        """After ``queue_put`` or ``tenant_quotas_put``: drop this store's cache of limited
        queues and tenants."""
        self._limited_at = -math.inf
