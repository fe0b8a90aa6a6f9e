"""Benchmark scenarios through the Python SDK, as users create tasks (SPEC §6): one
caller awaiting each ``AsyncClient.create_task``, and ``create_tasks`` with 1,000 tasks per call.
Registered in :data:`duetime.bench.scenarios.SCENARIOS` (``duetime bench run create-sdk-single``).

``DUETIME_BENCH_CALLERS`` (default 1) runs that many callers at once, each awaiting its own
calls, through one ``AsyncClient`` (its connection pool): SPEC §6's create *throughput*, where
the default measures one caller's round trips.

``DUETIME_BENCH_LOOP`` picks the callers' event loop: ``asyncio`` (default: what a plain
``asyncio.run`` script gets) or ``uvloop`` (what an app under uvicorn gets, and what
``benchmarks/peers/pgqueuer_bench.py`` runs PgQueuer's enqueues on).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Coroutine
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

from duetime.bench.runs import (
    BenchConfig,
    Figures,
    bench_store,
    children_cpu_seconds,
    node,
    percentile,
    postgres_cpu_seconds,
    process_cpu_seconds,
)
from duetime.sdk.models import TaskSpecFields

T = TypeVar("T")

SINGLE_SECONDS = 5.0
WARMUP_CALLS = 200
BATCH_SIZE = 1000


def _callers() -> int:
    callers = int(os.environ.get("DUETIME_BENCH_CALLERS", "1"))
    if callers < 1:
        raise ValueError("DUETIME_BENCH_CALLERS must be at least 1")
    return callers


def _run(main: Coroutine[Any, Any, T]) -> T:
    """Run the callers on the event loop ``DUETIME_BENCH_LOOP`` names."""
    loop = os.environ.get("DUETIME_BENCH_LOOP", "asyncio")
    if loop == "asyncio":
        return asyncio.run(main)
    if loop == "uvloop":
        import uvloop

        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            return runner.run(main)
    main.close()
    raise ValueError(f"DUETIME_BENCH_LOOP must be asyncio or uvloop, not {loop!r}")


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a live process so far (Linux ``/proc``; 0 elsewhere)."""
    try:
        return process_cpu_seconds(pid)
    except OSError:
        return 0.0


def _others_cpu(pid: int) -> tuple[float, float]:
    """CPU seconds so far of the node ``pid``'s dispatcher processes and of the local
    PostgreSQL's processes (0 for a SQLite store's none, or a remote server's)."""
    return children_cpu_seconds(pid), postgres_cpu_seconds()


def _per_call(before: tuple[float, float], after: tuple[float, float], n: int) -> Figures:
    """The dispatcher processes' and PostgreSQL's CPU per created task, in µs: with the client's
    and the node's, where a serial chain's time goes."""
    return {
        "dispatch_cpu_us": (after[0] - before[0]) / n * 1e6,
        "pg_cpu_us": (after[1] - before[1]) / n * 1e6,
    }


def _spec() -> TaskSpecFields:
    later = datetime.now(UTC) + timedelta(hours=1)
    return {"target": {"type": "worker"}, "payload": {"k": "v"}, "run_at": later}


def create_sdk_single(config: BenchConfig, workdir: Path) -> Figures:
    """Single creates from one caller awaiting each ``AsyncClient.create_task`` (SDK decoding
    included; ``DUETIME_BENCH_CALLERS`` callers at once), for 5 s after a warm-up: the rate,
    each call's latency, and the CPU per create of the caller, the node, its dispatcher
    processes and PostgreSQL (one caller's create is a serial chain through them)."""
    from duetime import AsyncClient

    with bench_store(config, workdir) as db, node(workdir, db, config) as proc:
        spec = _spec()

        async def measure() -> tuple[float, list[float], float, float, Figures]:
            async with AsyncClient(proc.url) as client:
                for _ in range(WARMUP_CALLS):
                    await client.create_task(**spec)
                samples: list[float] = []
                node_cpu, own_cpu = _cpu_seconds(proc.popen.pid), time.process_time()
                others = _others_cpu(proc.popen.pid)
                start = time.perf_counter()
                stop = start + SINGLE_SECONDS

                async def caller() -> None:
                    while (t0 := time.perf_counter()) < stop:
                        task = await client.create_task(**spec)
                        samples.append(time.perf_counter() - t0)
                        assert task.created, task

                await asyncio.gather(*(caller() for _ in range(_callers())))
                rate = len(samples) / (time.perf_counter() - start)
                node_cpu = _cpu_seconds(proc.popen.pid) - node_cpu
                spread = _per_call(others, _others_cpu(proc.popen.pid), len(samples))
                return rate, samples, time.process_time() - own_cpu, node_cpu, spread

        rate, samples, client_cpu, node_cpu, spread = _run(measure())
    # CPU per create holds up on a busy machine, where the rate mostly measures the neighbours.
    return {
        "creates_per_s": rate,
        "p50_ms": percentile(samples, 50) * 1000,
        "p99_ms": percentile(samples, 99) * 1000,
        "client_cpu_us": client_cpu / len(samples) * 1e6,
        "node_cpu_us": node_cpu / len(samples) * 1e6,
        **spread,
    }


def create_sdk_batch(config: BenchConfig, workdir: Path) -> Figures:
    """``config.tasks`` tasks through ``AsyncClient.create_tasks``, 1,000 per call, one caller
    awaiting each call (``DUETIME_BENCH_CALLERS`` callers at once; SDK encoding and decoding
    included): the rate and the CPU per task of the caller, the node, its dispatcher processes
    and PostgreSQL."""
    from duetime import AsyncClient

    with bench_store(config, workdir) as db, node(workdir, db, config) as proc:
        specs = [_spec()] * BATCH_SIZE

        async def measure() -> tuple[float, float, float, Figures]:
            async with AsyncClient(proc.url, timeout=60) as client:
                await client.create_tasks(specs[:10])  # warm up the connection and statements
                calls = max(1, config.tasks // BATCH_SIZE)
                left = [calls]
                node_cpu, own_cpu = _cpu_seconds(proc.popen.pid), time.process_time()
                others = _others_cpu(proc.popen.pid)
                t0 = time.perf_counter()

                async def caller() -> None:
                    while left[0] > 0:
                        left[0] -= 1
                        made = await client.create_tasks(specs)
                        assert len(made) == BATCH_SIZE

                await asyncio.gather(*(caller() for _ in range(_callers())))
                total = calls * BATCH_SIZE
                rate = total / (time.perf_counter() - t0)
                client_cpu = (time.process_time() - own_cpu) / total
                node_cpu = (_cpu_seconds(proc.popen.pid) - node_cpu) / total
                spread = _per_call(others, _others_cpu(proc.popen.pid), total)
                return rate, client_cpu, node_cpu, spread

        rate, client_cpu, node_cpu, spread = _run(measure())
    return {
        "batch_tasks_per_s": rate,
        "client_cpu_us": client_cpu * 1e6,
        "node_cpu_us": node_cpu * 1e6,
        **spread,
    }


SDK_SCENARIOS = {
    "create-sdk-single": create_sdk_single,
    "create-sdk-batch": create_sdk_batch,
}
