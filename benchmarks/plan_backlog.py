"""The plans and times of the statements the engine runs again and again, under fresh statistics
that know of a large backlog in the state each statement reads.

Builds a throwaway database holding ``--backlog`` rows of each state (ready push tasks, ready
worker tasks, ready tasks of a limited and of a keyed queue, due and future scheduled tasks,
running tasks half with expired leases, finished tasks past retention, due schedules), runs
``VACUUM ANALYZE`` (as autovacuum would), then for every statement prints, under PostgreSQL's
custom and generic plan, which scans of ``tasks``/``schedules`` it makes, whether it sorts, and
the median time per call (each call in a transaction rolled back; push claims after
``SET LOCAL enable_sort = off``, as the store runs them)::

    .venv/bin/python benchmarks/plan_backlog.py [--backlog 100000] [--calls 9] [--only NAME ...]
        [--show]

``--show`` prints each plan in full. A statement whose time grows with the backlog (a
sequential scan, a bitmap scan or a sort of the whole backlog where a walk of its index would
stop after a few rows) is one to fix (docs/adr/0002-skip-locked-batches.md).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg

from duetime.bench.runs import BenchConfig, bench_store, cpu_speed, machine, sql_value
from duetime.store.postgres import driver, hot
from duetime.store.postgres.backend import PostgresStore
from duetime.store.postgres.schema import connect as pg_connect
from duetime.store.sql import Query
from duetime.testing.plans import plan_nodes
from duetime.types import QueueSettings

TENANT = "acme"
CLAIM = {"now": "NULL", "names": "NULL", "lease_seconds": "NULL", "grace_seconds": "10"}
CLAIM |= {"worker_id": "'w'", "exclude": "'{}'", "limit": "10"}
WEEK = str(7 * 86400.0)


@dataclass
class Case:
    label: str
    statement: str
    args: dict[str, str]
    sort_off: bool = False  # run after claim_in_index_order, as the store does
    extra: dict[str, str] = field(default_factory=dict)


def cases(samples: dict[str, str]) -> list[Case]:
    """Every statement, with arguments aimed at the backlog it reads (``samples``: literals
    read from the database, such as a batch of live leases)."""
    t = f"'{TENANT}'"
    limited = CLAIM | {"tenant_id": t, "max_concurrency": "1000", "per_key": "1"}
    list_args = {"tenant_id": t, "statuses": "NULL", "queue": "NULL", "name": "NULL"}
    list_args |= {"schedule_id": "NULL", "labels": "NULL", "run_after": "NULL"}
    list_args |= {"run_before": "NULL", "cursor": "NULL", "limit": "50"}
    return [
        Case(
            "task_claim_push",
            "task_claim_push",
            CLAIM
            | {"tenant_ids": f"'{{{TENANT}}}'", "queues": "'{push}'", "shares": "'{10}'"}
            | {"types": "'{http}'"},
            sort_off=True,
        ),
        Case(
            "ready_push_queues",
            "ready_push_queues",
            {"tenant_id": "NULL", "queue": "NULL", "names": "NULL", "exclude": "'{}'"},
        ),
        Case(
            "task_claim_worker",
            "task_claim_worker",
            CLAIM | {"tenant_id": t, "queue": "'work'", "types": "'{worker}'"},
        ),
        Case(
            "task_claim_any (tenant, queue)",
            "task_claim_any",
            CLAIM | {"tenant_id": t, "queue": "'work'", "types": "'{http,worker}'"},
        ),
        Case(
            "task_claim_any (worker, no queue)",
            "task_claim_any",
            CLAIM | {"tenant_id": t, "queue": "NULL", "types": "'{worker}'"},
        ),
        Case(
            "task_claim_any (all)",
            "task_claim_any",
            CLAIM | {"tenant_id": "NULL", "queue": "NULL", "types": "'{http,worker}'"},
        ),
        Case(
            "task_claim_limited_worker",
            "task_claim_limited_worker",
            limited | {"queue": "'limw'", "types": "'{worker}'"},
        ),
        Case(
            "task_claim_limited_push",
            "task_claim_limited_push",
            limited | {"queue": "'limp'", "types": "'{http}'"},
            sort_off=True,
        ),
        Case(
            "task_claim_limited_any",
            "task_claim_limited_any",
            limited | {"queue": "'limw'", "types": "'{http,worker}'"},
        ),
        Case(
            "task_claim_keyed",
            "task_claim_keyed",
            limited | {"queue": "'keyed'", "types": "'{worker}'"},
        ),
        Case(
            "queue_limited_ready_worker",
            "queue_limited_ready_worker",
            {"tenant_ids": f"'{{{TENANT}}}'", "queues": "'{limw}'", "names": "NULL"}
            | {"types": "'{worker}'"},
        ),
        Case(
            "queue_limited_ready_push",
            "queue_limited_ready_push",
            {"tenant_ids": f"'{{{TENANT}}}'", "queues": "'{limp}'", "names": "NULL"}
            | {"types": "'{http}'"},
        ),
        Case(
            "queue_limited_ready",
            "queue_limited_ready",
            {"tenant_ids": f"'{{{TENANT}}}'", "queues": "'{limw}'", "names": "NULL"}
            | {"types": "'{http,worker}'"},
        ),
        Case(
            "task_complete_many (100)",
            "task_complete_many",
            {"now": "NULL", "completions": samples["completions"]},
        ),
        Case(
            "task_complete_leased (100)",
            "task_complete_leased",
            {"now": "NULL", "lease_ids": samples["lease_ids"], "results": samples["results"]}
            | {"logs": "NULL", "tenant_id": t},
        ),
        Case("task_promote_due", "task_promote_due", {"now": "NULL", "limit": "500"}),
        Case("task_due_ids", "task_due_ids", {"now": "NULL", "limit": "500"}),
        Case("task_next_due_at", "task_next_due_at", {}),
        Case(
            "task_heartbeat (100)",
            "task_heartbeat",
            {"now": "NULL", "lease_ids": samples["lease_ids"], "extend_seconds": "60"},
        ),
        Case("task_expired_leases", "task_expired_leases", {"now": "NULL", "limit": "100"}),
        Case(
            "schedule_due",
            "schedule_due",
            {"at": "now()", "horizon": "now() + interval '1 minute'", "limit": "100"},
        ),
        Case(
            "task_retention_sweep",
            "task_retention_sweep",
            {"now": "NULL", "succeeded": WEEK, "failed": WEEK, "cancelled": WEEK}
            | {"limit": "500"},
        ),
        Case("task_cancel_requested (100)", "task_cancel_requested", {"ids": samples["ids"]}),
        Case("task_list", "task_list", list_args),
        *(
            Case(
                f"task_list ?status={status}",
                "task_list_status",
                list_args | {"status": f"'{status}'"},
            )
            for status in ("ready", "failed", "succeeded")
        ),
        Case(
            "task_list ?status=ready,failed",
            "task_list",
            list_args | {"statuses": "'{ready,failed}'"},
        ),
    ]


def query(name: str) -> Query:
    return hot.Q[name] if name in hot.Q else driver.QUERIES[name]


# -- the backlog ----------------------------------------------------------------------------------

# One INSERT per state: (status, queue, target_type, due_at, extra column values).
_INSERT = """
INSERT INTO tasks (id, tenant_id, name, queue, status, target_type, target, payload, priority,
                   retry, timeout_seconds, concurrency_key, run_at, due_at, created_at,
                   updated_at, attempts, lease_id, lease_expires_at, worker_id, started_at,
                   finished_at)
