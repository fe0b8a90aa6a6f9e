"""PgQueuer, measured the way SPEC §6 states its bars: side by side with duetime on this machine.

Runs in a throwaway venv that has PgQueuer (never the project's .venv)::

    bash benchmarks/peers/run_pgqueuer.sh --repeat 3

Each measured run gets a fresh database ``pgq_bench_<random>`` on 127.0.0.1:5432 (user
postgres, trust auth), PgQueuer's schema installed by its own ``Queries.install()`` (what
``pgq install`` runs, default durability), and is dropped ``WITH (FORCE)`` afterwards. Every run
holds an exclusive ``flock`` on /tmp/bench.lock, as the project's other benchmarks do.

The figures, each measured ``--repeat`` times (the median is printed beside the runs):

- burst: 20,000 no-op jobs enqueued in one bulk call (one ``NOW()``, so one due instant) with
  ``execute_after`` 5 s ahead, drained by 2 worker processes, each ``pgqueuer.run(factory)``
  (what ``pgq run`` runs, on uvloop like it) at its defaults. Throughput = jobs / (last handler
  start - due instant); due-lag = handler start - the job's ``execute_after`` (p50/p95/p99, ms);
  drained = due instant -> queue table empty (every job acked; polled every 0.25 s), for
  reference only.
- single enqueue: one process, one asyncpg connection (``AsyncpgDriver``), awaiting each
  ``Queries.enqueue`` for 5 s after 200 warm-ups: jobs/s.
- bulk enqueue: ``Queries.enqueue`` with lists of 1,000 jobs per call, 20,000 jobs: jobs/s.
- immediate: one worker process at its defaults; 20 jobs/s enqueued for 20 s (no
  ``execute_after``); latency = handler start - the enqueue call's return, matched by payload
  (p50/p99, ms). Both are this machine's wall clock (``time.time()``).

"Defaults", as read in pgqueuer 1.6.0's ``QueueManager.run`` / ``pgq run``: batch_size 10,
max_concurrent_tasks None (unlimited: each worker keeps dequeuing batches of 10 and starting a
task per job while the dequeue returns any), dequeue_timeout 30 s, mode continuous, heartbeat 30 s.

Handlers only record ``time.time()`` (and the job's id and payload); each worker writes its list
to a file when it shuts down (SIGTERM, once the queue table is empty).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import fcntl
import json
import os
import platform
import secrets
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import timedelta
from pathlib import Path

import asyncpg
import pgqueuer
import uvloop
from pgqueuer import AsyncpgDriver, Job, Queries

PG = "postgresql://postgres@127.0.0.1:5432"
FIGURES = {"burst", "single", "bulk", "immediate"}
LOCK = "/tmp/bench.lock"
ENTRYPOINT = "noop"
Starts = list[tuple[int, str, float]]  # (job id, payload, handler start), one per job


def worker_main(dsn: str, out: Path) -> None:
    """One PgQueuer worker process at its defaults; writes its handler starts to ``out``."""
    starts: Starts = []

    @contextlib.asynccontextmanager
    async def factory() -> AsyncIterator[pgqueuer.PgQueuer]:
        conn = await asyncpg.connect(dsn)
        pgq = pgqueuer.PgQueuer.from_asyncpg_connection(conn)

        @pgq.entrypoint(ENTRYPOINT)
        async def noop(job: Job) -> None:
            starts.append((job.id, (job.payload or b"").decode(), time.time()))

        out.with_suffix(".ready").touch()
        try:
            yield pgq
        finally:
            await conn.close()

    uvloop.run(pgqueuer.run(factory))  # SIGTERM/SIGINT: clean shutdown, as under `pgq run`
    out.write_text(json.dumps(starts))


@contextlib.contextmanager
def bench_lock() -> Iterator[None]:
    with open(LOCK, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@contextlib.asynccontextmanager
async def fresh_db() -> AsyncIterator[str]:
    """A throwaway database with PgQueuer's schema; dropped WITH (FORCE) afterwards."""
    name = f"pgq_bench_{secrets.token_hex(4)}"
    admin = await asyncpg.connect(f"{PG}/test")
    try:
        await admin.execute(f"CREATE DATABASE {name}")
        dsn = f"{PG}/{name}"
        conn = await asyncpg.connect(dsn)
        try:
            await Queries(AsyncpgDriver(conn)).install()
        finally:
            await conn.close()
        yield dsn
    finally:
        await admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        await admin.close()


