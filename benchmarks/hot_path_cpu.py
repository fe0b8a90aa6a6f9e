"""The store's hot path in process CPU seconds (steadier than rates on a busy machine): create
``N`` (env, default 20,000) ``http`` tasks in batches of 1,000, claim, heartbeat and complete them
500 at a time, on a fresh store. A/B two checkouts with ``PYTHONPATH=<checkout>/src``::

    N=10000 .venv/bin/python benchmarks/hot_path_cpu.py sqlite
    N=10000 .venv/bin/python benchmarks/hot_path_cpu.py postgres   # DUETIME_BENCH_PG_URL
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
import uuid

from duetime.store import store_from_url
from duetime.store.postgres.schema import connect as pg_connect
from duetime.types import AttemptOutcome, ClaimRequest, Completion, NewTask, TargetType, TaskStatus

N = int(os.environ.get("N", "20000"))
PG = os.environ.get("DUETIME_BENCH_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")
HTTP = {"type": "http", "url": "http://127.0.0.1:9/x"}


async def measure(url: str) -> dict[str, float]:
    store = store_from_url(url)
    await store.open()
    await store.migrate()
    tenant = (await store.tenant_create("acme")).id
    spent: dict[str, float] = {}
    start = time.process_time()
    for _ in range(0, N, 1000):
        batch = [NewTask(tenant_id=tenant, target=HTTP, payload_json="1") for _ in range(1000)]
        await store.task_create_many(batch)
    spent["create"], start = time.process_time() - start, time.process_time()
    leases = []
    while got := await store.task_claim(ClaimRequest("w", 500, frozenset({TargetType.HTTP}))):
        leases.extend(got)
    spent["claim"], start = time.process_time() - start, time.process_time()
    chunks = [leases[i : i + 500] for i in range(0, len(leases), 500)]
    for chunk in chunks:
        await store.task_heartbeat([lease.lease_id for lease in chunk], 60)
    spent["heartbeat"], start = time.process_time() - start, time.process_time()
    for chunk in chunks:
        await store.task_complete_many(
            [
                Completion(
                    lease.task.id,
                    lease.lease_id,
                    AttemptOutcome.SUCCEEDED,
                    lease.task.started_at or lease.task.run_at,
                    1.0,
                    "1",
                    status=TaskStatus.SUCCEEDED,
                )
                for lease in chunk
            ]
        )
    spent["complete"] = time.process_time() - start
    assert len(leases) == N, len(leases)
    await store.close()
    return spent


async def admin(statement: str) -> None:
    conn = await pg_connect(PG)
    try:
        await conn.execute(statement)
    finally:
        await conn.close()


def main() -> None:
    if sys.argv[1] == "sqlite":
        spent = asyncio.run(measure(f"sqlite:///{tempfile.mkdtemp()}/hot.db"))
    else:
        name = f"duetime_hot_{uuid.uuid4().hex[:8]}"
        asyncio.run(admin(f'CREATE DATABASE "{name}"'))
        try:
            spent = asyncio.run(measure(f"{PG.rpartition('/')[0]}/{name}"))
        finally:
            asyncio.run(admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    print(" ".join(f"{phase}_cpu_s={seconds:.3f}" for phase, seconds in spent.items()))


if __name__ == "__main__":
    main()
