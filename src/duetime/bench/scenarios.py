"""Benchmark scenarios. Each starts real processes on loopback (a duetime node, a receiver),
drives them, and returns figures; :func:`run` repeats a scenario and reports medians."""

from __future__ import annotations

import asyncio
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from duetime.api.deps import DEV_TENANT_ID
from duetime.bench.broker_bursts import BROKER_SCENARIOS
from duetime.bench.flow_scenarios import FLOW_SCENARIOS
from duetime.bench.harness import (
    first_arrivals,
    receiver_records,
    start_receiver,
    wait_delivered,
)
from duetime.bench.runs import (
    BenchConfig,
    Figures,
    as_role,
    bench_store,
    cpu_speed,
    create_batches,
    machine,
    node,
    percentile,
    sql_value,
    wait_succeeded,
)
from duetime.bench.sdk_scenarios import SDK_SCENARIOS
from duetime.config import Settings


def burst_http(config: BenchConfig, workdir: Path) -> Figures:
    """N ``http`` tasks due at one instant, delivered signed to a minimal local receiver."""
    receiver = start_receiver(workdir)
    try:
        with bench_store(config, workdir) as db, node(workdir, db, config) as proc:
            lead = 3.0 + config.tasks / 10_000
            due = datetime.now(UTC) + timedelta(seconds=lead)
            bodies = [
                {
                    "target": {"type": "http", "url": f"{receiver.url}/hook"},
                    "payload": {"n": i},
                    "run_at": due.isoformat(),
                }
                for i in range(config.tasks)
            ]
            asyncio.run(create_batches(proc.url, bodies))
            if datetime.now(UTC) >= due:
                raise RuntimeError("creating the burst took longer than its lead time")
            wait_delivered(receiver.url, config.tasks, timeout=lead + 120)
            drained_at = wait_succeeded(proc.url, config.tasks)
        records = receiver_records(receiver.url)
    finally:
        receiver.stop(5)
    first = first_arrivals(records)
    lags = [at - due.timestamp() for at in first.values()]
    span = max(first.values()) - due.timestamp()
    return {
        "throughput_per_s": config.tasks / span,
        "lag_p50_s": percentile(lags, 50),
        "lag_p95_s": percentile(lags, 95),
        "lag_p99_s": percentile(lags, 99),
        "all_succeeded_after_s": drained_at - due.timestamp(),
    }


STEADY_WARMUP_SECONDS = 5.0
"""steady-http: tasks due in the first seconds are left out (pools and caches warming up)."""


def steady_http(config: BenchConfig, workdir: Path) -> Figures:
    """``http`` tasks created at a steady rate (``DUETIME_BENCH_RATE`` per second, default
    1,000; ``--tasks`` in all) in batches every 20 ms, each due 0-2 s after its create, and
    delivered to the local receiver: the due-lag (arrival - due) of the tasks due after a
    warm-up of :data:`STEADY_WARMUP_SECONDS`."""
    rate = float(os.environ.get("DUETIME_BENCH_RATE", "1000"))
    receiver = start_receiver(workdir)
    try:
        with bench_store(config, workdir) as db, node(workdir, db, config) as proc:
            due, started = asyncio.run(_steady_creates(proc.url, receiver.url, rate, config.tasks))
            wait_delivered(receiver.url, config.tasks, timeout=60, interval=0.2)
        records = receiver_records(receiver.url)
    finally:
        receiver.stop(5)
    arrived = first_arrivals(records)
    lags = [
        arrived[task_id] - at
        for task_id, at in due.items()
        if at >= started + STEADY_WARMUP_SECONDS
    ]
    return {
        "rate_per_s": rate,
        "measured": float(len(lags)),
        "lag_p50_s": percentile(lags, 50),
        "lag_p95_s": percentile(lags, 95),
        "lag_p99_s": percentile(lags, 99),
        "lag_max_s": max(lags),
    }


async def _steady_creates(
    base: str, receiver_url: str, rate: float, total: int
) -> tuple[dict[str, float], float]:
    """Create ``total`` tasks at ``rate`` per second (open loop); their due times by id, and the
    start of the load (unix time)."""
    tick = 0.02
    due: dict[str, float] = {}
    inflight: set[asyncio.Task[None]] = set()
    target = {"type": "http", "url": f"{receiver_url}/hook"}
    async with aiohttp.ClientSession() as session:

        async def post(bodies: list[dict[str, Any]], times: list[float]) -> None:
            async with session.post(f"{base}/v1/tasks/batch", json={"tasks": bodies}) as r:
                if r.status != 201:
                    raise RuntimeError(f"batch create failed: {r.status} {await r.text()}")
                items = (await r.json())["items"]
            due.update((item["id"], at) for item, at in zip(items, times, strict=True))

        started = time.time()
        sent = 0
        while sent < total:
            count = min(total - sent, int((time.time() - started) * rate) - sent)
            if count > 0:
                now = time.time()
                times = [now + ((sent + i) % 200) / 100 for i in range(count)]
                bodies = [
                    {
                        "target": target,
                        "payload": {"n": sent + i},
                        "run_at": datetime.fromtimestamp(at, UTC).isoformat(),
                    }
                    for i, at in enumerate(times)
                ]
                job = asyncio.create_task(post(bodies, times))
                inflight.add(job)
                job.add_done_callback(inflight.discard)
                sent += count
            await asyncio.sleep(tick)
        await asyncio.gather(*inflight)
    return due, started


