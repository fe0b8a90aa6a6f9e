"""The keyed claim (``task_claim_keyed``, a queue with ``max_concurrency_per_key``) under a ready
backlog of each shape, a git revision's statement against the working tree's, and what the
keyed index costs task creation.

Builds a throwaway database with one keyed queue (``max_concurrency_per_key=1``) per shape,
``--backlog`` ready worker tasks each, runs ``VACUUM ANALYZE``, then times each shape's claim of
``--limit`` under PostgreSQL's custom and generic plan, the statement of ``--old`` (a git
revision: the window over every ready task) beside the working tree's, alternately, each call in
a transaction rolled back (median of ``--calls``; the working tree's after ``claim_keyed_plan``,
as the store runs it, less that round trip), with the rows the working tree's read from ``tasks``
(``EXPLAIN ANALYZE``)::

    flock /tmp/bench.lock .venv/bin/python benchmarks/keyed_claim.py [--backlog 100000]
        [--calls 9] [--limit 10] [--old ead30aa] [--only a b ...] [--creates 40]

Shapes: (a) a key per task; (b) one key, idle; (c) that key busy (one running); (d) 1,000 keys of
100 tasks taking turns; (e) half the tasks without a key, half over 100 keys; (f) two keys idle,
the second's tasks after the first's; (g) 1,000 keys of 100 tasks one key after another;
(h) a key per task, created in batches of 1,000 that share their priority, due and creation
time (as ``task_create_many`` stores a batch).

Then ``--creates`` rounds of ``task_create_many`` of 1,000 tasks without a key and 1,000 with
one, into two fresh databases, one without ``tasks_ready_keyed_idx``: a task without a key
never enters the index (it is partial); a keyed one pays its entry.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import asyncpg

from duetime.bench.runs import BenchConfig, bench_store, cpu_speed, machine
from duetime.store.postgres import hot
from duetime.store.postgres.backend import PostgresStore
from duetime.store.postgres.schema import connect as pg_connect
from duetime.store.sql import Query, parse
from duetime.testing.plans import rows_read
from duetime.types import NewTask, QueueSettings

TENANT = "acme"

# One INSERT per shape: $1 queue, $2 status, $3 how many; {key} is the concurrency_key as an SQL
# expression of i, {at} the creation (and due) time. Priority i % 3, as plan_backlog.py.
_INSERT = """
INSERT INTO tasks (id, tenant_id, name, queue, status, target_type, target, payload, priority,
                   retry, timeout_seconds, concurrency_key, run_at, due_at, created_at,
                   updated_at, attempts, lease_id, lease_expires_at, worker_id, started_at)
SELECT
    encode(overlay(uuid_send(gen_random_uuid()) PLACING
           substring(int8send((extract(epoch FROM c) * 1000)::bigint + i) FROM 3)
           FROM 1 FOR 6), 'hex')::uuid,
    'acme', 'job', $1, $2, 'worker', '{"type": "worker"}', '{}', i % 3, '{}', 30, {key},
    c, c, c, c,
    CASE WHEN $2 = 'running' THEN 1 ELSE 0 END,
    CASE WHEN $2 = 'running' THEN gen_random_uuid() END,
    CASE WHEN $2 = 'running' THEN now() + interval '10 minutes' END,
    CASE WHEN $2 = 'running' THEN 'w' END,
    CASE WHEN $2 = 'running' THEN c END
FROM generate_series(1, $3) AS i,
     LATERAL (SELECT {at} AS c) AS cc
