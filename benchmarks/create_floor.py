"""How fast one awaiting caller can create anything durable on this machine, layer by layer
(SPEC §6 "single creates through ``duetime.AsyncClient`` ≥ 1,500/s").

Each floor adds one layer to the one below it and is timed from one caller that awaits every
call, for ``--seconds`` after a warm-up, ``--repeat`` times in turn (medians reported)::

    pg-select        asyncpg: SELECT 1, a round trip to PostgreSQL
    pg-min-insert    asyncpg: INSERT one row into a 4-column table, autocommit (a durable commit)
    http-raw         aiohttp -> a bare ASGI app on uvicorn (uvloop, httptools) answering 201
    http-raw-insert  that bare app doing pg-min-insert per request on one connection: the leanest
                     durable create over HTTP that Python can serve here (no framework, no
                     validation, no auth, no audit, one index)
    store-create     duetime's PostgresStore.task_create_many of one task, in process
    sdk-create       duetime.AsyncClient.create_task against `duetime serve` at its defaults
                     (the SPEC figure: `duetime bench run create-sdk-single`)

and the same for batches of 1,000 (rows/s; SPEC §6 "batch ≥ 40,000 tasks/s"):

    pg-min-batch     asyncpg: INSERT 1,000 rows into that 4-column table through unnest, autocommit
    store-batch-bare the store's task_create_many of 1,000 tasks with the audit trail's and the
                     maintained counts' triggers disabled (an experiment on a throwaway database,
                     never on a real store): what the task rows and their indexes cost alone
    store-batch      the store's task_create_many of 1,000 tasks, in process
    sdk-batch        duetime.AsyncClient.create_tasks of 1,000 against `duetime serve` (the SPEC
                     figure: `duetime bench run create-sdk-batch`)

    .venv/bin/python benchmarks/create_floor.py [--seconds 4] [--repeat 3] [--only a,b]

Everything runs on loopback in throwaway databases on ``--pg-url``'s server (dropped at the end).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import uvloop
from starlette.types import Receive, Send

from duetime.bench.harness import free_port, wait_http
from duetime.bench.runs import BenchConfig, bench_store, cpu_speed, machine
from duetime.bench.sdk_scenarios import create_sdk_batch, create_sdk_single
from duetime.store.postgres.schema import connect as pg_connect

MIN_TABLE = (
    "CREATE TABLE IF NOT EXISTS floor_jobs"
    " (id uuid PRIMARY KEY, payload jsonb, run_at timestamptz, status text)"
)
MIN_INSERT = "INSERT INTO floor_jobs VALUES ($1, $2, now(), 'queued')"
MIN_BATCH = (
    "INSERT INTO floor_jobs SELECT i, p, now(), 'queued'"
    " FROM unnest($1::uuid[], $2::jsonb[]) AS x (i, p)"
)
BATCH = 1000
TRIGGERS = (
    "tasks_history_insert",
    "task_counts_insert",
)
BODY = b'{"target": {"type": "worker"}, "payload": {"k": "v"}}'
FLOORS = (
    "pg-select",
    "pg-min-insert",
    "http-raw",
    "http-raw-insert",
    "store-create",
    "sdk-create",
    "pg-min-batch",
    "store-batch-bare",
    "store-batch",
    "sdk-batch",
)


async def _rate(call: Callable[[], Awaitable[object]], seconds: float) -> float:
    """Calls per second of ``call`` awaited back to back for ``seconds`` after 200 warm-ups."""
    for _ in range(200):
        await call()
    done = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        await call()
        done += 1
    return done / (time.perf_counter() - start)


async def _pg(db: str, seconds: float, floor: str) -> float:
    conn = await pg_connect(db)
    try:
        await conn.execute(MIN_TABLE)
        if floor == "pg-select":
            return await _rate(lambda: conn.fetchval("SELECT 1"), seconds)
        if floor == "pg-min-insert":
            return await _rate(
                lambda: conn.execute(MIN_INSERT, uuid.uuid4(), BODY.decode()), seconds
            )
        payloads = [BODY.decode()] * BATCH
        return BATCH * await _rate(
            lambda: conn.execute(MIN_BATCH, [uuid.uuid4() for _ in payloads], payloads), seconds
        )
    finally:
        await conn.close()


async def _http(url: str, seconds: float) -> float:
    async with aiohttp.ClientSession() as session:

        async def post() -> None:
            async with session.post(
                url, data=BODY, headers={"content-type": "application/json"}
            ) as r:
                await r.read()
                if r.status != 201:
                    raise RuntimeError(f"{url} answered {r.status}")

        return await _rate(post, seconds)


async def _store(db: str, seconds: float, floor: str) -> float:
    from duetime.store import open_store
    from duetime.types import NewTask

    store = await open_store(db, migrate=True)
    later = datetime.now(UTC) + timedelta(hours=1)
    new = NewTask(
        tenant_id="default", target={"type": "worker"}, payload_json='{"k": "v"}', run_at=later
    )
    try:
        if floor == "store-create":
            return await _rate(lambda: store.task_create_many([new]), seconds)
        if floor == "store-batch-bare":
            conn = await pg_connect(db)
            try:
                for trigger in TRIGGERS:
                    await conn.execute(f"ALTER TABLE tasks DISABLE TRIGGER {trigger}")
            finally:
                await conn.close()
        batch = [new] * BATCH
        return BATCH * await _rate(lambda: store.task_create_many(batch), seconds)
    finally:
        await store.close()


def _raw_app(db: str | None) -> Callable[..., Awaitable[None]]:
    """The bare ASGI app: reads the body, inserts it (with ``db``), answers 201."""
    conn: asyncpg.Connection[Any] | None = None

    async def app(scope: dict[str, Any], receive: Receive, send: Send) -> None:
        nonlocal conn
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    if db is not None:
                        conn = await pg_connect(db)
                        await conn.execute(MIN_TABLE)
                    await send({"type": "lifespan.startup.complete"})
                else:
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        health = scope["path"] == "/healthz"  # the harness's readiness probe
        if conn is not None and not health:
            await conn.execute(MIN_INSERT, uuid.uuid4(), body.decode())
        headers = [(b"content-type", b"application/json")]
        await send(
            {"type": "http.response.start", "status": 200 if health else 201, "headers": headers}
        )
        await send({"type": "http.response.body", "body": b'{"ok": true}'})

    return app


def _serve_raw(port: int, db: str) -> None:
    import uvicorn

    app = _raw_app(db or None)
    uvicorn.run(
        app, host="127.0.0.1", port=port, loop="uvloop", http="httptools", log_level="warning"
    )


def _raw_server(db: str | None, workdir: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    log = (workdir / f"raw-{port}.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, __file__, "--serve-raw", str(port), db or ""],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    wait_http(f"{url}/healthz", proc=proc)
    return proc, f"{url}/v1/tasks"


def one_floor(name: str, args: argparse.Namespace, workdir: Path) -> float:
    config = BenchConfig(store="postgres", pg_url=args.pg_url)
    if name == "sdk-create":
        return create_sdk_single(config, workdir)["creates_per_s"]
    if name == "sdk-batch":
        return create_sdk_batch(replace(config, tasks=20 * BATCH), workdir)["batch_tasks_per_s"]
    with bench_store(config, workdir) as db:
        if name.startswith("pg-"):
            return uvloop.run(_pg(db, args.seconds, name))
        if name.startswith("store-"):
            return uvloop.run(_store(db, args.seconds, name))
        proc, url = _raw_server(db if name == "http-raw-insert" else None, workdir)
        try:
            return uvloop.run(_http(url, args.seconds))
        finally:
            proc.terminate()
            proc.wait(10)


def _per(rate: float) -> str:
    return f"{rate:8,.0f}/s ({1e6 / rate:7,.1f} us each)"


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--serve-raw":
        _serve_raw(int(sys.argv[2]), sys.argv[3])
        return
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--pg-url", default=os.environ.get("DUETIME_TEST_PG_URL", BenchConfig.pg_url)
    )
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", default="", help="a comma list of floors (default: all)")
    args = parser.parse_args()
    floors = [f for f in args.only.split(",") if f] or list(FLOORS)
    if unknown := set(floors) - set(FLOORS):
        parser.error(f"--only: unknown {sorted(unknown)}; choose from {', '.join(FLOORS)}")
    print(f"# create floors: one awaiting caller, {args.seconds:g} s per run, {args.repeat} rounds")
    print(f"# machine: {machine()}; speed: {cpu_speed()}")
    rates: dict[str, list[float]] = {f: [] for f in floors}
    with tempfile.TemporaryDirectory(prefix="duetime-floor-") as tmp:
        for round_ in range(args.repeat):  # floors in turn, so drift spreads over all of them
            for floor in floors:
                rate = one_floor(floor, args, Path(tmp))
                rates[floor].append(rate)
                print(f"round {round_ + 1}: {floor:16s} {_per(rate)}", flush=True)
    for floor in floors:
        median = statistics.median(rates[floor])
        runs = ", ".join(f"{r:,.0f}" for r in rates[floor])
        print(f"median: {floor:16s} {_per(median)}  runs {runs}")


if __name__ == "__main__":
    main()
