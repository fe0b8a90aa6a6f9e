"""The pieces of a benchmark run that every scenario uses: its configuration, a description of
the machine, a fresh store and a node per run, batch creation, percentiles."""

from __future__ import annotations

import asyncio
import contextlib
import os
import platform
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import aiohttp
import httpx

from duetime.bench.harness import NodeOptions, Proc, metric_total, start_node
from duetime.store.postgres.schema import connect as pg_connect
from duetime.store.protocols import StoreClock

ADMIN_URL = os.environ.get("DUETIME_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")
"""The PostgreSQL server the scripts of ``benchmarks/`` make their throwaway databases on (as the
test suite does: ``DUETIME_TEST_PG_URL``, else the local server)."""

Figures = dict[str, float]


@dataclass(frozen=True)
class BenchConfig:
    store: str  # "sqlite" or "postgres"
    pg_url: str = "postgresql://postgres@127.0.0.1:5432/test"
    tasks: int = 20_000
    repeat: int = 3
    node_env: tuple[tuple[str, str], ...] = ()
    database: str | None = None
    """Run on this existing PostgreSQL database (kept) instead of a fresh one per run."""


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem = ""
    with contextlib.suppress(OSError, ValueError, IndexError):
        kib = int(Path("/proc/meminfo").read_text().split()[1])
        mem = f", {kib / 1024 / 1024:.0f} GiB"
    return f"{os.cpu_count()} cores ({cpu}){mem}, Python {platform.python_version()}"


def cpu_speed() -> str:
    """How fast this machine runs Python right now: the best of 3 timings of a fixed 10M-step
    loop. Shared virtual machines drift (1.0-1.7 s on one machine within minutes), so
    every report carries this beside its figures; compare figures only at similar speeds."""
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        total = 0
        for i in range(10_000_000):
            total += i
        best = min(best, time.perf_counter() - start)
    return f"10M-step Python loop in {best:.2f} s"