SELECT
    -- time-ordered ids, as duetime.ids makes them (UUIDv7)
    encode(overlay(uuid_send(gen_random_uuid()) PLACING
           substring(int8send((extract(epoch FROM c) * 1000)::bigint + i) FROM 3)
           FROM 1 FOR 6), 'hex')::uuid,
    $1, 'job', $2, $3, $4,
    CASE WHEN $4 = 'worker' THEN '{"type": "worker"}'::jsonb
         ELSE '{"type": "http", "url": "https://example.com/hook"}'::jsonb END,
    '{}', (i % 3), '{}', 30, CASE WHEN $2 = 'keyed' THEN 'k' || (i % 50) END,
    d, d, c, c,
    CASE WHEN $3 IN ('running', 'succeeded') THEN 1 ELSE 0 END,
    CASE WHEN $3 = 'running' THEN gen_random_uuid() END,
    CASE WHEN $3 = 'running' THEN now() + (CASE WHEN i % 2 = 0 THEN -1 ELSE 1 END)
                                          * interval '10 minutes' END,
    CASE WHEN $3 = 'running' THEN 'w' END,
    CASE WHEN $3 IN ('running', 'succeeded') THEN c END,
    CASE WHEN $3 = 'succeeded' THEN c + interval '1 second' END
FROM generate_series(1, $5) AS i,
     LATERAL (SELECT now() - $6::text::interval + i * interval '1 millisecond' AS c) AS cc,
     LATERAL (SELECT c + $7::text::interval AS d) AS dd