"""
EACH_MS = "now() - interval '1 hour' + i * interval '1 millisecond'"
BATCHED = "now() - interval '1 hour' + (i / 1000) * interval '1 second'"

# label: (description, [(status, count share, key expression, time expression)])
SHAPES: dict[str, tuple[str, list[tuple[str, float, str, str]]]] = {
    "a": ("a key per task", [("ready", 1, "'k' || i", EACH_MS)]),
    "b": ("one key, idle", [("ready", 1, "'K'", EACH_MS)]),
    "c": ("one key, busy", [("ready", 1, "'K'", EACH_MS), ("running", 0, "'K'", EACH_MS)]),
    "d": ("1,000 keys x 100, taking turns", [("ready", 1, "'k' || (i % 1000)", EACH_MS)]),
    "e": (
        "half unkeyed, half over 100 keys",
        [("ready", 1, "CASE WHEN i % 2 = 0 THEN 'k' || (i % 100) END", EACH_MS)],
    ),
    "f": (
        "two keys idle, one after the other",
        [("ready", 1, "CASE WHEN i <= $3 / 2 THEN 'A' ELSE 'B' END", EACH_MS)],
    ),
    "g": ("1,000 keys x 100, one after another", [("ready", 1, "'k' || ((i - 1) / 100)", EACH_MS)]),
    "h": ("a key per task, batches of 1,000 tied", [("ready", 1, "'k' || i", BATCHED)]),
}


def old_query(revision: str) -> Query:
    text = subprocess.run(
        ["git", "show", f"{revision}:src/duetime/store/postgres/hot_batch.sql"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return parse(text, "postgres", source=revision)["task_claim_keyed"]


async def build(db: str, backlog: int, only: list[str]) -> None:
    store = PostgresStore(db)
    await store.open()
    try:
        await store.migrate()
        await store.tenant_create(TENANT, tenant_id=TENANT)
        for label in SHAPES:
            settings = QueueSettings(max_concurrency=1000, max_concurrency_per_key=1)
            await store.queue_put(TENANT, label, settings)
    finally:
        await store.close()
    conn = await pg_connect(db)
    try:
        for label, (_, parts) in SHAPES.items():
            if only and label not in only:
                continue
            for status, share, key, at in parts:
                sql = _INSERT.replace("{key}", key).replace("{at}", at)
                await conn.execute(sql, label, status, max(1, int(backlog * share)))
        start = time.perf_counter()
        await conn.execute("VACUUM ANALYZE")
        print(f"# built; VACUUM ANALYZE in {time.perf_counter() - start:.1f} s", flush=True)
    finally:
        await conn.close()


async def prepare(conn: asyncpg.Connection[Any], name: str, query: Query) -> None:
    # PostgreSQL infers the parameter types, as for the store's own statements.
    await conn.execute(f"PREPARE {name} AS {query.text.rstrip().rstrip(';')}")


def execute(name: str, query: Query, label: str, limit: int) -> str:
    values = {"now": "NULL", "types": "'{worker}'", "queue": f"'{label}'", "names": "NULL"}
    values |= {"limit": str(limit), "lease_seconds": "NULL", "grace_seconds": "10"}
    values |= {"worker_id": "'w'", "tenant_id": f"'{TENANT}'", "max_concurrency": "1000"}
    values |= {"per_key": "1"}
    return f"EXECUTE {name}({', '.join(values[n] for n in query.names)})"


async def rolled_back(conn: asyncpg.Connection[Any], sql: str, *settings: str) -> tuple[float, Any]:
    tx = conn.transaction()
    await tx.start()
    try:
        for setting in settings:  # untimed, as claim_keyed_plan's round trip
            await conn.execute(setting)
        start = time.perf_counter()
        result = await conn.fetch(sql)
        return time.perf_counter() - start, result
    finally:
        await tx.rollback()


async def claims(db: str, old: Query, calls: int, limit: int, only: list[str]) -> None:
    new = hot.Q["task_claim_keyed"]
    conn = await pg_connect(db, server_settings={"jit": "off"})  # as the store connects
    try:
        print(f"{'shape':42} {'plan':7} {'old':>10} {'new':>10} {'claimed':>8} {'new read':>9}")
        for label, (about, _) in SHAPES.items():
            if only and label not in only:
                continue
            for mode in ("force_custom_plan", "force_generic_plan"):
                await conn.execute(f"SET plan_cache_mode = {mode}")
                await prepare(conn, "old", old)
                await prepare(conn, "new", new)
                run_old = execute("old", old, label, limit)
                run_new = execute("new", new, label, limit)
                times: dict[str, list[float]] = {"old": [], "new": []}
                got = {}
                # The working tree's statement as the store runs it (claim_keyed_plan: no sorts,
                # generic plans), here under either plan; the --old revision's as it ran there.
                settings = (hot.Q["claim_keyed_plan"].text, f"SET LOCAL plan_cache_mode = {mode}")
                for _ in range(calls):
                    for which, sql in (("old", run_old), ("new", run_new)):
                        setup = settings if which == "new" else ()
                        took, rows = await rolled_back(conn, sql, *setup)
                        times[which].append(took)
                        got[which] = {r["id"] for r in rows}
                assert got["old"] == got["new"], f"{label}: old and new claimed different tasks"
                explain = f"EXPLAIN (ANALYZE, FORMAT JSON) {run_new}"
                _, explained = await rolled_back(conn, explain, *settings)
                read = rows_read(json.loads(explained[0][0])[0]["Plan"])
                await conn.execute("DEALLOCATE old")
                await conn.execute("DEALLOCATE new")
                before, after = (statistics.median(times[w]) * 1e3 for w in ("old", "new"))
                print(
                    f"({label}) {about:38} {mode[6:12]:7} {before:7.2f} ms {after:7.2f} ms "
                    f"{len(got['new']):8} {read:9,}",
                    flush=True,
                )
    finally:
        await conn.close()


async def creates(with_index: str, without_index: str, rounds: int) -> None:
    """Median time of task_create_many of 1,000 tasks without a key and 1,000 with one (50
    keys), into two fresh databases, one without tasks_ready_keyed_idx, alternately."""
    stores = {}
    for db, indexed in ((with_index, True), (without_index, False)):
        store = PostgresStore(db)
        await store.open()
        await store.migrate()
        await store.tenant_create(TENANT, tenant_id=TENANT)
        if not indexed:
            conn = await pg_connect(db)
            try:
                await conn.execute("DROP INDEX tasks_ready_keyed_idx")
            finally:
                await conn.close()
        stores[indexed] = store
    times: dict[tuple[str, bool], list[float]] = {}
    try:
        for n in range(rounds):
            for indexed in (True, False) if n % 2 == 0 else (False, True):
                for kind in ("without a key", "with a key"):
                    keyed = kind == "with a key"
                    batch = [
                        NewTask(
                            tenant_id=TENANT,
                            target={"type": "worker"},
                            queue="keyed" if keyed else "plain",
                            concurrency_key=f"c{n}-{i % 50}" if keyed else None,
                        )
                        for i in range(1000)
                    ]
                    start = time.perf_counter()
                    await stores[indexed].task_create_many(batch)
                    times.setdefault((kind, indexed), []).append(time.perf_counter() - start)
        for (kind, indexed), values in sorted(times.items(), reverse=True):
            print(
                f"task_create_many of 1,000 {kind:14} {'with' if indexed else 'without':7} "
                f"the index: {statistics.median(values) * 1e3:7.2f} ms (median of {len(values)})",
                flush=True,
            )
    finally:
        for store in stores.values():
            await store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--pg-url", default=os.environ.get("DUETIME_TEST_PG_URL", BenchConfig.pg_url)
    )
    parser.add_argument("--backlog", type=int, default=100_000)
    parser.add_argument("--calls", type=int, default=9)
    parser.add_argument("--limit", type=int, default=10)
    parser.add_argument("--old", default="ead30aa", help="git revision of the old statement")
    parser.add_argument("--only", nargs="*", default=[])
    parser.add_argument("--creates", type=int, default=40, help="rounds of the create timing")
    args = parser.parse_args()
    old = old_query(args.old)
    print(f"# keyed claims of {args.limit} under an analyzed backlog of {args.backlog:,} per shape")
    print(f"# machine: {machine()}; speed: {cpu_speed()}")
    config = BenchConfig(store="postgres", pg_url=args.pg_url, database=None)
    with tempfile.TemporaryDirectory() as tmp:
        with bench_store(config, Path(tmp)) as db:
            asyncio.run(build(db, args.backlog, args.only))
            asyncio.run(claims(db, old, args.calls, args.limit, args.only))
        if args.creates:
            with bench_store(config, Path(tmp)) as one, bench_store(config, Path(tmp)) as other:
                asyncio.run(creates(one, other, args.creates))


if __name__ == "__main__":
    main()