def stat_cpu(stat: str) -> tuple[str, float]:
    """A process's name and its user + system CPU seconds so far, from the text of its
    ``/proc/<pid>/stat`` (Linux). The name sits in parentheses and may hold spaces or ``)``."""
    name, _, rest = stat.partition(" (")[2].rpartition(")")
    fields = rest.split()
    return name, (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU time of a live process so far (Linux)."""
    return stat_cpu(Path(f"/proc/{pid}/stat").read_text())[1]


def postgres_cpu_seconds() -> float:
    """CPU time so far of every process named ``postgres`` on this machine: the server and its
    backends (Linux; 0 without a local PostgreSQL). Backends that exit meanwhile drop out."""
    total = 0.0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            name, seconds = stat_cpu(stat.read_text())
        except OSError:
            continue  # gone meanwhile
        if name == "postgres":
            total += seconds
    return total


def children_cpu_seconds(pid: int) -> float:
    """CPU time so far of the live child processes of ``pid`` (a node's dispatcher processes;
    Linux; 0 when there are none). Children that exit meanwhile drop out."""
    total = 0.0
    for children in Path(f"/proc/{pid}/task").glob("*/children"):
        try:
            kids = children.read_text().split()
        except OSError:
            continue
        for kid in kids:
            try:
                total += process_cpu_seconds(int(kid))
            except OSError:
                continue  # gone meanwhile
    return total


def wait_settled(pid: int, *, window: float = 0.2, timeout: float = 15.0) -> bool:
    """Wait until the process ``pid`` and its children have used under a tenth of a core over
    ``window`` seconds; False when they had not after ``timeout``. A node answers HTTP before
    its dispatcher processes have started: their start-up (~0.75 s of CPU on a 2-core machine)
    would otherwise fall in a benchmark's first second, the whole of a
    20,000-task ``create-sdk-batch`` run."""
    deadline = time.monotonic() + timeout
    used = process_cpu_seconds(pid) + children_cpu_seconds(pid)
    while time.monotonic() < deadline:
        time.sleep(window)
        before, used = used, process_cpu_seconds(pid) + children_cpu_seconds(pid)
        if used - before < window / 10:
            return True
    return False


def machine_ticks() -> list[int]:
    """The whole machine's CPU time so far in clock ticks (Linux ``/proc/stat``), as user, nice,
    system, idle, iowait, irq, softirq, steal (guest time is counted in user already)."""
    return [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]


async def due_after_creating(store: StoreClock, n: int) -> datetime:
    """An instant (by the store's clock) far enough ahead to create ``n`` tasks before it: a task
    made after its due time is made ready at once, and a promote phase would wait for it for
    ever (creating 20,000 takes ~1 s on an idle 2-core machine, longer on a busy one)."""
    return await store.now() + timedelta(seconds=2 + n / 5000)


async def sleep_until_due(store: StoreClock, due: datetime) -> None:
    """Sleep until the store's clock (the promoter's view of time) passes ``due``; refuse when
    it already has, so a phase never waits for tasks that were made ready instead."""
    wait = (due - await store.now()).total_seconds()
    if wait <= 0:
        raise RuntimeError("creating the tasks took longer than their lead; use fewer --tasks")
    await asyncio.sleep(wait + 0.01)


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))
    return ordered[index]


@contextlib.contextmanager
def bench_store(config: BenchConfig, workdir: Path) -> Iterator[str]:
    """A fresh, empty store URL for one run (or ``config.database``)."""
    if config.database is not None:
        yield config.database
        return
    if config.store == "sqlite":
        yield f"sqlite:///{workdir / f'bench-{uuid.uuid4().hex[:6]}.db'}"
        return
    name = f"duetime_bench_{uuid.uuid4().hex[:8]}"
    base = config.pg_url.rpartition("/")[0]
    sql_value(config.pg_url, f'CREATE DATABASE "{name}"')
    try:
        yield f"{base}/{name}"
    finally:
        sql_value(config.pg_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def as_role(url: str, role: str) -> str:
    """PostgreSQL ``url`` with ``role`` as its user (no password: the server trusts loopback)."""
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{role}@{host}"))


@contextlib.asynccontextmanager
async def scratch_database(prefix: str) -> AsyncIterator[tuple[str, str]]:
    """A fresh database on :data:`ADMIN_URL`'s server and a new login role, for one benchmark:
    ``(url, role)``, both named after ``prefix`` and dropped on leaving."""
    base = ADMIN_URL.rpartition("/")[0]
    db = f"{prefix}_{uuid.uuid4().hex[:8]}"
    role = f"{prefix}_{uuid.uuid4().hex[:8]}"
    admin = await pg_connect(ADMIN_URL)
    try:
        await admin.execute(f'CREATE DATABASE "{db}"')
        await admin.execute(f"CREATE ROLE {role} LOGIN")
        yield f"{base}/{db}", role
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
        await admin.execute(f"DROP ROLE IF EXISTS {role}")
        await admin.close()


def sql_value(url: str, sql: str) -> object:
    """Run one statement on its own connection to ``url``; its first value (or None)."""

    async def run() -> object:
        conn = await pg_connect(url)
        try:
            return await conn.fetchval(sql)
        finally:
            await conn.close()

    return asyncio.run(run())


@contextlib.contextmanager
def node(workdir: Path, db: str, config: BenchConfig, **env: str) -> Iterator[Proc]:
    """A ``duetime serve`` node for one run, started and settled (:func:`wait_settled`)."""
    proc = start_node(workdir, NodeOptions(db=db, env={**dict(config.node_env), **env}), "bench")
    try:
        wait_settled(proc.popen.pid)
        yield proc
    finally:
        proc.stop(10)


async def create_batches(base: str, bodies: list[dict[str, Any]], concurrency: int = 4) -> None:
    async with aiohttp.ClientSession() as session:
        sem = asyncio.Semaphore(concurrency)

        async def post(chunk: list[dict[str, Any]]) -> None:
            async with sem, session.post(f"{base}/v1/tasks/batch", json={"tasks": chunk}) as r:
                if r.status != 201:
                    raise RuntimeError(f"batch create failed: {r.status} {await r.text()}")

        await asyncio.gather(*(post(bodies[i : i + 1000]) for i in range(0, len(bodies), 1000)))


def wait_succeeded(base: str, total: int, timeout: float = 120) -> float:
    """Wait until ``total`` tasks are succeeded in the store; returns the wall time it happened."""
    deadline = time.monotonic() + timeout
    with httpx.Client() as poll:
        while time.monotonic() < deadline:
            if metric_total(base, "duetime_tasks", 'status="succeeded"', poll) >= total:
                return time.time()
            time.sleep(0.05)
    raise RuntimeError("tasks did not all reach succeeded")
