"""A worker's lease while its queue holds a ready backlog that PostgreSQL's statistics know of.

Creates ``--backlog`` ready ``worker`` tasks in one queue of a throwaway database, runs ``ANALYZE``
(as autovacuum does once a table has changed enough), then times ``--leases`` claims of
``--limit`` tasks each through the store, as the lease API makes them, and prints the median
and p90 per claim::

    .venv/bin/python benchmarks/lease_backlog.py [--backlog 100000] [--limit 10] [--leases 50]
        [--max-concurrency N]

``--max-concurrency`` makes the queue a limited one (its claims take the locked path).

A claim that joins every candidate to ``queues`` (is it paused or limited?) lets the planner,
under such statistics, read and sort the whole backlog for every lease; the store's claim asks
of the queue once (``claimable_this_queue`` in ``src/duetime/store/postgres/hot_batch.sql``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path

from duetime.bench.runs import BenchConfig, bench_store, cpu_speed, machine
from duetime.store.postgres.backend import PostgresStore
from duetime.store.postgres.schema import connect as pg_connect
from duetime.types import ClaimRequest, NewTask, QueueSettings, TargetType


async def run(
    db: str, backlog: int, limit: int, leases: int, max_concurrency: int | None
) -> list[float]:
    store = PostgresStore(db)
    await store.open()
    try:
        await store.migrate()
        tenant = (await store.tenant_create("bench")).id
        if max_concurrency is not None:
            await store.queue_put(tenant, "q", QueueSettings(max_concurrency=max_concurrency))
        new = NewTask(tenant_id=tenant, target={"type": "worker"}, queue="q", name="noop")
        for first in range(0, backlog, 1000):
            await store.task_create_many([new] * min(1000, backlog - first))
        conn = await pg_connect(db)
        try:
            await conn.execute("VACUUM ANALYZE tasks")
        finally:
            await conn.close()
        request = ClaimRequest(
            worker_id="w",
            limit=limit,
            target_types=frozenset({TargetType.WORKER}),
            tenant_id=tenant,
            queue="q",
        )
        times = []
        for _ in range(leases):
            start = time.perf_counter()
            claimed = await store.task_claim(request)
            times.append(time.perf_counter() - start)
            assert len(claimed) == limit, len(claimed)
        return times
    finally:
        await store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--pg-url", default=os.environ.get("DUETIME_TEST_PG_URL", BenchConfig.pg_url)
    )
    parser.add_argument("--backlog", type=int, default=100_000)
    parser.add_argument("--limit", type=int, default=10)
    parser.add_argument("--leases", type=int, default=50)
    parser.add_argument("--max-concurrency", type=int, default=None)
    args = parser.parse_args()
    limited = "" if args.max_concurrency is None else f", max_concurrency {args.max_concurrency}"
    print(f"# lease under a ready backlog: {args.backlog:,} ready, claims of {args.limit}{limited}")
    print(f"# machine: {machine()}; speed: {cpu_speed()}")
    with tempfile.TemporaryDirectory() as tmp:
        config = BenchConfig(store="postgres", pg_url=args.pg_url)
        with bench_store(config, Path(tmp)) as db:
            times = asyncio.run(
                run(db, args.backlog, args.limit, args.leases, args.max_concurrency)
            )
    ordered = sorted(times)
    p90 = ordered[int(len(ordered) * 0.9) - 1]
    print(
        f"claim of {args.limit}: median {statistics.median(times) * 1e3:.2f} ms, "
        f"p90 {p90 * 1e3:.2f} ms, over {len(times)} claims"
    )


if __name__ == "__main__":
    main()