class Workers:
    """``n`` worker processes (this file with ``--worker``) on one database."""

    def __init__(self, dsn: str, n: int, tmp: Path) -> None:
        self.outs = [tmp / f"worker{i}.json" for i in range(n)]
        self.procs = [
            subprocess.Popen([sys.executable, __file__, "--worker", dsn, str(out)])
            for out in self.outs
        ]

    async def ready(self) -> None:
        deadline = time.monotonic() + 30
        while not all(o.with_suffix(".ready").exists() for o in self.outs):
            if time.monotonic() > deadline or any(p.poll() is not None for p in self.procs):
                raise RuntimeError("a PgQueuer worker did not start")
            await asyncio.sleep(0.05)
        await asyncio.sleep(1.0)  # past verify_structure and LISTEN, into the dequeue wait

    async def drain(self, conn: asyncpg.Connection, expected: int) -> tuple[Starts, float]:
        """Wait until the queue table is empty (every job acked and deleted: ``time.time()``
        then, to 0.25 s), stop the workers, return every handler start and that instant."""
        deadline = time.monotonic() + 600
        while await conn.fetchval("SELECT count(*) FROM pgqueuer") > 0:
            if time.monotonic() > deadline:
                raise RuntimeError("the queue did not drain in 600 s")
            await asyncio.sleep(0.25)
        drained = time.time()
        for p in self.procs:
            p.send_signal(signal.SIGTERM)
        for p in self.procs:
            if p.wait(timeout=60) != 0:
                raise RuntimeError(f"a PgQueuer worker exited with {p.returncode}")
        starts: Starts = [
            (int(i), str(payload), float(t))
            for o in self.outs
            for i, payload, t in json.loads(o.read_text())
        ]
        if len(starts) != expected or len({s[0] for s in starts}) != expected:
            raise RuntimeError(f"{len(starts)} handler starts for {expected} jobs")
        return starts, drained

    def kill(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


async def burst(jobs: int, workers: int) -> dict[str, float]:
    async with fresh_db() as dsn:
        conn = await asyncpg.connect(dsn)
        q = Queries(AsyncpgDriver(conn))
        with tempfile.TemporaryDirectory() as tmp:
            ws = Workers(dsn, workers, Path(tmp))
            try:
                await ws.ready()
                due = time.time() + 5.0  # one bulk call: one NOW(), so one instant for all
                after = timedelta(seconds=due - time.time())
                await q.enqueue(
                    [ENTRYPOINT] * jobs, [None] * jobs, [0] * jobs, execute_after=[after] * jobs
                )
                if time.time() > due - 1.0:
                    raise RuntimeError("enqueueing the burst took too long for its due instant")
                rows = await conn.fetch(
                    "SELECT id, extract(epoch FROM execute_after)::float8 AS due FROM pgqueuer"
                )
                due_at = {r["id"]: r["due"] for r in rows}
                starts, drained = await ws.drain(conn, jobs)
            finally:
                ws.kill()
                await conn.close()
    first_due = min(due_at.values())
    lags = [(t - due_at[i]) * 1000 for i, _, t in starts]
    return {
        "jobs/s": jobs / (max(t for _, _, t in starts) - first_due),
        "lag p50 ms": pct(lags, 0.50),
        "lag p95 ms": pct(lags, 0.95),
        "lag p99 ms": pct(lags, 0.99),
        "drained s": drained - first_due,
    }


async def single_enqueue(seconds: float = 5.0, warmup: int = 200) -> dict[str, float]:
    async with fresh_db() as dsn:
        conn = await asyncpg.connect(dsn)
        try:
            q = Queries(AsyncpgDriver(conn))
            for _ in range(warmup):
                await q.enqueue(ENTRYPOINT, None)
            n, t0 = 0, time.perf_counter()
            while (elapsed := time.perf_counter() - t0) < seconds:
                await q.enqueue(ENTRYPOINT, None)
                n += 1
        finally:
            await conn.close()
    return {"jobs/s": n / elapsed}


async def bulk_enqueue(jobs: int = 20_000, per_call: int = 1000) -> dict[str, float]:
    async with fresh_db() as dsn:
        conn = await asyncpg.connect(dsn)
        try:
            q = Queries(AsyncpgDriver(conn))
            t0 = time.perf_counter()
            for _ in range(jobs // per_call):
                await q.enqueue([ENTRYPOINT] * per_call, [None] * per_call, [0] * per_call)
            elapsed = time.perf_counter() - t0
        finally:
            await conn.close()
    return {"jobs/s": jobs / elapsed}


async def immediate(rate: int = 20, seconds: int = 20) -> dict[str, float]:
    total = rate * seconds
    async with fresh_db() as dsn:
        conn = await asyncpg.connect(dsn)
        q = Queries(AsyncpgDriver(conn))
        with tempfile.TemporaryDirectory() as tmp:
            ws = Workers(dsn, 1, Path(tmp))
            try:
                await ws.ready()
                returned: dict[str, float] = {}
                t0 = time.monotonic()
                for i in range(total):
                    await asyncio.sleep(max(0.0, t0 + i / rate - time.monotonic()))
                    await q.enqueue(ENTRYPOINT, str(i).encode())
                    returned[str(i)] = time.time()
                starts, _ = await ws.drain(conn, total)
            finally:
                ws.kill()
                await conn.close()
    lat = [(t - returned[payload]) * 1000 for _, payload, t in starts]
    return {"p50 ms": pct(lat, 0.50), "p99 ms": pct(lat, 0.99)}


def gauge() -> float:
    """The speed gauge of duetime's own reports (duetime.bench.runs.cpu_speed): best of 3."""
    best = float("inf")
    for _ in range(3):
        t0, total = time.perf_counter(), 0
        for i in range(10_000_000):
            total += i
        best = min(best, time.perf_counter() - t0)
    return best


def machine() -> str:
    cpu = "?"
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "?")
    return (
        f"nproc {os.cpu_count()}, CPU {cpu}, Python {platform.python_version()}, "
        f"pgqueuer {pgqueuer.__version__}, asyncpg {asyncpg.__version__}"
    )


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
    if len(sys.argv) == 4 and sys.argv[1] == "--worker":
        worker_main(sys.argv[2], Path(sys.argv[3]))
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=20_000, help="burst size")
    ap.add_argument("--workers", type=int, default=2, help="burst worker processes")
    ap.add_argument(
        "--only",
        default="burst,single,bulk,immediate",
        help="a comma list of the figures to measure (benchmarks/peers/side_by_side.sh: burst)",
    )
    args = ap.parse_args()
    only = set(args.only.split(","))
    if not only <= FIGURES:
        ap.error(f"--only takes {', '.join(sorted(FIGURES))}")
    with bench_lock():
        loop = gauge()
    print(
        f"# PgQueuer on this machine: {machine()}; "
        f"10M-step loop {loop:.2f} s (best of 3, as in duetime bench)",
        flush=True,
    )
    if "burst" in only:
        print(f"burst ({args.jobs:,} jobs due at one instant, {args.workers} worker processes):")
        measure("burst", args.repeat, lambda: uvloop.run(burst(args.jobs, args.workers)))
    if "single" in only:
        print("single enqueue (one process awaiting each call, 5 s after 200 warm-ups):")
        measure("single", args.repeat, lambda: uvloop.run(single_enqueue()))
    if "bulk" in only:
        print("bulk enqueue (1,000 per call, 20,000 jobs):")
        measure("bulk", args.repeat, lambda: uvloop.run(bulk_enqueue()))
    if "immediate" in only:
        print("immediate (20 jobs/s for 20 s, enqueue return -> handler start, 1 worker process):")
        measure("immediate", args.repeat, lambda: uvloop.run(immediate()))


if __name__ == "__main__":
    main()
