"""Creates through the SQL API, measured as benchmarks/peers/pgqueuer_bench.py measures PgQueuer's
enqueue, so the two compare side by side (benchmarks/peers/sql_side_by_side.sh):

- single: one process, one asyncpg connection as a producer role, awaiting each
  ``SELECT * FROM duetime.create_task_v1()`` (one transaction each, as PgQueuer's
  ``Queries.enqueue``) for 5 s after 200 warm-ups: tasks/s.
- bulk: ``duetime.create_tasks_v1`` with 1,000 tasks per call, 20,000 tasks: tasks/s.
- floor: the leanest single creates on the same database and connection shape, for reading
  ``single`` against: a bare ``INSERT`` of a ready worker task row into ``duetime.tasks`` as its
  owner (its indexes and its count and audit triggers, none of the API's checks) and the same
  insert with the triggers off, beside an insert into a job table of PgQueuer's shape (eight
  columns, one secondary index, a NOTIFY per statement): rows/s, one transaction each.

Each measured run gets a fresh database migrated by duetime, a tenant and a login role granted it
(``duetime tenant grant-sql``), dropped afterwards; every run holds /tmp/bench.lock. No node runs:
these are the database's create costs as a producer sees them (a node would only listen).

    .venv/bin/python benchmarks/sql_api_create.py --repeat 3 [--only single,bulk,floor]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import fcntl
import json
import secrets
import statistics
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator

import asyncpg

from duetime.store.postgres.backend import PostgresStore

PG = "postgresql://postgres@127.0.0.1:5432"
LOCK = "/tmp/bench.lock"
FIGURES = {"single", "bulk", "floor"}


@contextlib.contextmanager
def bench_lock() -> Iterator[None]:
    with open(LOCK, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@contextlib.asynccontextmanager
async def producer() -> AsyncIterator[asyncpg.Connection]:
    """A connection as a login role granted a tenant, on a fresh migrated database."""
    name = f"dt_sqlapi_bench_{secrets.token_hex(4)}"
    role = f"dt_bench_{secrets.token_hex(4)}"
    admin = await asyncpg.connect(f"{PG}/test")
    try:
        await admin.execute(f"CREATE DATABASE {name}")
        await admin.execute(f"CREATE ROLE {role} LOGIN")
        store = PostgresStore(f"{PG}/{name}")
        await store.open()
        try:
            await store.migrate()
            tenant = (await store.tenant_create("bench")).id
            await store.sql_grant(tenant, role, max_payload_bytes=256 * 1024)
        finally:
            await store.close()
        conn = await asyncpg.connect(f"postgresql://{role}@127.0.0.1:5432/{name}")
        try:
            yield conn
        finally:
            await conn.close()
    finally:
        await admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        await admin.execute(f"DROP ROLE IF EXISTS {role}")
        await admin.close()


async def single(seconds: float = 5.0, warmup: int = 200) -> dict[str, float]:
    async with producer() as conn:
        sql = "SELECT * FROM duetime.create_task_v1()"
        for _ in range(warmup):
            await conn.fetchrow(sql)
        n, t0 = 0, time.perf_counter()
        while (elapsed := time.perf_counter() - t0) < seconds:
            await conn.fetchrow(sql)
            n += 1
    return {"jobs/s": n / elapsed}


async def bulk(tasks: int = 20_000, per_call: int = 1000) -> dict[str, float]:
    body = json.dumps([{"target": {"type": "worker"}}] * per_call)
    async with producer() as conn:
        sql = "SELECT * FROM duetime.create_tasks_v1($1::jsonb)"
        t0 = time.perf_counter()
        for _ in range(tasks // per_call):
            rows = await conn.fetch(sql, body)
            assert len(rows) == per_call
        elapsed = time.perf_counter() - t0
    return {"jobs/s": tasks / elapsed}


TASK_ROW = """
INSERT INTO tasks (id, tenant_id, queue, status, target_type, target, payload, retry,
                   timeout_seconds, run_at, due_at, created_at, updated_at)