"""

# (status, queue, target_type, created how long ago, due how long after creation)
STATES = {
    "ready push": ("ready", "push", "http", "1 hour", "0 s"),
    "ready push (limited)": ("ready", "limp", "http", "1 hour", "0 s"),
    "ready worker": ("ready", "work", "worker", "1 hour", "0 s"),
    "ready worker (limited)": ("ready", "limw", "worker", "1 hour", "0 s"),
    "ready worker (keyed)": ("ready", "keyed", "worker", "1 hour", "0 s"),
    "scheduled, due": ("scheduled", "later", "http", "2 hours", "1 hour"),
    "scheduled, future": ("scheduled", "later", "http", "1 hour", "1 day"),
    "running (half expired)": ("running", "run", "worker", "2 hours", "0 s"),
    "succeeded a month ago": ("succeeded", "done", "worker", "30 days", "0 s"),
}

# Each task that ran has its attempt row (the retention sweep deletes them with the task).
_ATTEMPTS = """
INSERT INTO attempts (task_id, number, started_at, finished_at, outcome, duration_ms, worker)
SELECT id, 1, started_at, finished_at, 'succeeded', 1000, 'w' FROM tasks WHERE status = 'succeeded'
"""

_SCHEDULES = """
INSERT INTO schedules (id, tenant_id, every, timezone, jitter_seconds, dst_nonexistent,
                       dst_ambiguous, task, overlap, catchup, catchup_window_seconds,
                       catchup_max_runs, anchor_at, next_run_at, materialized_until, created_at,
                       updated_at)
SELECT 'sch' || i, $1, '1h', 'UTC', 0, 'shift', 'first', '{"target": {"type": "worker"}}',
       CASE WHEN i % 2 = 0 THEN 'allow' ELSE 'skip' END, 'none', 0, 1, now() - interval '1 day',
       now() - interval '10 minutes' + i * interval '1 millisecond',
       now() - interval '10 minutes', now(), now()
FROM generate_series(1, $2) AS i
"""


async def build(db: str, backlog: int) -> None:
    store = PostgresStore(db)
    await store.open()
    try:
        await store.migrate()
        await store.tenant_create(TENANT, tenant_id=TENANT)
        await store.queue_put(TENANT, "limw", QueueSettings(max_concurrency=1000))
        await store.queue_put(TENANT, "limp", QueueSettings(max_concurrency=1000))
        await store.queue_put(
            TENANT, "keyed", QueueSettings(max_concurrency=1000, max_concurrency_per_key=1)
        )
    finally:
        await store.close()
    conn = await pg_connect(db)
    try:
        for label, (status, queue, target, ago, due) in STATES.items():
            start = time.perf_counter()
            await conn.execute(_INSERT, TENANT, queue, status, target, backlog, ago, due)
            print(f"# {backlog:,} {label} in {time.perf_counter() - start:.1f} s", flush=True)
        await conn.execute(_SCHEDULES, TENANT, backlog)
        await conn.execute(_ATTEMPTS)
        await conn.execute("VACUUM ANALYZE")
    finally:
        await conn.close()


async def read_samples(db: str) -> dict[str, str]:
    """Literals for the statements that name live leases and running tasks."""
    conn = await pg_connect(db)
    try:
        running = """SELECT id, lease_id FROM tasks
                     WHERE status = 'running' AND lease_expires_at > now() LIMIT 100"""
        rows = await conn.fetch(running)
        completions = [
            f'"({r["id"]},{r["lease_id"]},succeeded,2026-01-01T00:00:00Z,1,1,,,,w,,)"' for r in rows
        ]
        return {
            "completions": "'{" + ",".join(completions) + "}'",
            "lease_ids": "'{" + ",".join(str(r["lease_id"]) for r in rows) + "}'",
            "results": "'{" + ",".join("1" for _ in rows) + "}'",
            "ids": "'{" + ",".join(str(r["id"]) for r in rows) + "}'",
        }
    finally:
        await conn.close()


# -- plans and times ------------------------------------------------------------------------------


def shape(plan: dict[str, Any]) -> str:
    """The plan's scans of the big tables and its sorts, in plan order."""
    parts = []
    for n in plan_nodes(plan):
        kind = n["Node Type"]
        if kind in ("Sort", "Incremental Sort"):
            parts.append(kind)
        elif n.get("Relation Name") in ("tasks", "schedules"):
            index = n.get("Index Name")
            parts.append(f"{kind} {n['Relation Name']}" + (f" ({index})" if index else ""))
    return ", ".join(parts)


