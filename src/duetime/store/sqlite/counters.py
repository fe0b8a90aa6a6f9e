"""Maintained task counts of :class:`~duetime.store.sqlite.backend.SqliteStore` (the rules are in
:mod:`duetime.store.counters`; the row triggers in ``migrations/0004_counters.sql``). Each
function is one transaction body run on the database thread: ``(connection, now µs, ...)``."""

from __future__ import annotations

import sqlite3
from importlib import resources

from duetime.store.counters import CountKey, Reconciled, corrections, queue_stats_from
from duetime.store.sqlite.queries import parse_queries
from duetime.types import QueueStats, StatusCount, TaskStatus

CQ: dict[str, str] = parse_queries(
    resources.files(__package__).joinpath("counters.sql").read_text(encoding="utf-8")
)
"""The named queries of ``counters.sql``."""

_STATUS = {s.value: s for s in TaskStatus}


def task_count_by_status(conn: sqlite3.Connection, now: int) -> list[StatusCount]:
    return [
        StatusCount(
            tenant_id=r["tenant_id"], queue=r["queue"], status=_STATUS[r["status"]], count=r["n"]
        )
        for r in conn.execute(CQ["counts_all"])
    ]


def queue_stats(
    conn: sqlite3.Connection, now: int, tenant_id: str, name: str | None
) -> list[QueueStats]:
    where = {"tenant_id": tenant_id, "queue": name}
    counts = [
        (r["queue"], r["status"], r["n"]) for r in conn.execute(CQ["counts_of_tenant"], where)
    ]
    lags = {
        r["queue"]: (now - r["oldest"]) / 1_000_000 for r in conn.execute(CQ["oldest_ready"], where)
    }
    return queue_stats_from(tenant_id, counts, lags)


def task_counts_fold(conn: sqlite3.Connection, now: int) -> int:
    """The triggers write the totals directly: nothing to fold, only rows at 0 to drop."""
    conn.execute(CQ["counts_drop_zeros"])
    return 0


def task_counts_reconcile(
    conn: sqlite3.Connection, now: int, after: CountKey | None, max_rows: int
) -> Reconciled | None:
    cursor = {
        "tenant_id": None if after is None else after.tenant_id,
        "queue": None if after is None else after.queue,
    }
    row = conn.execute(CQ["counts_next_key"], cursor).fetchone()
    if row is None:
        return None
    key = CountKey(row["tenant_id"], row["queue"])
    where = {"tenant_id": key.tenant_id, "queue": key.queue}
    real = {
        r["status"]: r["n"]
        for r in conn.execute(CQ["counts_real"], {**where, "max_rows": max_rows})
    }
    if sum(real.values()) > max_rows:
        return Reconciled(key, 0, skipped=True)
    counted = {r["status"]: r["n"] for r in conn.execute(CQ["counts_of_tenant"], where)}
    fix = corrections(real, counted)
    for status, delta in fix.items():
        conn.execute(CQ["counts_correct"], {**where, "status": status, "delta": delta})
    return Reconciled(key, sum(abs(d) for d in fix.values()))