VALUES (encode(int8send((floor(date_part('epoch', clock_timestamp()) * 1000)::bigint << 16)
                        | 28672) || substring(uuid_send(gen_random_uuid()) FROM 9 FOR 8),
               'hex')::uuid,
        $1, 'default', 'ready', 'worker', '{"type": "worker"}', 'null', '{}', 30,
        now(), now(), now(), now())
"""
JOB_TABLE = """
CREATE TABLE public.floor_jobs (
    id bigserial PRIMARY KEY, priority integer NOT NULL, created timestamptz DEFAULT now(),
    updated timestamptz DEFAULT now(), heartbeat timestamptz DEFAULT now(),
    execute_after timestamptz DEFAULT now(), status text NOT NULL, entrypoint text NOT NULL,
    payload bytea);
CREATE INDEX ON public.floor_jobs (priority, id, status);
CREATE FUNCTION public.floor_notify() RETURNS trigger LANGUAGE plpgsql AS
    $$ BEGIN PERFORM pg_notify('floor', 'x'); RETURN NULL; END $$;
CREATE TRIGGER floor_jobs_notify AFTER INSERT ON public.floor_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION public.floor_notify();
"""
JOB_ROW = "INSERT INTO public.floor_jobs (priority, status, entrypoint) VALUES (0, 'queued', 'x')"


async def floor(seconds: float = 3.0, warmup: int = 200) -> dict[str, float]:
    """Rows/s of the three bare inserts (see the module), one after the other on one database."""
    async with producer() as conn:
        database = await conn.fetchval("SELECT current_database()")
        owner = await asyncpg.connect(
            f"{PG}/{database}", server_settings={"search_path": "duetime"}
        )
        try:
            tenant = await owner.fetchval("SELECT tenant_id FROM sql_producers LIMIT 1")
            await owner.execute(JOB_TABLE)

            async def rate(sql: str, *args: object) -> float:
                for _ in range(warmup):
                    await owner.execute(sql, *args)
                n, t0 = 0, time.perf_counter()
                while (elapsed := time.perf_counter() - t0) < seconds:
                    await owner.execute(sql, *args)
                    n += 1
                return n / elapsed

            figures = {"task_row/s": await rate(TASK_ROW, tenant)}
            await owner.execute("SET session_replication_role = replica")  # triggers off
            figures["task_row_no_triggers/s"] = await rate(TASK_ROW, tenant)
            await owner.execute("RESET session_replication_role")
            figures["job_row/s"] = await rate(JOB_ROW)
            return figures
        finally:
            await owner.close()


def measure(name: str, repeat: int, run: Callable[[], dict[str, float]]) -> None:
    results: list[dict[str, float]] = []
    for i in range(repeat):
        with bench_lock():
            results.append(run())
        print(
            f"  {name} run {i + 1}: " + ", ".join(f"{k} {v:,.1f}" for k, v in results[-1].items())
        )
        sys.stdout.flush()
    med = {k: statistics.median(r[k] for r in results) for k in results[0]}
    print(f"  {name} median: " + ", ".join(f"{k} {v:,.1f}" for k, v in med.items()), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", default="single,bulk", help="a comma list: single, bulk, floor")
    args = ap.parse_args()
    only = set(args.only.split(","))
    if not only <= FIGURES:
        ap.error(f"--only takes {', '.join(sorted(FIGURES))}")
    try:
        import uvloop  # as PgQueuer's side runs

        run: Callable[..., dict[str, float]] = uvloop.run
    except ImportError:
        run = asyncio.run
    print(f"# duetime SQL API creates, asyncpg {asyncpg.__version__}", flush=True)
    if "single" in only:
        print("single create (one process awaiting each call, 5 s after 200 warm-ups):")
        measure("single", args.repeat, lambda: run(single()))
    if "bulk" in only:
        print("bulk create (1,000 per call, 20,000 tasks):")
        measure("bulk", args.repeat, lambda: run(bulk()))
    if "floor" in only:
        print("floor (bare inserts, one transaction each, 3 s each after 200 warm-ups):")
        measure("floor", args.repeat, lambda: run(floor()))


if __name__ == "__main__":
    main()