async def _post_loop(
    session: aiohttp.ClientSession, url: str, body: dict[str, Any], rate: float, seconds: float
) -> int:
    """POST at ``rate`` per second for ``seconds`` (open loop, each request its own task)."""
    sent = 0
    inflight: set[asyncio.Task[Any]] = set()
    start = time.perf_counter()

    async def one() -> None:
        async with session.post(url, json=body) as r:
            await r.read()

    while (now := time.perf_counter() - start) < seconds:
        target = int(now * rate)
        while sent < target:
            task = asyncio.create_task(one())
            inflight.add(task)
            task.add_done_callback(inflight.discard)
            sent += 1
        await asyncio.sleep(0.002)
    await asyncio.gather(*inflight, return_exceptions=True)
    return sent


def create_latency(config: BenchConfig, workdir: Path) -> Figures:
    """Single POST /v1/tasks latency, one at a time, under 200 req/s of background creates."""
    with bench_store(config, workdir) as db, node(workdir, db, config) as proc:
        later = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
        body = {"target": {"type": "worker"}, "payload": {"k": "v"}, "run_at": later}
        url = f"{proc.url}/v1/tasks"

        async def measure() -> list[float]:
            async with aiohttp.ClientSession() as bg, aiohttp.ClientSession() as fg:
                for _ in range(200):  # warm up
                    async with fg.post(url, json=body) as r:
                        await r.read()
                load = asyncio.create_task(_post_loop(bg, url, body, 200, 10.0))
                samples: list[float] = []
                while not load.done():
                    t0 = time.perf_counter()
                    async with fg.post(url, json=body) as r:
                        await r.read()
                        assert r.status == 201, r.status
                    samples.append(time.perf_counter() - t0)
                    await asyncio.sleep(0.005)
                await load
                return samples

        samples = asyncio.run(measure())
    return {
        "samples": float(len(samples)),
        "p50_ms": percentile(samples, 50) * 1000,
        "p95_ms": percentile(samples, 95) * 1000,
        "p99_ms": percentile(samples, 99) * 1000,
    }


def create_throughput(config: BenchConfig, workdir: Path) -> Figures:
    """Creates per second: single POSTs (64 concurrent) and 1,000-task batches (4 concurrent)."""
    with bench_store(config, workdir) as db, node(workdir, db, config) as proc:
        later = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
        body = {"target": {"type": "worker"}, "payload": {"k": "v"}, "run_at": later}

        async def singles(seconds: float = 5.0) -> float:
            done = 0
            stop = time.perf_counter() + seconds
            async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=64)) as session:

                async def loop() -> None:
                    nonlocal done
                    while time.perf_counter() < stop:
                        async with session.post(f"{proc.url}/v1/tasks", json=body) as r:
                            await r.read()
                        done += 1

                t0 = time.perf_counter()
                await asyncio.gather(*(loop() for _ in range(64)))
                return done / (time.perf_counter() - t0)

        single_rate = asyncio.run(singles())
        bodies = [body] * config.tasks
        t0 = time.perf_counter()
        asyncio.run(create_batches(proc.url, bodies))
        batch_rate = config.tasks / (time.perf_counter() - t0)
    return {"single_posts_per_s": single_rate, "batch_tasks_per_s": batch_rate}


def immediate_http(config: BenchConfig, workdir: Path) -> Figures:
    """Create → delivery start for immediate ``http`` tasks under light load (50 creates/s)."""
    receiver = start_receiver(workdir)
    try:
        with bench_store(config, workdir) as db, node(workdir, db, config) as proc:
            hook = {"type": "http", "url": f"{receiver.url}/hook"}

            async def create_all(count: int) -> dict[str, float]:
                returned: dict[str, float] = {}
                async with aiohttp.ClientSession() as session:
                    for _ in range(count):
                        async with session.post(f"{proc.url}/v1/tasks", json={"target": hook}) as r:
                            body = await r.json()
                        returned[body["id"]] = time.time()
                        await asyncio.sleep(0.02)
                return returned

            count = min(config.tasks, 1000)
            asyncio.run(create_all(50))  # warm up connections and caches
            returned = asyncio.run(create_all(count))
            wait_succeeded(proc.url, count + 50)
        records = receiver_records(receiver.url)
    finally:
        receiver.stop(5)
    arrived = {str(r["task_id"]): float(r["at"]) for r in records}  # type: ignore[arg-type]
    latencies = [arrived[t] - at for t, at in returned.items()]
    return {
        "samples": float(len(latencies)),
        "p50_ms": percentile(latencies, 50) * 1000,
        "p95_ms": percentile(latencies, 95) * 1000,
        "p99_ms": percentile(latencies, 99) * 1000,
    }


