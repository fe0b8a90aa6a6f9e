"""Queues, pull workers and lease lookups of :class:`~duetime.store.postgres.backend.PostgresStore`.

Contracts are those of :mod:`duetime.store.protocols`. How claims keep queue settings:

* Every claim statement (``queries.sql``) skips tasks whose queue row is ``paused`` or has a
  ``max_concurrency``: one primary-key probe of the tiny ``queues`` table per candidate, read in
  the claim's own snapshot, so a pause is honoured by the next claim on every node.
* Limited queues are then claimed on a locked path, one transaction per queue:
  ``SELECT ... FOR UPDATE`` on the queue's row, then a claim whose ``LIMIT`` is the room left
  (``max_concurrency`` minus the queue's running tasks). The row lock serializes claimers of that
  queue, and the claim, a later statement under READ COMMITTED, counts with a snapshot taken
  after the previous holder committed, so concurrent claimers never overshoot the limit.
* Which queues are limited is cached per store for :data:`.hot.LIMITED_CACHE_SECONDS` (and dropped
  by this store's :meth:`queue_put`), so queues without limits cost no extra round trip. A limit
  set through another node is honoured at once (the claim statements skip the queue), and its
  tasks flow through the locked path here within the cache's lifetime.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from importlib import resources
from typing import TYPE_CHECKING

import asyncpg

from duetime.ids import is_uuid
from duetime.store.postgres import rows
from duetime.store.postgres.hot import PgHot
from duetime.store.postgres.sql import parse_queries
from duetime.types import (
    Lease,
    Queue,
    QueueSettings,
    TargetType,
    TaskStatus,
    WorkerInfo,
)

if TYPE_CHECKING:
    from asyncpg.pool import PoolConnectionProxy

    Conn = PoolConnectionProxy[asyncpg.Record]

QQ: dict[str, str] = parse_queries(
    resources.files(__package__).joinpath("queues.sql").read_text(encoding="utf-8")
)
"""The named queries of ``queues.sql``."""

WORKER_RETENTION_SECONDS = 7 * 86400.0
"""Workers not seen for this long are forgotten (when a new worker of the tenant shows up)."""

MAX_WORKER_QUEUES = 64
_STATUS = {s.value: s for s in TaskStatus}
_WORKER_ONLY = frozenset({TargetType.WORKER})


def _queue_from_row(r: asyncpg.Record) -> Queue:
    return Queue(
        tenant_id=r["tenant_id"],
        name=r["name"],
        settings=QueueSettings(
            rate_limit_per_second=r["rate_limit_per_second"],
            burst=r["burst"],
            max_concurrency=r["max_concurrency"],
            max_concurrency_per_key=r["max_concurrency_per_key"],
            paused=r["paused"],
        ),
        updated_at=r["updated_at"],
    )


class QueueOps(PgHot):
    """Queue, worker and lease-lookup methods; extends the task methods with queue-aware claims.
    A mixin like :class:`.hot.PgHot`: the store provides connections and the pinned time."""

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

    # -- queues --------------------------------------------------------------------------------

    async def queue_put(self, tenant_id: str, name: str, settings: QueueSettings) -> Queue:
        """Create or replace the queue's settings; this store's limit cache is dropped."""
        async with self._connection() as conn:
            row = await conn.fetchrow(
                QQ["queue_put"],
                self._pinned(),
                tenant_id,
                name,
                settings.rate_limit_per_second,
                settings.burst,
                settings.max_concurrency,
                settings.max_concurrency_per_key,
                settings.paused,
            )
        self._limited_at = -math.inf
        assert row is not None
        # Resuming or raising a limit may let waiting tasks run: wake the claimers.
        self.ready_signal.notify()
        return _queue_from_row(row)

    async def queue_get(self, tenant_id: str, name: str) -> Queue | None:
        async with self._connection() as conn:
            row = await conn.fetchrow(QQ["queue_get"], tenant_id, name)
        return None if row is None else _queue_from_row(row)

    async def queue_list(self, tenant_id: str) -> list[Queue]:
        async with self._connection() as conn:
            found = await conn.fetch(QQ["queue_list"], tenant_id)
        return [_queue_from_row(r) for r in found]

    # -- workers -------------------------------------------------------------------------------

    async def worker_seen(self, tenant_id: str, worker_id: str, queues: Sequence[str]) -> None:
        pinned = self._pinned()
        names = sorted(set(queues))[:MAX_WORKER_QUEUES]
        async with self._connection() as conn:
            inserted = await conn.fetchval(QQ["worker_seen"], pinned, tenant_id, worker_id, names)
            if inserted:
                await conn.execute(QQ["worker_prune"], pinned, tenant_id, WORKER_RETENTION_SECONDS)

    async def worker_list(self, tenant_id: str, live_within_seconds: float) -> list[WorkerInfo]:
        async with self._connection() as conn:
            found = await conn.fetch(
                QQ["worker_list"], self._pinned(), tenant_id, float(live_within_seconds)
            )
        return [
            WorkerInfo(
                tenant_id=tenant_id,
                worker_id=r["worker_id"],
                queues=tuple(r["queues"]),
                first_seen_at=r["first_seen_at"],
                last_seen_at=r["last_seen_at"],
                leases=r["leases"],
            )
            for r in found
        ]
