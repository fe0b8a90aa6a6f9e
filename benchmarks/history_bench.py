"""History at scale (SPEC §6 "history" row, issue 11): a year of archived attempts as Parquet plus
hot rows in PostgreSQL, then the query "failed attempts of task name X in one week" through the
same code path as ``GET /v1/history`` (both tiers, merged), the cost of one archive round, the
hot path with and without the audit triggers, and the store's size against the archive's.

Runs in a throwaway database on the server named by ``--admin-url`` (dropped at the end) and a
temporary archive directory::

    .venv/bin/python benchmarks/history_bench.py [--archived 100000000] [--hot 10000000]
        [--names 1000] [--queries 50] [--hot-path-tasks 20000]

The archived year is generated straight as Parquet files (one per month, by name then time: the
archive's layout, schema and order), as the export writes them; the hot rows are COPYed into the
partitioned ``history`` table. Defaults are the issue's scale; on a shared 2-core machine run a
smaller one (the figures in docs/benchmarks.md say which).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import random
import shutil
import statistics
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
import pyarrow as pa
import pyarrow.parquet as pq

from duetime.clock import FakeClock
from duetime.engine.history import HistoryConfig, HistoryMaintenance
from duetime.engine.leader import Leader
from duetime.history.archive import ROW_GROUP_ROWS, SCHEMA, Archive
from duetime.history.events import HistoryFilter
from duetime.history.partitions import month_bounds, month_of, next_month
from duetime.history.query import history_page
from duetime.history.retention import RetentionPolicy
from duetime.store.postgres.backend import PostgresStore
from duetime.types import AttemptOutcome, ClaimRequest, Completion, NewTask, TargetType

DEFAULT_ADMIN_URL = os.environ.get(
    "DUETIME_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
TENANT = "bench"
NOW = datetime(2031, 1, 20, tzinfo=UTC)
FAILED_SHARE = 0.1


def _with_db(url: str, db: str) -> str:
    return f"{url.rpartition('/')[0]}/{db}"


def _rows(n: int, start: datetime, end: datetime, names: int, first_id: int) -> pa.Table:
    """``n`` attempt records spread over ``[start, end)``, sorted by time."""
    lo, hi = int(start.timestamp() * 1e6), int(end.timestamp() * 1e6)
    ats = sorted(random.randrange(lo, hi) for _ in range(n))
    failed = [random.random() < FAILED_SHARE for _ in range(n)]
    task_ids = [str(uuid.UUID(int=random.getrandbits(128))) for _ in range(n)]
    return pa.table(
        {
            "at": pa.array(ats, pa.int64()).cast(pa.timestamp("us", tz="UTC")),
            "id": pa.array(range(first_id, first_id + n), pa.int64()),
            "tenant_id": pa.array([TENANT] * n),
            "kind": pa.array(["attempt"] * n),
            "task_id": pa.array(task_ids),
            "schedule_id": pa.nulls(n, pa.string()),
            "name": pa.array([f"job-{random.randrange(names):04d}" for _ in range(n)]),
            "queue": pa.array(["default"] * n),
            "labels": pa.array(["{}"] * n),
            "from_status": pa.nulls(n, pa.string()),
            "to_status": pa.nulls(n, pa.string()),
            "actor": pa.array(["worker:w1"] * n),
            "fields": pa.nulls(n, pa.string()),
            "attempt": pa.array([1] * n, pa.int32()),
            "started_at": pa.array(ats, pa.int64()).cast(pa.timestamp("us", tz="UTC")),
            "outcome": pa.array(["failed" if f else "succeeded" for f in failed]),
            "error": pa.array(["HTTP 503" if f else None for f in failed]),
            "http_status": pa.array([503 if f else 200 for f in failed], pa.int32()),
            "duration_ms": pa.array([12.5] * n, pa.float64()),
            "worker": pa.array(["w1"] * n),
        },
        schema=SCHEMA,
    )


async def generate_archive(
    archive: Archive, total: int, names: int, months: int
) -> tuple[float, int]:
    """The first ``months`` of twelve archived months before the hot window, each holding a
    twelfth of ``total``; returns (seconds, bytes on disk)."""
    t0 = time.perf_counter()
    month = month_of(NOW - timedelta(days=365 + 40))
    per_month = total // 12
    next_id = 1
    chunk = 1_000_000
    for _ in range(months):
        start, end = month_bounds(month)
        path = Path(archive.file_path(TENANT, month))
        path.parent.mkdir(parents=True, exist_ok=True)
        parts, done = [], 0
        while done < per_month:
            n = min(chunk, per_month - done)
            parts.append(_rows(n, start, end, names, next_id))
            done += n
            next_id += n
        # The export's order: by name, then time (see duetime.history.archive).
        table = pa.concat_tables(parts).sort_by([("name", "ascending"), ("at", "ascending")])
        pq.write_table(table, str(path), compression="zstd", row_group_size=ROW_GROUP_ROWS)
        await archive.month_seal(month, {TENANT: per_month})
        month = next_month(month)
    return time.perf_counter() - t0, _bytes_under(Path(archive.root))


def _bytes_under(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*.parquet"))


async def load_hot(store: PostgresStore, url: str, total: int, names: int) -> float:
    """``total`` attempt records over the 30 days before NOW, COPYed into ``history``."""
    t0 = time.perf_counter()
    start = NOW - timedelta(days=30)
    months = [month_of(start), month_of(NOW)]
    await store.history_partitions_ensure(months)
    conn = await asyncpg.connect(url)
    try:
        done, chunk = 0, 200_000
        while done < total:
            n = min(chunk, total - done)
            table = _rows(n, start, NOW, names, 10**12 + done)
            records = [
                (r["at"], r["id"], r["tenant_id"], r["kind"], uuid.UUID(r["task_id"]), r["name"],
                 r["queue"], r["labels"], r["actor"], r["attempt"], r["started_at"], r["outcome"],
                 r["error"], r["http_status"], r["duration_ms"], r["worker"])
                for r in table.to_pylist()
            ]  # fmt: skip
            await conn.copy_records_to_table(
                "history",
                records=records,
                columns=[
                    "at", "id", "tenant_id", "kind", "task_id", "name", "queue", "labels",
                    "actor", "attempt", "started_at", "outcome", "error", "http_status",
                    "duration_ms", "worker",
                ],
            )  # fmt: skip
            done += n
        await conn.execute("ANALYZE history")
    finally:
        await conn.close()
    return time.perf_counter() - t0


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def measure_queries(
    store: PostgresStore, archive: Archive, names: int, runs: int, months: int
) -> dict[str, tuple[float, float, int]]:
    """p50/p99 (ms) and mean rows of the week query, in the hot window and in the archived
    months (a random week each time)."""
    results: dict[str, tuple[float, float, int]] = {}
    year_start = month_bounds(month_of(NOW - timedelta(days=365 + 40)))[0]
    archived_days = 30.4 * months - 7
    for label, window in (("hot window", (NOW - timedelta(days=28), NOW)), ("year", None)):
        times, rows = [], []
        for _ in range(runs):
            if window is None:
                since = year_start + timedelta(days=random.uniform(0, archived_days))
                until = since + timedelta(days=7)
            else:
                since = window[0] + timedelta(days=random.uniform(0, 21))
                until = since + timedelta(days=7)
            query = HistoryFilter(
                tenant_id=TENANT, name=f"job-{random.randrange(names):04d}",
                kinds=("attempt",), outcomes=("failed",), since=since, until=until, limit=1001,
            )  # fmt: skip
            t0 = time.perf_counter()
            found = await history_page(store, archive, query)
            times.append((time.perf_counter() - t0) * 1000)
            rows.append(len(found))
        results[label] = (_pct(times, 0.5), _pct(times, 0.99), round(statistics.mean(rows)))
    return results


async def archive_round(url: str, archive_dir: str, rows: int) -> tuple[float, int]:
    """Seconds of one archive round that exports a month of ``rows`` records (made through the
    real triggers: tasks created, claimed and completed a month and a half before NOW)."""
    clock = FakeClock(NOW - timedelta(days=75))
    store = PostgresStore(url, clock=clock, pool_min=2, pool_max=4)
    await store.open()
    try:
        tenant = (await store.tenant_create(f"round-{uuid.uuid4().hex[:6]}")).id
        made = 0
        while made < rows:
            n = min(1000, rows - made)
            await _drain(store, clock, tenant, n)
            made += n
        clock.set(NOW)
        leader = Leader(store, "bench", ttl_seconds=10, clock=clock)
        leader.is_leader = True
        config = HistoryConfig(defaults=RetentionPolicy(7e9, 7e9, 7e9), hot_days=30)
        service = HistoryMaintenance(store, leader, clock, config, Archive(archive_dir))
        counts = await store.history_month_counts(month_of(NOW - timedelta(days=75)))
        t0 = time.perf_counter()
        await service.archive_round()
        return time.perf_counter() - t0, sum(counts.values())
    finally:
        await store.close()


async def _drain(store: PostgresStore, clock: FakeClock, tenant: str, n: int) -> None:
    await store.task_create_many([NewTask(tenant_id=tenant, target={"type": "worker"})] * n)
    leases = await store.task_claim(
        ClaimRequest(worker_id="w", limit=n, target_types=frozenset({TargetType.WORKER}))
    )
    await store.task_complete_many(
        [
            Completion(
                task_id=x.task.id, lease_id=x.lease_id, outcome=AttemptOutcome.SUCCEEDED,
                started_at=clock.now(), duration_ms=1.0, error=None, http_status=None,
                retry_delay_seconds=None, worker="w",
            )
            for x in leases
        ]
    )  # fmt: skip


async def hot_path(url: str, tasks: int, audit: bool) -> float:
    """Tasks/s of create → claim → complete in batches of 500, with or without the triggers."""
    conn = await asyncpg.connect(url)
    verb = "ENABLE" if audit else "DISABLE"
    for table in ("tasks", "attempts"):
        await conn.execute(f"ALTER TABLE {table} {verb} TRIGGER USER")
    await conn.close()
    store = PostgresStore(url, pool_min=2, pool_max=4)
    await store.open()
    try:
        tenant = (await store.tenant_create(f"hp-{uuid.uuid4().hex[:6]}")).id
        clock = FakeClock()
        t0 = time.perf_counter()
        for _ in range(tasks // 500):
            await _drain(store, clock, tenant, 500)
        return tasks / (time.perf_counter() - t0)
    finally:
        await store.close()


async def table_bytes(url: str) -> int:
    conn = await asyncpg.connect(url)
    try:
        found: int = await conn.fetchval(
            "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_inherits i "
            "JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'history'::regclass"
        )
        return found
    finally:
        await conn.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--admin-url", default=DEFAULT_ADMIN_URL)
    parser.add_argument("--archived", type=int, default=100_000_000)
    parser.add_argument("--hot", type=int, default=10_000_000)
    parser.add_argument("--names", type=int, default=1000)
    parser.add_argument(
        "--months", type=int, default=12, help="archived months to generate (each at 1/12 density)"
    )
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--round-rows", type=int, default=20_000)
    parser.add_argument("--hot-path-tasks", type=int, default=20_000)
    args = parser.parse_args()
    random.seed(11)
    db = f"duetime_hist_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(args.admin_url)
    await admin.execute(f'CREATE DATABASE "{db}"')
    await admin.close()
    url = _with_db(args.admin_url, db)
    workdir = tempfile.mkdtemp(prefix="duetime-hist-")
    server = args.admin_url.rpartition("@")[2]
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}, PostgreSQL at {server}")  # fmt: skip
    print(f"scale: {args.archived:,} archived attempts over 12 months ({args.months} generated), "
          f"{args.hot:,} hot, {args.names} task names, {FAILED_SHARE:.0%} failed")  # fmt: skip
    try:
        store = PostgresStore(url, pool_min=2, pool_max=4)
        await store.open()
        await store.migrate()
        archive = Archive(str(Path(workdir) / "archive"))
        gen_s, cold_bytes = await generate_archive(archive, args.archived, args.names, args.months)
        generated = args.archived // 12 * args.months
        print(f"archive generated in {gen_s:.1f} s: {cold_bytes / 2**20:,.1f} MiB of Parquet "
              f"({cold_bytes / max(1, generated):.1f} B/record)")  # fmt: skip
        load_s = await load_hot(store, url, args.hot, args.names)
        hot_bytes = await table_bytes(url)
        print(f"hot rows loaded in {load_s:.1f} s: {hot_bytes / 2**20:,.1f} MiB in PostgreSQL "
              f"with indexes ({hot_bytes / max(1, args.hot):.1f} B/record)")  # fmt: skip
        for label, (p50, p99, rows) in (
            await measure_queries(store, archive, args.names, args.queries, args.months)
        ).items():
            print(f"week query, {label}: p50 {p50:.1f} ms, p99 {p99:.1f} ms "
                  f"({rows} failed attempts on average, {args.queries} queries)")  # fmt: skip
        await store.close()
        round_s, exported = await archive_round(url, str(Path(workdir) / "round"), args.round_rows)
        print(f"one archive round: {exported:,} records exported, verified, sealed and dropped "
              f"in {round_s:.2f} s")  # fmt: skip
        rates: dict[bool, list[float]] = {True: [], False: []}
        for _ in range(5):
            for audit in (False, True):
                rates[audit].append(await hot_path(url, args.hot_path_tasks, audit))
        off, on = statistics.median(rates[False]), statistics.median(rates[True])
        print(f"hot path create+claim+complete (store only, batches of 500): {off:,.0f} "
              f"tasks/s without audit triggers, {on:,.0f} with ({on / off:.2f}x)")  # fmt: skip
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        admin = await asyncpg.connect(args.admin_url)
        await admin.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
        await admin.close()


if __name__ == "__main__":
    asyncio.run(main())