Creates = Callable[[str, str, int], Coroutine[Any, Any, dict[str, float]]]
"""Makes ``count`` immediate tasks of the queue ``imm`` at 50 a second, given the node's URL and
its store's; returns when each create returned (``time.time()``), by task id."""


def _immediate_starts(
    config: BenchConfig,
    workdir: Path,
    creates: Creates,
    prepare: Callable[[str, str], Coroutine[Any, Any, None]] | None = None,
) -> Figures:
    """Create → handler start of tasks made by ``creates`` under light load, one SDK worker
    process long-polling their queue; ``prepare`` (given the node's URL and its store's) runs
    once before the warm-up."""
    import subprocess
    import sys

    out = workdir / "started.json"
    with bench_store(config, workdir) as db, node(workdir, db, config) as proc:
        worker = subprocess.Popen(
            [sys.executable, "-m", "duetime.bench.workerproc", proc.url, str(out), "imm"],
            stdout=(workdir / "worker.log").open("wb"),
            stderr=subprocess.STDOUT,
        )
        try:
            count = min(config.tasks, 1000)
            if prepare is not None:
                asyncio.run(prepare(proc.url, db))
            asyncio.run(creates(proc.url, db, 50))  # warm up: the worker is polling by now
            returned = asyncio.run(creates(proc.url, db, count))
            wait_succeeded(proc.url, count + 50)
        finally:
            worker.terminate()
            worker.wait(30)
    started = orjson.loads(out.read_bytes())
    latencies = [started[t] - at for t, at in returned.items()]
    return {
        "samples": float(len(latencies)),
        "p50_ms": percentile(latencies, 50) * 1000,
        "p95_ms": percentile(latencies, 95) * 1000,
        "p99_ms": percentile(latencies, 99) * 1000,
    }


def immediate_worker(config: BenchConfig, workdir: Path) -> Figures:
    """Create → handler start for immediate ``worker`` tasks created over HTTP under light load
    (50 creates/s), one SDK worker process long-polling the queue."""
    body = {"target": {"type": "worker"}, "name": "noop", "queue": "imm"}

    async def creates(url: str, db: str, count: int) -> dict[str, float]:
        returned: dict[str, float] = {}
        async with aiohttp.ClientSession() as session:
            for _ in range(count):
                async with session.post(f"{url}/v1/tasks", json=body) as r:
                    made = await r.json()
                returned[made["id"]] = time.time()
                await asyncio.sleep(0.02)
        return returned

    return _immediate_starts(config, workdir, creates)


def immediate_sql(config: BenchConfig, workdir: Path) -> Figures:
    """As ``immediate-worker``, each task created through the SQL API instead
    (``duetime.create_task_v1``, one transaction each, on its own connection as a login role
    granted the node's tenant): from the commit's return to the handler's start. PostgreSQL
    only."""
    import secrets

    import asyncpg

    from duetime.store.postgres.schema import connect as pg_connect

    if config.store != "postgres":
        raise SystemExit("immediate-sql needs --store postgres (SQLite has no SQL API)")
    role = f"dt_bench_{secrets.token_hex(4)}"

    async def grant(url: str, db: str) -> None:
        """The node's tenant made (by a first call), and the role granted it."""
        async with aiohttp.ClientSession() as session, session.get(f"{url}/v1/tasks") as r:
            r.raise_for_status()
        owner = await pg_connect(db)
        try:
            await owner.execute(f"CREATE ROLE {role} LOGIN")
            await owner.execute("SELECT sql_api_grant($1, $2)", role, DEV_TENANT_ID)
        finally:
            await owner.close()

    async def creates(url: str, db: str, count: int) -> dict[str, float]:
        conn = await asyncpg.connect(as_role(db, role))
        returned: dict[str, float] = {}
        try:
            for _ in range(count):
                made = await conn.fetchrow(
                    "SELECT id FROM duetime.create_task_v1(queue => 'imm', name => 'noop')"
                )
                assert made is not None
                returned[str(made["id"])] = time.time()
                await asyncio.sleep(0.02)
        finally:
            await conn.close()
        return returned

    try:
        return _immediate_starts(config, workdir, creates, grant)
    finally:
        sql_value(config.pg_url, f"DROP ROLE IF EXISTS {role}")


