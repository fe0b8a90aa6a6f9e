"""What a parent's end does to its dependents (``depends_on``), inside the caller's transaction
(the rules: :mod:`duetime.store.core.dependencies`)."""

from __future__ import annotations

import sqlite3
from collections.abc import Collection

from duetime.store.core import dependencies
from duetime.store.sqlite import driver
from duetime.store.sqlite.queries import QUERIES as Q
from duetime.store.sqlite.signals import Wakeups


def release_dependents(conn: sqlite3.Connection, now: int, parent_id: str, wake: Wakeups) -> None:
    """``parent_id`` succeeded: count it off each blocked child, releasing those with none left."""
    for row in conn.execute(Q["task_release_dependents"], {"now": now, "parent_id": parent_id}):
        if row["status"] == "ready":
            wake.ready = True
        elif row["status"] == "scheduled":
            wake.due = True


def fail_dependents(conn: sqlite3.Connection, now: int, parent_ids: Collection[str]) -> int:
    """``parent_ids`` failed or were cancelled: :func:`duetime.store.core.dependencies.
    fail_dependents` on this connection (for the callers that are not plans yet)."""
    return driver.run(conn, now, dependencies.fail_dependents(parent_ids))
