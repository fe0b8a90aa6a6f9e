"""Queue-aware claims and lease lookups of :class:`~duetime.store.postgres.backend.PostgresStore`
(queue settings and workers are in :mod:`duetime.store.core.queueing`).

Contracts are those of :mod:`duetime.store.protocols`. How claims keep queue settings:

* Every claim statement (``queries.sql``) skips tasks whose queue row is ``paused`` or has a
  ``max_concurrency``: one primary-key probe of the tiny ``queues`` table per candidate, read in
  the claim's own snapshot, so a pause is honoured by the next claim on every node.
* Limited queues are then claimed on a locked path, one transaction per queue:
  ``SELECT ... FOR UPDATE`` on the queue's row, then a claim whose ``LIMIT`` is the room left
  (``max_concurrency`` minus the queue's running tasks). The row lock serializes claimers of that
  queue, and the claim, a later statement under READ COMMITTED, counts with a snapshot taken
  after the previous holder committed, so concurrent claimers never overshoot the limit.
* Which queues are limited is cached per store for :data:`LIMITED_CACHE_SECONDS` (and dropped
  by this store's :meth:`queue_put`), so queues without limits cost no extra round trip. A limit
  set through another node is honoured at once (the claim statements skip the queue), and its
  tasks flow through the locked path here within the cache's lifetime.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from importlib import resources
from typing import TYPE_CHECKING

import asyncpg

from duetime.ids import is_uuid
from duetime.store.postgres import rows
from duetime.store.postgres.sql import parse_queries
from duetime.store.postgres.tasks import TaskOps
from duetime.types import ClaimRequest, Lease, TargetType

if TYPE_CHECKING:
    from asyncpg.pool import PoolConnectionProxy

    Conn = PoolConnectionProxy[asyncpg.Record]

QQ: dict[str, str] = parse_queries(
    resources.files(__package__).joinpath("queues.sql").read_text(encoding="utf-8")
)
"""The named queries of ``queues.sql``."""

LIMITED_CACHE_SECONDS = 1.0
"""How long a store trusts its list of queues with a ``max_concurrency``."""

_WORKER_ONLY = frozenset({TargetType.WORKER})


class QueueOps(TaskOps):
    """Lease-lookup methods; extends the task methods with queue-aware claims.
    A mixin like :class:`TaskOps`: the store provides connections and the pinned time."""

    # Class-level defaults: the store's __init__ need not know about the cache.
    _limited_at: float = -math.inf
    _limited: tuple[tuple[str, str], ...] = ()
    # A recount over its time budget (counts_recount_budget) is cancelled: that round skips it.
    _over_budget: tuple[type[BaseException], ...] = (asyncpg.QueryCanceledError,)

    def _queues_changed(self) -> None:
        """After ``queue_put``: drop this store's cache of limited queues."""
        self._limited_at = -math.inf

    async def _limited_queues(self) -> tuple[tuple[str, str], ...]:
        """(tenant, name) of every queue with a limit and not paused; cached briefly."""
        if time.monotonic() - self._limited_at > LIMITED_CACHE_SECONDS:
            async with self._connection() as conn:
                found = await conn.fetch(QQ["queue_limited_all"])
            self._limited = tuple((r["tenant_id"], r["name"]) for r in found)
            self._limited_at = time.monotonic()
        return self._limited

    # -- claims --------------------------------------------------------------------------------

    async def task_claim(self, request: ClaimRequest) -> list[Lease]:
        """Claim from queues without limits in one statement (paused and limited queues
        skipped), then from limited queues on the locked path while room is left."""
        leases = await super().task_claim(request)
        room = request.limit - len(leases)
        if room <= 0 or not request.target_types:
            return leases
        wanted = [
            (tenant, name)
            for tenant, name in await self._limited_queues()
            if (request.tenant_id is None or tenant == request.tenant_id)
            and (request.queue is None or name == request.queue)
        ]
        if not wanted:
            return leases
        types = sorted(t.value for t in request.target_types)
        names = None if request.names is None else list(request.names)
        # Lock only queues that have something to claim: one cheap read first.
        if request.target_types == _WORKER_ONLY:
            probe = QQ["queue_limited_ready_worker"]
        elif TargetType.WORKER not in request.target_types:
            probe = QQ["queue_limited_ready_push"]
        else:
            probe = QQ["queue_limited_ready"]
        async with self._connection() as conn:
            found = await conn.fetch(
                probe, [tenant for tenant, _ in wanted], [name for _, name in wanted], types, names
            )
        wanted = sorted((r["tenant_id"], r["name"]) for r in found)
        for tenant, name in wanted:
            if room <= 0:
                break
            got = await self._claim_limited(request, types, names, tenant, name, room)
            leases.extend(got)
            room -= len(got)
        return leases

    async def _claim_limited(
        self,
        request: ClaimRequest,
        types: list[str],
        names: list[str] | None,
        tenant: str,
        queue: str,
        room: int,
    ) -> list[Lease]:
        if request.target_types == _WORKER_ONLY:
            query = QQ["task_claim_limited_worker"]
        elif TargetType.WORKER not in request.target_types:
            query = QQ["task_claim_limited_push"]
        else:
            query = QQ["task_claim_limited"]
        lease_seconds = None if request.lease_seconds is None else float(request.lease_seconds)
        async with self._transaction() as conn:
            limit = await conn.fetchval(QQ["queue_lock"], tenant, queue)
            if limit is None:  # resumed, unlimited or paused since the cache was filled
                return []
            found = await conn.fetch(
                query,
                self._pinned(),
                types,
                queue,
                names,
                room,
                lease_seconds,
                float(request.lease_grace_seconds),
                request.worker_id,
                tenant,
                limit,
            )
        leases = [rows.lease_from_row(r) for r in found]
        leases.sort(key=lambda lease: (-lease.task.priority, lease.task.due_at))
        return leases

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
