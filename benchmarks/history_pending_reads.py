"""What a history read costs while records wait to be moved (PostgreSQL, ADR 0008).

PostgreSQL writes the audit trail behind: each statement's records go into ``history_pending``,
and the leader moves them into the indexed ``history`` table once the hot path leaves room
(at most 5 s later). Reads take both tables, so a read right after a burst also unnests every
pending record. This runs ``--tasks`` worker tasks through create, claim and ack on a fresh
database (no mover running: every record stays pending), then times ``history_query`` — a
tenant's newest page, one name's, one task's — with every record pending, and again once they
are moved and the table analyzed::

    .venv/bin/python benchmarks/history_pending_reads.py [--tasks 20000] [--repeat 20]

Prints the median milliseconds per read, through the store (planning included).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

from duetime.bench.runs import ADMIN_URL, BenchConfig, bench_store
from duetime.history.events import HistoryFilter
from duetime.store.postgres.backend import PostgresStore
from duetime.store.postgres.schema import connect as pg_connect
from duetime.types import ClaimRequest, NewTask, TargetType


async def median_ms(store: PostgresStore, query: HistoryFilter, repeat: int) -> float:
    took = []
    for _ in range(repeat):
        start = time.perf_counter()
        await store.history_query(query)
        took.append((time.perf_counter() - start) * 1000)
    return statistics.median(took)


async def one_run(url: str, tasks: int, repeat: int) -> None:
    store = PostgresStore(url)
    await store.open()
    try:
        await store.migrate()
        new = NewTask(tenant_id="default", target={"type": "worker"}, name="noop", queue="q")
        made = []
        for start in range(0, tasks, 1000):
            made += await store.task_create_many([new] * min(1000, tasks - start))
        claim = ClaimRequest(
            worker_id="bench",
            limit=500,
            target_types=frozenset({TargetType.WORKER}),
            queue="q",
            tenant_id="default",
        )
        while leases := await store.task_claim(claim):
            ids = [lease.lease_id for lease in leases]
            await store.task_complete_leased("default", ids, [None] * len(ids))
        reads = {
            "tenant's newest page": HistoryFilter(tenant_id="default", limit=50),
            "one name's": HistoryFilter(tenant_id="default", name="noop", limit=50),
            "one task's": HistoryFilter(
                tenant_id="default", task_id=made[len(made) // 2].task.id, limit=50
            ),
        }
        conn = await pg_connect(url)
        try:
            pending = await conn.fetchval(
                "SELECT count(*) FROM history_pending p CROSS JOIN LATERAL unnest(p.rows)"
            )
            print(f"{pending} records pending:")
            for label, query in reads.items():
                print(f"  {label}: {await median_ms(store, query, repeat):.2f} ms")
            while await store.history_pending_move(100):
                pass
            await conn.execute("ANALYZE history")
            print("all moved:")
            for label, query in reads.items():
                print(f"  {label}: {await median_ms(store, query, repeat):.2f} ms")
        finally:
            await conn.close()
    finally:
        await store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--admin-url", default=ADMIN_URL)
    parser.add_argument("--tasks", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=20, help="reads of each kind")
    args = parser.parse_args()
    print(
        f"machine: {platform.machine()} {os.cpu_count()} cpus, Python "
        f"{platform.python_version()} | tasks={args.tasks} | median of {args.repeat} reads"
    )
    config = BenchConfig(store="postgres", pg_url=args.admin_url)
    with bench_store(config, Path(tempfile.gettempdir())) as url:
        asyncio.run(one_run(url, args.tasks, args.repeat))


if __name__ == "__main__":
    main()
