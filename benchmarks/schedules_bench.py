"""Benchmark of recurring schedules on PostgreSQL:

1. **create rate**: ``POST /v1/schedules`` against a real ``duetime serve`` node (engine on), from
   ``--concurrency`` concurrent HTTP clients;
2. **materializer round cost** with ``--small`` (1k) vs ``--large`` (1M) schedules stored, of which
   ``--due`` have an occurrence inside the horizon each round. The idle schedules are seeded with
   ``COPY`` (a daily cron whose next run is hours away); the due ones (``every: PT1S``) are rewound
   before each measured round so every round makes the same work (``--due`` x 60 occurrences).

Each figure is the median of ``--repeat`` runs; the machine, the store and the configuration are
printed next to it. Runs in throwaway databases on ``--admin-url`` (dropped at the end)::

    .venv/bin/python benchmarks/schedules_bench.py [--large 1000000] [--due 100] [--repeat 5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import aiohttp
import asyncpg
import orjson

from duetime.bench.harness import NodeOptions, start_node
from duetime.bench.runs import ADMIN_URL
from duetime.clock import SystemClock
from duetime.engine.leader import Leader
from duetime.engine.materializer import Materializer
from duetime.ids import new_id
from duetime.store.postgres.backend import PostgresStore
from duetime.store.postgres.schema import connect as pg_connect

TEMPLATE = {"target": {"type": "worker"}, "name": "bench", "queue": "default", "payload": None}
COLUMNS = (
    "id", "tenant_id", "cron", "every", "timezone", "jitter_seconds", "dst_nonexistent",
    "dst_ambiguous", "task", "overlap", "catchup", "catchup_window_seconds", "catchup_max_runs",
    "anchor_at", "next_run_at", "materialized_until", "created_at", "updated_at",
)  # fmt: skip


def _db_url(admin_url: str, name: str) -> str:
    return f"{admin_url.rpartition('/')[0]}/{name}"


async def _admin(admin_url: str, statement: str) -> None:
    conn = await asyncpg.connect(admin_url)
    try:
        await conn.execute(statement)
    finally:
        await conn.close()


async def _fresh_db(admin_url: str, tag: str) -> tuple[str, str]:
    name = f"duetime_sched_bench_{tag}_{uuid.uuid4().hex[:6]}"
    await _admin(admin_url, f'CREATE DATABASE "{name}"')
    url = _db_url(admin_url, name)
    store = PostgresStore(url)
    await store.open()
    await store.migrate()
    await store.close()
    return name, url


# -- 1. create rate ----------------------------------------------------------------------------


async def create_rate(url: str, count: int, concurrency: int) -> float:
    body = orjson.dumps(
        {"cron": "0 2 * * *", "timezone": "America/New_York", "jitter_seconds": 60,
         "task": TEMPLATE}
    )  # fmt: skip
    headers = {"content-type": "application/json"}
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(count):
        queue.put_nowait(i)

    async def client(session: aiohttp.ClientSession) -> None:
        while not queue.empty():
            queue.get_nowait()
            async with session.post(f"{url}/v1/schedules", data=body, headers=headers) as resp:
                if resp.status != 201:
                    raise RuntimeError(await resp.text())

    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:
        started = time.perf_counter()
        await asyncio.gather(*(client(session) for _ in range(concurrency)))
        return count / (time.perf_counter() - started)


# -- 2. one materializer round vs schedules stored -----------------------------------------------


async def seed(url: str, idle: int, due: int, *, prefix: str = "due", expr: str = "PT1S") -> None:
    """``idle`` daily schedules hours away from their next run, and ``due`` ones named
    ``<prefix>-N`` (``every`` ``expr``, or ``cron`` when ``expr`` has spaces) due now."""
    now = datetime.now(UTC).replace(microsecond=0)
    tomorrow = (now + timedelta(days=1)).replace(hour=3, minute=0, second=0)
    task = orjson.dumps(TEMPLATE).decode()
    conn = await pg_connect(url)
    try:
        await conn.execute(
            "INSERT INTO tenants VALUES ('bench', 'bench', now()) ON CONFLICT DO NOTHING"
        )
        chunk = 100_000
        for start in range(0, idle, chunk):
            rows = [
                (new_id(), "bench", "0 3 * * *", None, "UTC", 0, "run_after_gap", "first",
                 task, "allow", "latest", 86400, 100, now, tomorrow, now, now, now)
                for _ in range(min(chunk, idle - start))
            ]  # fmt: skip
            await conn.copy_records_to_table("schedules", records=rows, columns=COLUMNS)
        cron, every = (expr, None) if " " in expr else (None, expr)
        rows = [
            (f"{prefix}-{i:05d}", "bench", cron, every, "UTC", 0, "run_after_gap", "first", task,
             "allow", "latest", 86400, 100, now, now, now, now, now)
            for i in range(due)
        ]  # fmt: skip
        await conn.copy_records_to_table("schedules", records=rows, columns=COLUMNS)
        await conn.execute("ANALYZE schedules")
    finally:
        await conn.close()


async def rewind_due(conn: asyncpg.Connection) -> None:  # type: ignore[type-arg]
    """Put the due schedules back to "nothing made yet" as of now."""
    await conn.execute("DELETE FROM tasks")
    await conn.execute("DELETE FROM schedule_ticks")
    await conn.execute(
        "UPDATE schedules SET materialized_until = date_trunc('second', now()), "
        "next_run_at = date_trunc('second', now()) "
        "WHERE id LIKE 'due-%' OR id LIKE 'herd-%'"
    )
    await conn.execute("VACUUM ANALYZE tasks")


async def round_cost(url: str, repeat: int) -> tuple[float, float, int]:
    """Median seconds of one materializer round, of the schedule_due read alone, and the rows a
    round wrote."""
    store = PostgresStore(url)
    await store.open()
    conn = await pg_connect(url)
    clock = SystemClock()
    leader = Leader(store, "bench", ttl_seconds=60, clock=clock)
    await leader.run_once()
    materializer = Materializer(store, leader, clock)
    rounds: list[float] = []
    reads: list[float] = []
    written = 0
    try:
        for _ in range(repeat + 1):  # the first warms caches
            await rewind_due(conn)
            now = await store.now()
            started = time.perf_counter()
            await store.schedule_due(now, now + timedelta(seconds=60), 500)
            reads.append(time.perf_counter() - started)
            await rewind_due(conn)
            started = time.perf_counter()
            written = await materializer.run_once()
            rounds.append(time.perf_counter() - started)
    finally:
        await conn.close()
        await store.close()
    return statistics.median(rounds[1:]), statistics.median(reads[1:]), written


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--admin-url", default=ADMIN_URL)
    parser.add_argument("--creates", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--small", type=int, default=1000)
    parser.add_argument("--large", type=int, default=1_000_000)
    parser.add_argument("--due", type=int, default=100)
    parser.add_argument("--herd", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    async with asyncpg.create_pool(args.admin_url, min_size=1, max_size=1) as pool:
        server = await pool.fetchval("SHOW server_version")
    print(f"machine: {platform.node()} {platform.machine()}, {os.cpu_count()} cpus, "
          f"Python {platform.python_version()}; store: PostgreSQL {server} at "
          f"{args.admin_url.rpartition('@')[2]}")  # fmt: skip

    name, url = await _fresh_db(args.admin_url, "create")
    try:
        with tempfile.TemporaryDirectory() as tmp:
            node = start_node(Path(tmp), NodeOptions(db=url), "bench")
            try:
                rates = [
                    await create_rate(node.url, args.creates, args.concurrency)
                    for _ in range(args.repeat)
                ]
            finally:
                node.stop()
        print(f"schedule creates: {statistics.median(rates):,.0f}/s (median of {args.repeat} x "
              f"{args.creates} POSTs, {args.concurrency} concurrent clients, one node, "
              f"engine on)")  # fmt: skip
    finally:
        await _admin(args.admin_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    for stored in (args.small, args.large):
        name, url = await _fresh_db(args.admin_url, str(stored))
        try:
            started = time.perf_counter()
            await seed(url, stored - args.due, args.due)
            seeded = time.perf_counter() - started
            full, read, written = await round_cost(url, args.repeat)
            print(f"materializer round, {stored:>9,} schedules stored ({args.due} due, "
                  f"{written:,} rows written): {full * 1000:7.1f} ms; its schedule_due read "
                  f"{read * 1000:6.2f} ms  [seeded in {seeded:.1f} s]")  # fmt: skip
        finally:
            await _admin(args.admin_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    name, url = await _fresh_db(args.admin_url, "herd")
    try:
        await seed(url, 0, args.herd, prefix="herd", expr="* * * * *")
        full, _, written = await round_cost(url, args.repeat)
        print(f"herd: {args.herd:,} schedules with an occurrence at the same minute, made ahead "
              f"in one round: {full:.2f} s ({written:,} rows written)")  # fmt: skip
    finally:
        await _admin(args.admin_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


if __name__ == "__main__":
    asyncio.run(main())
