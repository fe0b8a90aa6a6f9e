"""Leadership leases (one row per name in ``leaders``): one transaction function each.

Runs on the store's database thread inside a write transaction the caller opened; ``now`` is the
store's now in microseconds. A holder keeps the name until its ``expires_at`` passes; only then,
or after it resigns, may another node take it.
"""

from __future__ import annotations

import sqlite3

from duetime.store.sqlite.queries import QUERIES as Q
from duetime.store.sqlite.rows import seconds_to_micros


def leader_attempt_elect(
    conn: sqlite3.Connection, now: int, name: str, node_id: str, ttl_seconds: float
) -> bool:
    """Take or renew leadership ``name`` unless another node holds an unexpired claim."""
    row = conn.execute(
        Q["leader_elect"],
        {
            "name": name,
            "node_id": node_id,
            "now": now,
            "expires_at": now + seconds_to_micros(ttl_seconds),
        },
    ).fetchone()
    return row is not None and bool(row["node_id"] == node_id)


def leader_resign(conn: sqlite3.Connection, now: int, name: str, node_id: str) -> None:
    conn.execute(Q["leader_resign"], {"name": name, "node_id": node_id})
