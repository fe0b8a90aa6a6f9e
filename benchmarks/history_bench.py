"""History at scale (SPEC §6 "history" row): a year of archived attempts as Parquet plus
hot rows in PostgreSQL, then the query "failed attempts of task name X in one week" through the
same code path as ``GET /v1/history`` (both tiers, merged), the cost of one archive round, the
hot path with and without the audit triggers, and the store's size against the archive's.

Runs in a throwaway database on the server named by ``--admin-url`` (dropped at the end) and a
temporary archive directory::

    .venv/bin/python benchmarks/history_bench.py [--archived 100000000] [--hot 10000000]
        [--months 12] [--hot-load server|copy] [--names 1000] [--queries 50]
        [--round-rows 20000] [--hot-path-tasks 20000]

The archived year is generated straight as Parquet files (one per month, by name then time: the
archive's layout, schema and order), as the export writes them; ``--months`` generates the last
months of the twelve, the ones next to the hot store, at full density. The hot rows fill the
months the store keeps hot (the one ``hot_days`` reaches into and the current one, up to now):
``--hot-load server`` (the default) generates them inside PostgreSQL into each month's partition
table, builds its indexes once and attaches it (:func:`month_build`, also used by
``history_archive_burst.py``); ``--hot-load copy`` COPYs rows made in Python over the last 30
days. ``--round-rows 0`` and ``--hot-path-tasks 0`` skip those parts. Defaults are SPEC §6's
scale; on a shared 2-core machine run a smaller one (the figures in docs/benchmarks.md say
which).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shutil
import statistics
import tempfile
import time
import uuid
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import asyncpg
import pyarrow as pa
import pyarrow.parquet as pq

from duetime.bench.runs import ADMIN_URL, cpu_speed, machine
from duetime.clock import FakeClock
from duetime.engine.history import HistoryConfig, HistoryMaintenance
from duetime.engine.leader import Leader
from duetime.history.archive import ROW_GROUP_ROWS, SCHEMA, Archive
from duetime.history.events import HistoryFilter
from duetime.history.partitions import month_bounds, month_of, months_ahead, next_month
from duetime.history.query import history_page
from duetime.history.retention import RetentionPolicy
from duetime.store.postgres.backend import PostgresStore
from duetime.store.postgres.schema import connect as pg_connect
from duetime.types import AttemptOutcome, ClaimRequest, Completion, NewTask, TargetType, TaskStatus

TENANT = "bench"
NOW = datetime(2031, 1, 20, tzinfo=UTC)
HOT_START = month_bounds(month_of(NOW - timedelta(days=30)))[0]
"""The first instant the hot store keeps (a month leaves it once it ended ``hot_days`` ago):
the boundary between the tiers."""
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
            "logs": pa.nulls(n, pa.string()),
            "response": pa.nulls(n, pa.string()),
        },
        schema=SCHEMA,
    )


def archived_months(months: int) -> list[date]:
    """The last ``months`` of the twelve archived months: the year before the first hot month."""
    year = [month_of(HOT_START - timedelta(days=1))]
    while len(year) < 12:
        year.insert(0, month_of(month_bounds(year[0])[0] - timedelta(days=1)))
    return year[12 - months :]


async def generate_archive(
    archive: Archive, total: int, names: int, months: int
) -> tuple[float, int]:
    """The last ``months`` of twelve archived months before the hot store, each holding a
    twelfth of ``total``; returns (seconds, bytes on disk)."""
    t0 = time.perf_counter()
    month = archived_months(months)[0]
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
    conn = await pg_connect(url)
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


MONTH_ROWS = """
INSERT INTO {part} (at, id, tenant_id, kind, task_id, name, queue, labels, actor, attempt,
                    started_at, outcome, error, http_status, duration_ms, worker)