async def measure(
    conn: asyncpg.Connection[Any], case: Case, mode: str, calls: int, show: bool
) -> tuple[str, float]:
    q = query(case.statement)
    # PostgreSQL infers the parameter types, as for the store's own prepared statements.
    args = ", ".join(case.args[n] for n in q.names)
    prepare = f"PREPARE q AS {q.text.rstrip().rstrip(';')}"
    execute = f"EXECUTE q({args})" if args else "EXECUTE q"
    await conn.execute(f"SET plan_cache_mode = {mode}")
    await conn.execute(prepare)
    try:
        times = []
        for _ in range(calls):
            tx = conn.transaction()
            await tx.start()
            try:
                if case.sort_off:
                    await conn.execute(hot.Q["claim_in_index_order"].text)
                start = time.perf_counter()
                await conn.execute(execute)
                times.append(time.perf_counter() - start)
            finally:
                await tx.rollback()
        tx = conn.transaction()
        await tx.start()
        try:
            if case.sort_off:
                await conn.execute(hot.Q["claim_in_index_order"].text)
            raw = await conn.fetchval(f"EXPLAIN (ANALYZE, FORMAT JSON) {execute}")
            text = await conn.fetch(f"EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) {execute}")
        finally:
            await tx.rollback()
    finally:
        await conn.execute("DEALLOCATE q")
    plan = json.loads(raw)[0]["Plan"]
    if show:
        print("\n".join(r[0] for r in text))
    return shape(plan), statistics.median(times)


async def audit(db: str, samples: dict[str, str], only: list[str], calls: int, show: bool) -> None:
    conn = await pg_connect(db, server_settings={"jit": "off"})  # as the store connects
    try:
        for case in cases(samples):
            if only and not any(o in case.label for o in only):
                continue
            for mode in ("force_custom_plan", "force_generic_plan"):
                plan, median = await measure(conn, case, mode, calls, show)
                print(f"{case.label:38} {mode[6:12]:7} {median * 1e3:8.2f} ms  {plan}", flush=True)
    finally:
        await conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--pg-url", default=os.environ.get("DUETIME_TEST_PG_URL", BenchConfig.pg_url)
    )
    parser.add_argument("--backlog", type=int, default=100_000)
    parser.add_argument("--calls", type=int, default=9)
    parser.add_argument("--only", nargs="*", default=[])
    parser.add_argument("--show", action="store_true")
    parser.add_argument(
        "--database", default=None, help="audit this database (built by --keep) as it is"
    )
    parser.add_argument("--keep", default=None, help="build into this database and keep it")
    args = parser.parse_args()
    print(f"# plans under an analyzed backlog of {args.backlog:,} rows per state")
    print(f"# machine: {machine()}; speed: {cpu_speed()}")
    base = args.pg_url.rpartition("/")[0]
    if args.database is not None:
        db = f"{base}/{args.database}"
        asyncio.run(audit(db, asyncio.run(read_samples(db)), args.only, args.calls, args.show))
        return
    config = BenchConfig(store="postgres", pg_url=args.pg_url, database=None)
    if args.keep is not None:
        sql_value(args.pg_url, f'DROP DATABASE IF EXISTS "{args.keep}" WITH (FORCE)')
        sql_value(args.pg_url, f'CREATE DATABASE "{args.keep}"')
        config = BenchConfig(store="postgres", database=f"{base}/{args.keep}")
    with tempfile.TemporaryDirectory() as tmp, bench_store(config, Path(tmp)) as db:
        asyncio.run(build(db, args.backlog))
        asyncio.run(audit(db, asyncio.run(read_samples(db)), args.only, args.calls, args.show))


if __name__ == "__main__":
    main()
