"""The cost of the task-count triggers (migration ``0004_counters``) on the statements the batch
paths run, on PostgreSQL: the same 500-row INSERT and status UPDATE of ``tasks``, timed with the
counting triggers enabled and disabled (``ALTER TABLE tasks DISABLE TRIGGER USER``) in
alternating blocks, in a throwaway database::

    .venv/bin/python benchmarks/count_triggers.py [--rounds 10] [--rows 500]

Prints the median time per statement each way and the difference per row.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time

import asyncpg

from duetime.store.postgres.backend import PostgresStore
from duetime.store.postgres.schema import connect as pg_connect

ADMIN_URL = os.environ.get("DUETIME_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")
NAME = "duetime_bench_count_triggers"
INSERT = """
INSERT INTO tasks (id, tenant_id, name, queue, status, target_type, target, payload, retry,
                   timeout_seconds, run_at, due_at, created_at, updated_at)
SELECT gen_random_uuid(), 't', 'n', 'q' || (g % 4), 'ready', 'worker', '{"type":"worker"}',
       repeat('x', 200), '{"max_attempts":3}', 30, now(), now(), now(), now()
FROM generate_series(1, $1) AS g
"""
UPDATE = """
UPDATE tasks SET status = 'succeeded', finished_at = now()
WHERE id IN (SELECT id FROM tasks WHERE status = 'ready' LIMIT $1)
"""
SWITCH = {
    True: "ALTER TABLE tasks ENABLE TRIGGER USER",
    False: "ALTER TABLE tasks DISABLE TRIGGER USER",
}


async def main(rounds: int, rows: int) -> None:
    admin = await asyncpg.connect(ADMIN_URL)
    await admin.execute(f'DROP DATABASE IF EXISTS "{NAME}" WITH (FORCE)')
    await admin.execute(f'CREATE DATABASE "{NAME}"')
    url = f"{ADMIN_URL.rpartition('/')[0]}/{NAME}"
    try:
        store = PostgresStore(url)
        await store.open()
        await store.migrate()
        await store.close()
        conn = await pg_connect(url)
        times: dict[tuple[bool, str], list[float]] = {
            (on, kind): [] for on in (True, False) for kind in ("insert", "update")
        }
        for n in range(rounds):
            for on in (True, False) if n % 2 else (False, True):
                await conn.execute(SWITCH[on])
                for _ in range(10):
                    for kind, sql in (("insert", INSERT), ("update", UPDATE)):
                        t0 = time.perf_counter()
                        await conn.execute(sql, rows)
                        times[(on, kind)].append(time.perf_counter() - t0)
        await conn.close()
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{NAME}" WITH (FORCE)')
        await admin.close()
    for kind in ("insert", "update"):
        on = statistics.median(times[(True, kind)]) * 1000
        off = statistics.median(times[(False, kind)]) * 1000
        print(
            f"{kind} of {rows} rows: with triggers {on:.2f} ms, without {off:.2f} ms, "
            f"+{on - off:.2f} ms (+{(on / off - 1) * 100:.0f} %), "
            f"{(on - off) * 1000 / rows:.1f} µs per row (n={len(times[(True, kind)])} each)"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--rows", type=int, default=500)
    args = parser.parse_args()
    asyncio.run(main(args.rounds, args.rows))
