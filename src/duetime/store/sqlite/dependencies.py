"""What a parent's end does to its dependents (``depends_on``), inside the caller's transaction.

A child waits ``blocked`` with ``pending_parents`` = parents not yet succeeded. Each parent that
succeeds releases it by one; at zero it becomes ``ready`` (or ``scheduled`` if its ``run_at`` is
ahead). A parent that fails or is cancelled fails every blocked descendant, transitively.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection

from duetime.store.sqlite.queries import QUERIES as Q
from duetime.store.sqlite.rows import dumps
from duetime.store.sqlite.signals import Wakeups


def release_dependents(conn: sqlite3.Connection, now: int, parent_id: str, wake: Wakeups) -> None:
    """``parent_id`` succeeded: count it off each blocked child, releasing those with none left."""
    for row in conn.execute(Q["task_release_dependents"], {"now": now, "parent_id": parent_id}):
        if row["status"] == "ready":
            wake.ready = True
        elif row["status"] == "scheduled":
            wake.due = True


def fail_dependents(conn: sqlite3.Connection, now: int, parent_ids: Collection[str]) -> int:
    """``parent_ids`` failed or were cancelled: fail every blocked descendant. Returns how many."""
    if not parent_ids:
        return 0
    rows = conn.execute(
        Q["task_fail_dependents"], {"now": now, "parent_ids": dumps(list(parent_ids))}
    ).fetchall()
    return len(rows)
