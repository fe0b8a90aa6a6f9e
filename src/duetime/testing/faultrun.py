"""The moving parts of one fault-suite run: a burst of tasks made through the API, waiting until
every one of them ended (read from the database, not through a node a fault may have bent), and
the invariant check with its figures recorded for ``docs/reliability.md``.

Creates carry an idempotency key each and are sent again until a node answers 201, so a create
whose answer a fault swallowed is neither lost nor doubled, and "accepted" is exact.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import orjson

from duetime.store.postgres.schema import connect as pg_connect
from duetime.testing import invariants

TERMINAL_SQL = "('succeeded', 'failed', 'cancelled')"


def spread(
    count: int, target: Mapping[str, Any], *, start_in: float, over: float, **fields: Any
) -> list[dict[str, Any]]:
    """``count`` task bodies for ``target``, due evenly from ``start_in`` seconds from now over
    ``over`` seconds, each with its own idempotency key. ``fields`` go into every body."""
    start = datetime.now(UTC) + timedelta(seconds=start_in)
    run = uuid.uuid4().hex[:8]
    return [
        {
            "target": dict(target),
            "payload": {"n": n},
            "run_at": (start + timedelta(seconds=over * n / max(1, count))).isoformat(),
            "idempotency_key": f"fault-{run}-{n}",
            **fields,
        }
        for n in range(count)
    ]


def create_all(
    node_urls: Sequence[str],
    bodies: Sequence[Mapping[str, Any]],
    *,
    chunk: int = 500,
    patience: float = 60.0,
    refused: list[httpx.Response] | None = None,
) -> list[str]:
    """Create every body through the nodes in turn, ``chunk`` per batch call; a batch that is not
    answered 201 (a 503 during a fault, a dropped connection) is sent again to the next node until
    ``patience`` seconds have passed. Answers other than 201 are appended to ``refused``."""
    ids: list[str] = []
    turn = 0
    with httpx.Client(timeout=30) as client:
        for at in range(0, len(bodies), chunk):
            batch = {"tasks": list(bodies[at : at + chunk])}
            deadline = time.monotonic() + patience
            while True:
                url = node_urls[turn % len(node_urls)]
                turn += 1
                try:
                    made = client.post(f"{url}/v1/tasks/batch", json=batch)
                except httpx.HTTPError:
                    made = None
                if made is not None and made.status_code == 201:
                    ids.extend(t["id"] for t in made.json()["items"])
                    break
                if made is not None and refused is not None:
                    refused.append(made)
                if made is not None and made.status_code < 500 and made.status_code != 429:
                    raise AssertionError(f"create refused: {made.status_code} {made.text[:500]}")
                if time.monotonic() > deadline:
                    raise AssertionError(f"no node accepted a batch within {patience}s")
                time.sleep(0.2)
    return ids


async def _pg_open(url: str) -> int:
    conn = await pg_connect(url, timeout=10)
    try:
        found = await conn.fetchval(
            f"SELECT count(*) FROM tasks WHERE status NOT IN {TERMINAL_SQL}"
        )
        return int(found)
    finally:
        await conn.close()


def open_tasks(db: str) -> int:
    """How many tasks of the store at ``db`` (a ``postgresql://`` URL or a SQLite file path) have
    not ended; ``-1`` while the database cannot be read."""
    try:
        if db.startswith("postgresql://"):
            return asyncio.run(_pg_open(db))
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        try:
            query = f"SELECT count(*) FROM tasks WHERE status NOT IN {TERMINAL_SQL}"
            return int(conn.execute(query).fetchone()[0])
        finally:
            conn.close()
    except (OSError, asyncpg.PostgresError, sqlite3.Error):
        return -1


def wait_settled(db: str, timeout: float, diagnose: Callable[[], str] = str) -> None:
    """Wait until every task in the store at ``db`` ended; AssertionError after ``timeout``
    seconds, with ``diagnose()`` (e.g. the nodes' log tails) in the message."""
    deadline = time.monotonic() + timeout
    left = open_tasks(db)
    while left != 0:
        if time.monotonic() > deadline:
            raise AssertionError(f"{left} tasks still open after {timeout}s\n{diagnose()}")
        time.sleep(0.25)
        left = open_tasks(db)


def read_rows(db: str) -> invariants.Stored:
    if db.startswith("postgresql://"):
        return asyncio.run(invariants.read_postgres(db))
    return invariants.read_sqlite(db)


def verify(
    fault: str,
    db: str,
    accepted: Sequence[str],
    deliveries: Mapping[str, Sequence[int]],
    **extra: object,
) -> invariants.Report:
    """Check the invariants for ``accepted`` in the store at ``db``, record the figures (a JSON
    line appended to ``$DUETIME_FAULT_REPORT`` when set, and printed), and fail on a violation."""
    tasks, attempts, history = read_rows(db)
    report = invariants.check(accepted, tasks, attempts, deliveries, history)
    line = {"fault": fault, **extra, **_figures(report)}
    print("fault-report", orjson.dumps(line).decode())
    if sink := os.environ.get("DUETIME_FAULT_REPORT"):
        with Path(sink).open("ab") as out:
            out.write(orjson.dumps(line) + b"\n")
    report.assert_ok()
    return report


def _figures(report: invariants.Report) -> dict[str, object]:
    return {
        "tasks": report.tasks,
        "statuses": report.statuses,
        "outcomes": report.outcomes,
        "deliveries": report.deliveries,
        "duplicates": report.duplicates,
        "explained": report.explained,
        "resent": report.resent,
        "lost": report.lost,
        "audit_records": report.audit_records,
    }


def receiver_attempts(url: str) -> dict[str, list[int]]:
    """The attempt numbers a receiver (``bench.receiver`` or ``badreceiver``) saw per task id,
    one per delivery."""
    body = httpx.get(url + "/_records", timeout=30).content
    seen: dict[str, list[int]] = {}
    for line in body.splitlines():
        if line:
            record = orjson.loads(line)
            seen.setdefault(str(record["task_id"]), []).append(int(record["attempt"]))
    return seen
