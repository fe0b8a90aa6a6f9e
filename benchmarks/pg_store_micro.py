"""Micro-benchmark of the PostgreSQL store's hot path, without the API or the engine around it.

Creates N ``worker`` tasks due one second ahead in one ``task_create_many`` call, promotes them,
then claims and completes them in batches, and prints tasks/s for each phase; last, N/5 single-task
creates from 32 concurrent callers. Runs in a throwaway
database on the server named by ``--admin-url`` (dropped at the end)::

    .venv/bin/python benchmarks/pg_store_micro.py [--tasks 20000] [--batch 500] [--repeat 3]
        [--without history,counts] [--drop-index tasks_tenant_idx,...]

The store's own clock (the database's now()) decides what is due: nothing is pinned.
``--without`` disables triggers on ``tasks`` and ``attempts`` after the migrations, to measure
what they cost the hot path (never do this to a real store): ``history`` is the audit trail's
(a history row per state change and per attempt), ``counts`` the maintained task counts'.
``--drop-index`` drops indexes of the fresh store the same way, to price what each one costs
every write (the statements that read through it get slower or change plan: read only the
phases that do not use it).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import time
import uuid
from collections.abc import Callable

import asyncpg

from duetime.bench.runs import ADMIN_URL, due_after_creating, sleep_until_due
from duetime.store.postgres.backend import PostgresStore
from duetime.store.postgres.schema import connect as pg_connect
from duetime.types import AttemptOutcome, ClaimRequest, Completion, NewTask, TargetType, TaskStatus

TRIGGERS = {
    "history": (
        ("tasks", "tasks_history_insert"),
        ("tasks", "tasks_history_update"),
        ("attempts", "attempts_history_insert"),
    ),
    "counts": (
        ("tasks", "task_counts_insert"),
        ("tasks", "task_counts_update"),
        ("tasks", "task_counts_delete"),
    ),
}
PHASES = (
    "create_many",
    "promote",
    "claim",
    "complete_many",
    "claim+complete",
    "single creates x32",
)


async def run_once(
    url: str, n: int, batch: int, without: list[str], drop: list[str]
) -> dict[str, float]:
    """One pass over a fresh, migrated database; returns tasks/s per phase."""
    store = PostgresStore(url, pool_min=2, pool_max=4)
    await store.open()
    try:
        await store.migrate()
        if without or drop:
            conn = await pg_connect(url)
            try:
                for table, trigger in (t for name in without for t in TRIGGERS[name]):
                    await conn.execute(f"ALTER TABLE {table} DISABLE TRIGGER {trigger}")
                for index in drop:
                    await conn.execute(f'DROP INDEX "{index}"')
            finally:
                await conn.close()
        tenant = (await store.tenant_create("bench")).id
        due = await due_after_creating(store, n)
        tasks = [
            NewTask(tenant_id=tenant, target={"type": "worker"}, name="noop", run_at=due)
            for _ in range(n)
        ]
        rates: dict[str, float] = {}

        t0 = time.perf_counter()
        await store.task_create_many(tasks)
        rates["create_many"] = n / (time.perf_counter() - t0)

        await sleep_until_due(store, due)
        t0 = time.perf_counter()
        promoted = 0
        while promoted < n:
            promoted += await store.task_promote_due(5000)
        rates["promote"] = n / (time.perf_counter() - t0)

        request = ClaimRequest(
            worker_id="bench",
            limit=batch,
            target_types=frozenset({TargetType.WORKER}),
            queue="default",
            lease_seconds=60,
        )
        claim_s = complete_s = 0.0
        done = 0
        while done < n:
            t0 = time.perf_counter()
            leases = await store.task_claim(request)
            t1 = time.perf_counter()
            started = await store.now()
            results = await store.task_complete_many(
                [
                    Completion(
                        task_id=lease.task.id,
                        lease_id=lease.lease_id,
                        outcome=AttemptOutcome.SUCCEEDED,
                        started_at=started,
                        duration_ms=0.1,
                        worker="bench",
                        status=TaskStatus.SUCCEEDED,
                    )
                    for lease in leases
                ]
            )
            t2 = time.perf_counter()
            assert all(r.accepted for r in results), "a fresh lease was refused"
            claim_s += t1 - t0
            complete_s += t2 - t1
            done += len(leases)
        rates["claim"] = n / claim_s
        rates["complete_many"] = n / complete_s
        rates["claim+complete"] = n / (claim_s + complete_s)

        # Single creates from many concurrent callers (an API node under load): group commit.
        single = NewTask(tenant_id=tenant, target={"type": "worker"}, name="noop")
        callers, per_caller = 32, max(1, n // 160)

        async def caller() -> None:
            for _ in range(per_caller):
                await store.task_create_many([single])

        t0 = time.perf_counter()
        await asyncio.gather(*(caller() for _ in range(callers)))
        rates["single creates x32"] = callers * per_caller / (time.perf_counter() - t0)
        return rates
    finally:
        await store.close()


async def with_database(admin_url: str, body: Callable[[str], object]) -> object:
    name = f"duetime_bench_{uuid.uuid4().hex[:10]}"
    admin = await asyncpg.connect(admin_url)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
        try:
            result = body(f"{admin_url.rpartition('/')[0]}/{name}")
            if asyncio.iscoroutine(result):
                result = await result
            return result
        finally:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--admin-url", default=ADMIN_URL)
    parser.add_argument("--tasks", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--without",
        default="",
        help="comma list of trigger groups to disable: " + ", ".join(TRIGGERS),
    )
    parser.add_argument("--drop-index", default="", help="comma list of indexes to drop")
    args = parser.parse_args()
    without = [w for w in args.without.split(",") if w]
    drop = [d for d in args.drop_index.split(",") if d]
    if unknown := set(without) - set(TRIGGERS):
        parser.error(f"--without: unknown {sorted(unknown)}; choose from {sorted(TRIGGERS)}")

    admin = await asyncpg.connect(args.admin_url)
    version = await admin.fetchval("SHOW server_version")
    await admin.close()
    print(
        f"machine: {platform.machine()} {os.cpu_count()} cpus, Python {platform.python_version()}"
        f" | store: PostgreSQL {version} | tasks={args.tasks} batch={args.batch}"
        f" repeat={args.repeat} (median)"
        f"{' without ' + ','.join(without) if without else ''}"
        f"{' dropped ' + ','.join(drop) if drop else ''}"
    )
    runs: list[dict[str, float]] = []
    for _ in range(args.repeat):
        rates = await with_database(
            args.admin_url, lambda url: run_once(url, args.tasks, args.batch, without, drop)
        )
        assert isinstance(rates, dict)
        runs.append(rates)
    for phase in PHASES:
        values = [r[phase] for r in runs]
        runs_text = ", ".join(f"{v:,.0f}" for v in values)
        print(f"{phase:>18}: {statistics.median(values):>9,.0f} tasks/s   (runs: {runs_text})")


if __name__ == "__main__":
    asyncio.run(main())
