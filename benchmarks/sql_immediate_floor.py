"""The floor under an immediate start of a task created through the SQL API (docs/benchmarks.md
"Immediate task start"), in one process on a fresh migrated PostgreSQL database:

- claim: ``PostgresStore.task_claim`` of the one ready worker task of a queue, right after its
  create: what the node must do, in a transaction of its own, once the producer's commit is
  heard (a task created over HTTP while a poll waits is claimed in its create's transaction);
- lease: from the return of a producer's ``duetime.create_task_v1`` (its commit) to the return
  of a ``LeaseHub.lease`` long poll that was already waiting on the queue: the ``NOTIFY``, the
  wake-up and the claim, without HTTP or a worker.

::

    .venv/bin/python benchmarks/sql_immediate_floor.py [--samples 300]
"""

from __future__ import annotations

import argparse
import asyncio
import time

import asyncpg

from duetime.bench.runs import as_role, machine, percentile, scratch_database
from duetime.lifecycle.lease import LeaseHub
from duetime.store.postgres.backend import PostgresStore
from duetime.types import ClaimRequest, NewTask, TargetType

WORKER = {"type": "worker"}


def _figures(name: str, ms: list[float]) -> str:
    return f"{name}: p50 {percentile(ms, 50):.2f} ms, p99 {percentile(ms, 99):.2f} ms"


async def main(samples: int) -> None:
    async with scratch_database("dt_sql_floor") as (url, role):
        await _measure(url, role, samples)


async def _measure(url: str, role: str, samples: int) -> None:
    store = PostgresStore(url)
    try:
        await store.open()
        await store.migrate()
        tenant = (await store.tenant_create("floor")).id
        claim = ClaimRequest(
            worker_id="w",
            limit=10,
            queue="claim",
            target_types=frozenset({TargetType.WORKER}),
            tenant_id=tenant,
        )
        claims: list[float] = []
        for _ in range(samples):
            await store.task_create_many([NewTask(tenant_id=tenant, target=WORKER, queue="claim")])
            t0 = time.perf_counter()
            assert await store.task_claim(claim)
            claims.append((time.perf_counter() - t0) * 1000)

        await store.sql_grant(tenant, role, max_payload_bytes=65536)
        producer = await asyncpg.connect(as_role(url, role))
        hub = LeaseHub(store)

        async def stays() -> bool:
            return False

        leases: list[float] = []
        try:
            for _ in range(samples):
                call = hub.lease(
                    stays, tenant, "imm", worker_id="w", max_tasks=10, lease_seconds=30,
                    wait_seconds=5, names=None,
                )  # fmt: skip
                poll = asyncio.ensure_future(call)
                await asyncio.sleep(0.01)  # the poll has claimed nothing and waits
                await producer.fetchrow("SELECT id FROM duetime.create_task_v1(queue => 'imm')")
                t0 = time.perf_counter()
                assert await poll
                leases.append((time.perf_counter() - t0) * 1000)
        finally:
            await producer.close()
        print(machine())
        print(_figures(f"claim of one ready task ({samples})", claims))
        print(_figures(f"producer's commit -> a waiting long poll's lease ({samples})", leases))
    finally:
        await store.close()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--samples", type=int, default=300)
    asyncio.run(main(ap.parse_args().samples))
