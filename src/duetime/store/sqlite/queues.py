"""Lease lookups of the SQLite store, and its queue-aware claim (queue settings and workers are
in :mod:`duetime.store.core.queueing`).

The transaction functions run on the store's database thread inside a transaction the caller
opened (``now`` in microseconds); :class:`QueueOps` is the store's mixin that runs them. SQLite
has one writer, so a claim is simply: the claim statement of ``queries.sql`` (which skips paused
and limited queues), then, in the same write transaction, each limited queue within its room
(``max_concurrency`` minus its running tasks). Nobody can claim in between.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from importlib import resources
from typing import Any, TypeVar

from duetime.store.sqlite import tasks_engine
from duetime.store.sqlite.queries import parse_queries
from duetime.store.sqlite.rows import dumps, lease_from_row, seconds_to_micros
from duetime.types import ClaimRequest, Lease, TargetType

QQ: dict[str, str] = parse_queries(
    resources.files(__package__).joinpath("queues.sql").read_text(encoding="utf-8")
)
"""The named queries of ``queues.sql``."""

_WORKER_ONLY = frozenset({TargetType.WORKER})

T = TypeVar("T")


# -- transaction functions ---------------------------------------------------------------------


def task_claim(conn: sqlite3.Connection, now: int, request: ClaimRequest) -> list[Lease]:
    """Claim from queues without limits, then from each limited queue within its room."""
    leases = tasks_engine.task_claim(conn, now, request)
    room = request.limit - len(leases)
    if room <= 0 or not request.target_types:
        return leases
    types = dumps(sorted(str(t) for t in request.target_types))
    names = None if request.names is None else dumps(list(request.names))
    where = {"tenant_id": request.tenant_id, "queue": request.queue}
    if TargetType.WORKER in request.target_types:
        limited = conn.execute(QQ["queue_limited"], where).fetchall()
    else:  # the dispatcher: only limited queues with ready push tasks
        where |= {"types": types, "names": names}
        limited = conn.execute(QQ["queue_limited_ready_push"], where).fetchall()
    if not limited:
        return leases
    params: dict[str, Any] = {
        "now": now,
        "lease_us": None
        if request.lease_seconds is None
        else seconds_to_micros(request.lease_seconds),
        "grace_us": seconds_to_micros(request.lease_grace_seconds),
        "worker_id": request.worker_id,
        "names": names,
        "types": types,
    }
    query = (
        QQ["task_claim_limited_worker"]
        if request.target_types == _WORKER_ONLY
        else QQ["task_claim_limited"]
    )
    for queue in limited:
        if room <= 0:
            break
        one = {"tenant_id": queue["tenant_id"], "queue": queue["name"]}
        running = conn.execute(QQ["queue_running"], one).fetchone()["n"]
        limit = min(room, queue["max_concurrency"] - running)
        if limit <= 0:
            continue
        found = conn.execute(query, {**params, **one, "limit": limit}).fetchall()
        found.sort(key=lambda row: (-row["priority"], row["due_at"], row["claim_rowid"]))
        leases.extend(lease_from_row(row) for row in found)
        room -= len(found)
    return leases


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


# -- the store's mixin -------------------------------------------------------------------------


class QueueOps:
    """Lease-lookup methods of :class:`~duetime.store.sqlite.backend.
    SqliteStore` (which provides ``_read``/``_write``: one transaction on its database thread)."""

    async def _read(self, body: Callable[[sqlite3.Connection, int], T]) -> T:
        raise NotImplementedError

    async def _write(
        self, body: Callable[[sqlite3.Connection, int], T], *, integrity_retries: int = 0
    ) -> T:
        raise NotImplementedError

    async def task_leases_get(
        self, lease_ids: Sequence[str], *, tenant_id: str | None = None
    ) -> dict[str, Lease]:
        ids = sorted(set(lease_ids))
        return await self._read(lambda conn, now: task_leases_get(conn, now, ids, tenant_id))