SELECT at, $1::bigint + g, $2::text, 'attempt', gen_random_uuid(),
       'job-' || lpad(floor(random() * $3::int)::int::text, 4, '0'), 'default', '{{}}'::jsonb,
       'worker:w1', 1, at, CASE WHEN failed THEN 'failed' ELSE 'succeeded' END,
       CASE WHEN failed THEN 'HTTP 503' END, CASE WHEN failed THEN 503 ELSE 200 END, 12.5, 'w1'
FROM (SELECT g,
             $4::timestamptz + ($5::timestamptz - $4::timestamptz) * ((g + random()) / $6::float8)
                 AS at,
             random() < $7::float8 AS failed
      FROM generate_series($8::bigint, $9::bigint) AS g) AS r
"""
"""A chunk of a month's attempt records, in time order (as the store appends them), names at
random, ``FAILED_SHARE`` failed: the rows ``_rows`` makes, generated by the server."""

HISTORY_INDEXES = ("tenant_id, at DESC, id DESC", "tenant_id, name, at DESC, id DESC",
                   "task_id, at DESC, id DESC")  # fmt: skip
"""The columns of the partitioned indexes of ``history`` (migration 0007): a table with the same
indexes attaches them instead of building them again."""


async def month_build(
    conn: asyncpg.Connection,
    month: date,
    rows: int,
    *,
    tenant: str,
    names: int,
    first_id: int,
    until: datetime | None = None,
) -> dict[str, float]:
    """``rows`` attempt records of ``tenant`` spread over ``month`` (up to ``until``), made in
    PostgreSQL as ``month``'s partition of ``history``: generated into a new table, indexed once
    (not row by row), given the range constraint and attached — the partition the store's
    ``history_partition_ensure`` makes, filled. Returns seconds per step."""
    part = f"history_p{month:%Y%m}"
    lo, hi = month_bounds(month)
    end = hi if until is None else min(hi, until)
    steps: dict[str, float] = {}
    t0 = time.perf_counter()
    await conn.execute(
        f"CREATE TABLE {part} (LIKE history INCLUDING DEFAULTS INCLUDING CONSTRAINTS)"
    )
    chunk = 1_000_000
    for first in range(0, rows, chunk):
        last = min(rows, first + chunk) - 1
        await conn.execute(
            MONTH_ROWS.format(part=part),
            first_id, tenant, names, lo, end, float(rows), FAILED_SHARE, first, last,
        )  # fmt: skip
    steps["generate"], t0 = time.perf_counter() - t0, time.perf_counter()
    await conn.execute("SET maintenance_work_mem = '1GB'")
    for columns in HISTORY_INDEXES:
        await conn.execute(f"CREATE INDEX ON {part} ({columns})")
    steps["index"], t0 = time.perf_counter() - t0, time.perf_counter()
    await conn.execute(
        f"ALTER TABLE {part} ADD CONSTRAINT {part}_range "
        f"CHECK (at >= '{lo.isoformat()}' AND at < '{hi.isoformat()}')"
    )
    await conn.execute(
        f"ALTER TABLE history ATTACH PARTITION {part} "
        f"FOR VALUES FROM ('{lo.isoformat()}') TO ('{hi.isoformat()}')"
    )
    indexes = await conn.fetchval("SELECT count(*) FROM pg_indexes WHERE tablename = $1", part)
    if indexes != len(HISTORY_INDEXES):
        raise RuntimeError(f"{part} has {indexes} indexes after ATTACH: they were not matched")
    await conn.execute(f"VACUUM (ANALYZE) {part}")
    steps["attach+vacuum"] = time.perf_counter() - t0
    return steps


async def load_hot_server(store: PostgresStore, url: str, total: int, names: int) -> float:
    """``total`` attempt records over the hot months (``HOT_START`` to ``NOW``, each month's share
    by its length), generated in PostgreSQL by :func:`month_build`; the months ahead get their
    empty partitions as the leader makes them."""
    t0 = time.perf_counter()
    span = (NOW - HOT_START).total_seconds()
    conn = await pg_connect(url)
    try:
        month, first_id, left = month_of(HOT_START), 10**12, total
        while month_bounds(month)[0] < NOW:
            lo, hi = month_bounds(month)
            share = (min(hi, NOW) - lo).total_seconds() / span
            rows = left if hi >= NOW else round(total * share)
            steps = await month_build(
                conn, month, rows, tenant=TENANT, names=names, first_id=first_id, until=NOW
            )
            print(f"  hot month {month:%Y-%m}: {rows:,} records, "
                  + ", ".join(f"{k} {v:.0f} s" for k, v in steps.items()), flush=True)  # fmt: skip
            first_id += rows
            left -= rows
            month = next_month(month)
    finally:
        await conn.close()
    await store.history_partitions_ensure(months_ahead(NOW))
    return time.perf_counter() - t0


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def measure_queries(
    store: PostgresStore, archive: Archive, names: int, runs: int, months: int
) -> dict[str, tuple[float, float, int]]:
    """p50/p99 (ms) and mean rows of the week query in the hot window, across the boundary
    between the tiers and in the archived months (a random week and name each time)."""
    results: dict[str, tuple[float, float, int]] = {}
    archive_start = month_bounds(archived_months(months)[0])[0]
    # Where a week may start: wholly in the last four hot weeks, across the boundary between
    # the tiers (at least a day on each side), wholly in the generated archived months.
    starts = {
        "hot window": (NOW - timedelta(days=28), 21.0),
        "tier boundary": (HOT_START - timedelta(days=6), 5.0),
        "archive": (archive_start, (HOT_START - archive_start).days - 7.0),
    }
    for label, (first, days) in starts.items():
        times, rows = [], []
        for _ in range(runs):
            since = first + timedelta(days=random.uniform(0, days))
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
        await service.archive_round(clock.now())
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
                status=TaskStatus.SUCCEEDED,
            )
            for x in leases
        ]
    )  # fmt: skip


async def hot_path(url: str, tasks: int, audit: bool) -> float:
    """Tasks/s of create → claim → complete in batches of 500, with or without the triggers."""
    conn = await pg_connect(url)
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
    conn = await pg_connect(url)
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
    parser.add_argument("--admin-url", default=ADMIN_URL)
    parser.add_argument("--archived", type=int, default=100_000_000)
    parser.add_argument("--hot", type=int, default=10_000_000)
    parser.add_argument("--names", type=int, default=1000)
    parser.add_argument(
        "--months", type=int, default=12, help="archived months to generate (each at 1/12 density)"
    )
    parser.add_argument(
        "--hot-load", choices=("server", "copy"), default="server",
        help="generate the hot rows in PostgreSQL (server) or COPY rows made here (copy)",
    )  # fmt: skip
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
    print(f"machine: {machine()}, PostgreSQL at {server}; {cpu_speed()}", flush=True)
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
        if args.hot_load == "server":
            load_s = await load_hot_server(store, url, args.hot, args.names)
        else:
            load_s = await load_hot(store, url, args.hot, args.names)
        hot_bytes = await table_bytes(url)
        print(f"hot rows loaded ({args.hot_load}) in {load_s:.1f} s: "
              f"{hot_bytes / 2**20:,.1f} MiB in PostgreSQL with indexes "
              f"({hot_bytes / max(1, args.hot):.1f} B/record)")  # fmt: skip
        for label, (p50, p99, rows) in (
            await measure_queries(store, archive, args.names, args.queries, args.months)
        ).items():
            print(f"week query, {label}: p50 {p50:.1f} ms, p99 {p99:.1f} ms "
                  f"({rows} failed attempts on average, {args.queries} queries)")  # fmt: skip
        await store.close()
        if args.round_rows > 0:
            round_dir = str(Path(workdir) / "round")
            round_s, exported = await archive_round(url, round_dir, args.round_rows)
            print(f"one archive round: {exported:,} records exported, verified, sealed and "
                  f"dropped in {round_s:.2f} s")  # fmt: skip
        if args.hot_path_tasks > 0:
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
