"""Queues, pull workers and lease lookups of the SQLite store, and its queue-aware claim.

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
from typing import TypeVar

import orjson

from duetime.store.sqlite.queries import parse_queries
from duetime.store.sqlite.rows import (
    Row,
    dumps,
    from_micros,
    lease_from_row,
    seconds_to_micros,
)
from duetime.store.sqlite.signals import LocalSignal
from duetime.types import (
    Lease,
    Queue,
    QueueSettings,
    TargetType,
    TaskStatus,
    WorkerInfo,
)

QQ: dict[str, str] = parse_queries(
    resources.files(__package__).joinpath("queues.sql").read_text(encoding="utf-8")
)
"""The named queries of ``queues.sql``."""

WORKER_RETENTION_SECONDS = 7 * 86400.0
"""Workers not seen for this long are forgotten (when a new worker of the tenant shows up)."""

MAX_WORKER_QUEUES = 64
_STATUS = {s.value: s for s in TaskStatus}
_WORKER_ONLY = frozenset({TargetType.WORKER})

T = TypeVar("T")


# -- transaction functions ---------------------------------------------------------------------


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


def _queue_from_row(row: Row) -> Queue:
    return Queue(
        tenant_id=row["tenant_id"],
        name=row["name"],
        settings=QueueSettings(
            rate_limit_per_second=row["rate_limit_per_second"],
            burst=row["burst"],
            max_concurrency=row["max_concurrency"],
            max_concurrency_per_key=row["max_concurrency_per_key"],
            paused=bool(row["paused"]),
        ),
        updated_at=from_micros(row["updated_at"]),
    )


def queue_put(
    conn: sqlite3.Connection, now: int, tenant_id: str, name: str, settings: QueueSettings
) -> Queue:
    row = conn.execute(
        QQ["queue_put"],
        {
            "tenant_id": tenant_id,
            "name": name,
            "rate_limit_per_second": settings.rate_limit_per_second,
            "burst": settings.burst,
            "max_concurrency": settings.max_concurrency,
            "max_concurrency_per_key": settings.max_concurrency_per_key,
            "paused": int(settings.paused),
            "now": now,
        },
    ).fetchone()
    return _queue_from_row(row)


def queue_get(conn: sqlite3.Connection, now: int, tenant_id: str, name: str) -> Queue | None:
    row = conn.execute(QQ["queue_get"], {"tenant_id": tenant_id, "name": name}).fetchone()
    return None if row is None else _queue_from_row(row)


def queue_list(conn: sqlite3.Connection, now: int, tenant_id: str) -> list[Queue]:
    return [_queue_from_row(r) for r in conn.execute(QQ["queue_list"], {"tenant_id": tenant_id})]


def worker_seen(
    conn: sqlite3.Connection, now: int, tenant_id: str, worker_id: str, queues: Sequence[str]
) -> None:
    names = sorted(set(queues))[:MAX_WORKER_QUEUES]
    row = conn.execute(
        QQ["worker_seen"],
        {"tenant_id": tenant_id, "worker_id": worker_id, "queues": dumps(names), "now": now},
    ).fetchone()
    if row["first_seen_at"] == now:  # a new worker: forget the tenant's long-gone ones
        before = now - seconds_to_micros(WORKER_RETENTION_SECONDS)
        conn.execute(QQ["worker_prune"], {"tenant_id": tenant_id, "before": before})


def worker_list(
    conn: sqlite3.Connection, now: int, tenant_id: str, live_within_seconds: float
) -> list[WorkerInfo]:
    since = now - seconds_to_micros(live_within_seconds)
    return [
        WorkerInfo(
            tenant_id=tenant_id,
            worker_id=row["worker_id"],
            queues=tuple(orjson.loads(row["queues"])),
            first_seen_at=from_micros(row["first_seen_at"]),
            last_seen_at=from_micros(row["last_seen_at"]),
            leases=row["leases"],
        )
        for row in conn.execute(QQ["worker_list"], {"tenant_id": tenant_id, "since": since})
    ]


# -- the store's mixin -------------------------------------------------------------------------


class QueueOps:
    """Queue, worker and lease-lookup methods of :class:`~duetime.store.sqlite.backend.
    SqliteStore` (which provides ``_read``/``_write``: one transaction on its database thread)."""

    ready_signal: LocalSignal

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

    async def queue_put(self, tenant_id: str, name: str, settings: QueueSettings) -> Queue:
        queue = await self._write(lambda conn, now: queue_put(conn, now, tenant_id, name, settings))
        # Resuming or raising a limit may let waiting tasks run: wake the claimers.
        self.ready_signal.notify()
        return queue

    async def queue_get(self, tenant_id: str, name: str) -> Queue | None:
        return await self._read(lambda conn, now: queue_get(conn, now, tenant_id, name))

    async def queue_list(self, tenant_id: str) -> list[Queue]:
        return await self._read(lambda conn, now: queue_list(conn, now, tenant_id))

    async def worker_seen(self, tenant_id: str, worker_id: str, queues: Sequence[str]) -> None:
        names = list(queues)
        await self._write(lambda conn, now: worker_seen(conn, now, tenant_id, worker_id, names))

    async def worker_list(self, tenant_id: str, live_within_seconds: float) -> list[WorkerInfo]:
        return await self._read(
            lambda conn, now: worker_list(conn, now, tenant_id, live_within_seconds)
        )
