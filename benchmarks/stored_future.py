"""SPEC §6 "stored future tasks": the ``http`` burst and create latency with N future tasks
stored (default 10,000,000), against an empty store, on PostgreSQL.

Seeds one database on the server side (``INSERT ... SELECT`` from ``generate_series``, a million
rows per statement, copies of one task made through the API, due between one and 31 days ahead),
vacuums and analyzes it as a live database would be, then runs the ``burst-http`` and
``create-latency`` scenarios of ``duetime bench`` alternately on an empty store and on the
seeded one, ``--repeat`` times each, and prints the medians and their ratios::

    .venv/bin/python benchmarks/stored_future.py [--stored 10000000] [--repeat 3] [--keep]

``--keep`` leaves the seeded database (``duetime_bench_stored``) for another run, which then
skips the seeding; seeding 10M rows takes several minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx

from duetime.bench.runs import BenchConfig, cpu_speed, machine, node, sql_value
from duetime.bench.scenarios import burst_http, create_latency
from duetime.store.postgres.schema import connect as pg_connect

NAME = "duetime_bench_stored"
CHUNK = 1_000_000
SEED = """
INSERT INTO tasks (id, tenant_id, name, queue, status, target_type, target, payload, retry,
                   timeout_seconds, run_at, due_at, created_at, updated_at)
SELECT gen_random_uuid(), t.tenant_id, t.name, t.queue, 'scheduled', t.target_type, t.target,
       t.payload, t.retry, t.timeout_seconds, d.at, d.at, now(), now()
FROM (SELECT * FROM tasks ORDER BY created_at LIMIT 1) AS t,
     LATERAL (SELECT now() + interval '1 day' + (g * 2592000.0 / $2) * interval '1 second' AS at
              FROM generate_series($1::bigint, $1::bigint + $3 - 1) AS g) AS d
"""


def seed(pg_url: str, stored: int) -> str:
    """The seeded database's URL; made (and seeded) unless it already holds ``stored`` tasks."""
    base = pg_url.rpartition("/")[0]
    url = f"{base}/{NAME}"
    exists = sql_value(pg_url, f"SELECT 1 FROM pg_database WHERE datname = '{NAME}'")
    if exists:
        have = sql_value(url, "SELECT count(*) FROM tasks WHERE status = 'scheduled'")
        if isinstance(have, int) and have >= stored:
            print(f"# reusing {NAME}: {have:,} future tasks stored", flush=True)
            return url
        sql_value(pg_url, f'DROP DATABASE "{NAME}" WITH (FORCE)')
    sql_value(pg_url, f'CREATE DATABASE "{NAME}"')
    with tempfile.TemporaryDirectory(prefix="duetime-bench-") as tmp:
        config = BenchConfig(store="postgres", pg_url=pg_url, database=url)
        with node(Path(tmp), url, config) as proc:  # migrates; one task to copy
            later = (datetime.now(UTC) + timedelta(days=1)).isoformat()
            body = {
                "target": {"type": "http", "url": "http://127.0.0.1:9/hook"},
                "payload": {"k": "v"},
                "run_at": later,
            }
            httpx.post(f"{proc.url}/v1/tasks", json=body, timeout=10).raise_for_status()

    async def fill() -> None:
        conn = await pg_connect(url)
        try:
            start = time.perf_counter()
            for first in range(0, stored, CHUNK):
                await conn.execute(SEED, first, stored, min(CHUNK, stored - first))
                done = min(stored, first + CHUNK)
                print(f"# seeded {done:,} ({time.perf_counter() - start:.0f} s)", flush=True)
            await conn.execute("VACUUM ANALYZE tasks")
            print(f"# vacuumed and analyzed ({time.perf_counter() - start:.0f} s)", flush=True)
        finally:
            await conn.close()

    asyncio.run(fill())
    return url


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stored", type=int, default=10_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--tasks", type=int, default=20_000, help="burst size")
    parser.add_argument("--pg-url", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--keep", action="store_true", help="keep the seeded database")
    args = parser.parse_args()
    seeded = seed(args.pg_url, args.stored)
    print(f"# machine: {machine()}; speed: {cpu_speed()}", flush=True)
    empty = BenchConfig(store="postgres", pg_url=args.pg_url, tasks=args.tasks)
    full = BenchConfig(store="postgres", pg_url=args.pg_url, tasks=args.tasks, database=seeded)
    figures: dict[str, list[dict[str, float]]] = {"empty": [], "stored": []}
    try:
        for i in range(args.repeat):
            for label, config in (("empty", empty), ("stored", full)):
                with tempfile.TemporaryDirectory(prefix="duetime-bench-") as tmp:
                    burst = burst_http(config, Path(tmp))
                with tempfile.TemporaryDirectory(prefix="duetime-bench-") as tmp:
                    latency = create_latency(config, Path(tmp))
                run = {
                    "burst_per_s": burst["throughput_per_s"],
                    "burst_lag_p99_s": burst["lag_p99_s"],
                    "create_p50_ms": latency["p50_ms"],
                    "create_p99_ms": latency["p99_ms"],
                }
                figures[label].append(run)
                print(f"run {i + 1} {label}: " + "  ".join(f"{k}={v:.3f}" for k, v in run.items()))
    finally:
        if not args.keep:
            sql_value(args.pg_url, f'DROP DATABASE IF EXISTS "{NAME}" WITH (FORCE)')
    print(
        f"stored: {args.stored:,} future tasks; burst: {args.tasks:,} http tasks; "
        f"medians of {args.repeat}"
    )
    medians = {
        label: {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        for label, runs in figures.items()
    }
    for key in medians["empty"]:
        a, b = medians["empty"][key], medians["stored"][key]
        print(f"  {key:16s} empty {a:10.3f}   stored {b:10.3f}   stored/empty {b / a:5.2f}")


if __name__ == "__main__":
    main()
