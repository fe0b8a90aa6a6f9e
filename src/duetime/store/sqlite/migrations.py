"""Schema migrations: ``migrations/NNNN_slug.sql`` files applied in order, each recorded in
``schema_migrations`` under its file stem (``0001_init``).

``migrate`` applies every pending file and the bookkeeping in ONE write transaction (SQLite's DDL
is transactional), so a crash leaves the schema either before or after, never half-way, and two
processes migrating at once serialize on the write lock: the second finds nothing to do.
"""

from __future__ import annotations

import re
import sqlite3
from importlib import resources

from duetime.store.sqlite.queries import QUERIES as Q

_FILE_NAME = re.compile(r"^\d{4}_[a-z0-9_]+\.sql$")


def available() -> dict[str, str]:
    """Every migration shipped with this package: version → script, in order."""
    folder = resources.files(__package__).joinpath("migrations")
    scripts = {
        entry.name.removesuffix(".sql"): entry.read_text(encoding="utf-8")
        for entry in folder.iterdir()
        if _FILE_NAME.match(entry.name)
    }
    return dict(sorted(scripts.items()))


def applied(conn: sqlite3.Connection) -> set[str]:
    """Versions recorded as applied (none when the bookkeeping table does not exist yet)."""
    if conn.execute(Q["schema_migrations_exists"]).fetchone() is None:
        return set()
    return {row["version"] for row in conn.execute(Q["schema_migrations_list"])}


def pending(conn: sqlite3.Connection) -> list[str]:
    done = applied(conn)
    return [version for version in available() if version not in done]


def migrate(conn: sqlite3.Connection, now: int) -> list[str]:
    """Apply pending migrations inside the caller's write transaction; returns their versions."""
    conn.execute(Q["schema_migrations_create"])
    done = applied(conn)
    ran: list[str] = []
    for version, script in available().items():
        if version in done:
            continue
        for statement in split_statements(script):
            conn.execute(statement)
        conn.execute(Q["schema_migrations_insert"], {"version": version, "now": now})
        ran.append(version)
    return ran


def split_statements(script: str) -> list[str]:
    """Split a script into complete statements (``sqlite3.complete_statement`` knows about
    strings, comments and trigger bodies); a trailing comment-only remainder is dropped."""
    statements: list[str] = []
    buffer = ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            statements.append(buffer.strip())
            buffer = ""
    leftover = "\n".join(
        line for line in buffer.splitlines() if line.strip() and not line.strip().startswith("--")
    )
    if leftover:
        raise ValueError(f"migration ends with an incomplete statement: {leftover[:80]!r}")
    return statements