def herd_schedules(config: BenchConfig, workdir: Path) -> Figures:
    """N schedules on ``* * * * *`` (every minute), all firing at the same instant: due-lag of
    one minute's N webhook deliveries (``DUETIME_BENCH_JITTER`` seconds of jitter, default 0).

    Two firings are measured. The ``lag_*`` figures are the second one's, the steady state an
    hourly herd (``0 * * * *``) is always in: its next occurrences are made well away from the
    instant it fires. The ``first_*`` figures are the first firing after the schedules were
    created, which in this every-minute bench falls while the materializer is still making the
    next minute's N occurrences for the just-created schedules."""
    jitter = int(os.environ.get("DUETIME_BENCH_JITTER", "0"))
    receiver = start_receiver(workdir)
    try:
        with bench_store(config, workdir) as db, node(workdir, db, config) as proc:
            body = {
                "cron": "* * * * *",
                "jitter_seconds": jitter,
                "task": {"target": {"type": "http", "url": f"{receiver.url}/hook"}},
            }

            async def create_all() -> None:
                connector = aiohttp.TCPConnector(limit=16)
                async with aiohttp.ClientSession(connector=connector) as session:

                    async def one(_: int) -> None:
                        async with session.post(f"{proc.url}/v1/schedules", json=body) as r:
                            if r.status != 201:
                                raise RuntimeError(f"{r.status} {await r.text()}")

                    await asyncio.gather(*(one(i) for i in range(config.tasks)))

            asyncio.run(create_all())
            # The first whole minute every schedule fires in, a little after creation ended.
            minute = (int(time.time()) // 60 + 1) * 60
            if minute - time.time() < 5:
                minute += 60
            time.sleep(max(0.0, minute + 60 + jitter + 10 - time.time()))
            first = _herd_arrivals(receiver.url, minute, config.tasks)
            time.sleep(max(0.0, minute + 120 + jitter + 10 - time.time()))
            steady = _herd_arrivals(receiver.url, minute + 60, config.tasks)
    finally:
        receiver.stop(5)
    figures = {"schedules": float(config.tasks)}
    for prefix, (nominal, arrived) in (("", (minute + 60, steady)), ("first_", (minute, first))):
        lags = [at - nominal for at in arrived]
        figures[f"{prefix}delivered"] = float(len(arrived))
        figures[f"{prefix}lag_p50_s"] = percentile(lags, 50)
        figures[f"{prefix}lag_p99_s"] = percentile(lags, 99)
        figures[f"{prefix}lag_max_s"] = max(lags) if lags else float("nan")
    return figures


def _herd_arrivals(receiver_url: str, minute: int, expected: int) -> list[float]:
    """Arrival times of the deliveries made for the occurrence at unix time ``minute``."""
    nominal = datetime.fromtimestamp(minute, UTC)
    deadline = time.monotonic() + 120
    while True:
        arrived = [
            float(r["at"])  # type: ignore[arg-type]
            for r in receiver_records(receiver_url)
            if r["scheduled_for"] and datetime.fromisoformat(str(r["scheduled_for"])) == nominal
        ]
        if len(arrived) >= expected or time.monotonic() > deadline:
            return arrived
        time.sleep(0.5)


SCENARIOS: dict[str, Callable[[BenchConfig, Path], Figures]] = {
    "burst-http": burst_http,
    "steady-http": steady_http,
    "immediate-http": immediate_http,
    "immediate-worker": immediate_worker,
    "immediate-sql": immediate_sql,
    "herd-schedules": herd_schedules,
    "create-latency": create_latency,
    "create-throughput": create_throughput,
    **BROKER_SCENARIOS,
}

SCENARIOS.update(SDK_SCENARIOS)
SCENARIOS.update(FLOW_SCENARIOS)


def run(name: str, config: BenchConfig, echo: Callable[[str], None] = print) -> Figures:
    """Run scenario ``name`` ``config.repeat`` times; print each run and the medians."""
    scenario = SCENARIOS[name]
    echo(f"# {name}: store={config.store} tasks={config.tasks} repeat={config.repeat}")
    echo(f"# machine: {machine()}; speed: {cpu_speed()}")
    node_env = " ".join(f"{k}={v}" for k, v in config.node_env) or "defaults"
    db = "postgresql://..." if config.store == "postgres" else "sqlite:///..."
    processes = Settings(db=db).dispatch_process_count
    echo(f"# node: {node_env} (dispatcher processes by default here: {processes})")
    runs: list[Figures] = []
    for i in range(config.repeat):
        with tempfile.TemporaryDirectory(prefix="duetime-bench-") as tmp:
            figures = scenario(config, Path(tmp))
        runs.append(figures)
        echo(f"run {i + 1}: " + "  ".join(f"{k}={v:.3f}" for k, v in figures.items()))
    medians = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    echo("median: " + "  ".join(f"{k}={v:.3f}" for k, v in medians.items()))
    return medians
