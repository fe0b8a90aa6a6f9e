"""Burst benchmark of pull workers (SPEC §6): N no-op ``worker`` tasks due at one
instant, drained by SDK worker processes.

Starts a ``duetime serve`` node on a fresh store, creates ``--tasks`` tasks due a few seconds
ahead, starts ``--workers`` worker processes (each a :class:`duetime.Worker` with one async no-op
handler and ``--concurrency`` slots) that long-poll until the burst is due, and measures, from the
handlers' own clocks:

- throughput: tasks / (last handler start - due instant);
- due-lag: handler start - due instant, p50/p95/p99;
- drained: when the store counted every task ``succeeded`` (acks included).

::

    .venv/bin/python benchmarks/worker_burst.py --store sqlite --tasks 20000 --workers 2
    .venv/bin/python benchmarks/worker_burst.py --store postgres --repeat 3

Prints the machine, the store and the configuration next to the medians of ``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import orjson

from duetime.bench.runs import (
    BenchConfig,
    bench_store,
    create_batches,
    machine,
    machine_ticks,
    node,
    percentile,
    postgres_cpu_seconds,
    process_cpu_seconds,
    wait_succeeded,
)

QUEUE = "burst"


def child(url: str, out: Path, concurrency: int, batch: int) -> None:
    """One worker process: lease, run the no-op handler, and at SIGTERM write the handler start
    times (unix seconds) to ``out``. ``concurrency`` 0 runs a worker at its defaults (no
    concurrency, no config given), as users run it."""
    from duetime import Job, Worker, WorkerConfig

    starts: list[float] = []
    progress = out.with_suffix(".count")
    if concurrency:
        config = WorkerConfig(wait_seconds=5, max_lease_batch=batch, ack_batch_size=1000)
        worker = Worker(url, queues=[QUEUE], concurrency=concurrency, config=config)
    else:
        worker = Worker(url, queues=[QUEUE])

    @worker.handler("noop")
    async def noop(job: Job) -> None:
        # Every task of the burst is due at the same instant, which the parent knows: the
        # handler reads nothing of the job, as a no-op job of another queue library would not.
        starts.append(time.time())

    async def report() -> None:
        written = -1
        while True:  # the parent watches these counts to see the burst end
            await asyncio.sleep(0.25)  # writing a file costs ~1 ms of CPU on a busy machine
            if len(starts) != written:
                written = len(starts)
                progress.write_text(str(written))

    gc.freeze()  # as `duetime worker` does

    async def main() -> None:
        reporter = asyncio.create_task(report())
        try:
            await worker.run(handle_signals=True)
        finally:
            reporter.cancel()

    import uvloop

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(main())
    out.write_bytes(orjson.dumps(starts))
    out.with_suffix(".cpu").write_text(str(time.process_time()))
    print(worker.stats, flush=True)


def one_run(args: argparse.Namespace, workdir: Path) -> dict[str, float]:
    config = BenchConfig(store=args.store, pg_url=args.pg_url, tasks=args.tasks)
    env = {"DUETIME_LOG_LEVEL": "warning"}
    with bench_store(config, workdir) as db, node(workdir, db, config, **env) as proc:
        outs = [workdir / f"worker-{i}.json" for i in range(args.workers)]
        workers = [
            subprocess.Popen(
                [
                    sys.executable,
                    __file__,
                    "--child",
                    proc.url,
                    str(out),
                    str(args.concurrency),
                    str(args.batch),
                ],
                stdout=(workdir / f"worker-{i}.log").open("wb"),
                stderr=subprocess.STDOUT,
            )
            for i, out in enumerate(outs)
        ]
        try:
            lead = 5.0 + args.tasks / 4_000  # room for creating the burst on a busy machine
            due = datetime.now(UTC) + timedelta(seconds=lead)
            body = {
                "target": {"type": "worker"},
                "name": "noop",
                "queue": QUEUE,
                "payload": {"k": "v"},
                "run_at": due.isoformat(),
            }
            asyncio.run(create_batches(proc.url, [body] * args.tasks))
            if datetime.now(UTC) >= due:
                raise RuntimeError("creating the burst took longer than its lead time")
            time.sleep(max(0.0, (due - datetime.now(UTC)).total_seconds() - 0.2))
            node_cpu_before = process_cpu_seconds(proc.popen.pid)
            workers_cpu_before = sum(process_cpu_seconds(w.pid) for w in workers)
            pg_cpu_before = postgres_cpu_seconds()
            idle_before = _machine_idle()
            deadline = time.monotonic() + lead + 120
            while time.monotonic() < deadline:
                counts = [
                    int(o.with_suffix(".count").read_text() or 0)
                    for o in outs
                    if o.with_suffix(".count").exists()
                ]
                if sum(counts) >= args.tasks:
                    break
                time.sleep(0.05)
            else:
                raise RuntimeError(f"only {sum(counts)} of {args.tasks} tasks ran")
            drained_at = wait_succeeded(proc.url, args.tasks)
            node_cpu = process_cpu_seconds(proc.popen.pid) - node_cpu_before
            workers_cpu = sum(process_cpu_seconds(w.pid) for w in workers) - workers_cpu_before
            pg_cpu = postgres_cpu_seconds() - pg_cpu_before
            idle_after = _machine_idle()
            idle, total = idle_after[0] - idle_before[0], idle_after[1] - idle_before[1]
        finally:
            for w in workers:
                w.terminate()
            for w in workers:
                w.wait(30)
    starts = [s for out in outs for s in orjson.loads(out.read_bytes())]
    due_ts = due.timestamp()
    lags = [at - due_ts for at in starts]
    if args.timeline:
        print(timeline(lags))
    return {
        "throughput_per_s": len(starts) / (max(starts) - due_ts),
        "lag_p50_s": percentile(lags, 50),
        "lag_p95_s": percentile(lags, 95),
        "lag_p99_s": percentile(lags, 99),
        "drained_after_s": drained_at - due_ts,
        "handler_runs": float(len(starts)),
        "node_burst_cpu_s": node_cpu,
        "pg_burst_cpu_s": pg_cpu,
        "workers_burst_cpu_s": workers_cpu,
        "machine_idle_share": idle / total if total else float("nan"),
        "workers_cpu_s": sum(float(o.with_suffix(".cpu").read_text()) for o in outs),
    }


def timeline(lags: list[float], step: float = 0.25) -> str:
    """Handler starts per ``step`` seconds after the due instant, one line."""
    buckets: dict[int, int] = {}
    for lag in lags:
        buckets[int(lag // step)] = buckets.get(int(lag // step), 0) + 1
    counts = " ".join(str(buckets.get(i, 0)) for i in range(min(buckets), max(buckets) + 1))
    return f"starts per {step:.2f} s after due: {counts}"


def _machine_idle() -> tuple[int, int]:
    """Idle (with iowait) and total CPU time of the whole machine so far, in clock ticks."""
    ticks = machine_ticks()
    return ticks[3] + ticks[4], sum(ticks)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        url, out, concurrency, batch = sys.argv[2:6]
        child(url, Path(out), int(concurrency), int(batch))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--store", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--pg-url", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--tasks", type=int, default=20_000)
    parser.add_argument("--workers", type=int, default=2, help="worker processes")
    parser.add_argument(
        "--concurrency", type=int, default=500, help="slots per worker; 0: the Worker's defaults"
    )
    parser.add_argument("--batch", type=int, default=500, help="max tasks per lease call")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--timeline", action="store_true", help="print each run's handler starts per 250 ms"
    )
    args = parser.parse_args()
    runs = []
    for i in range(args.repeat):
        with tempfile.TemporaryDirectory(prefix="duetime-wburst-") as tmp:
            figures = one_run(args, Path(tmp))
        runs.append(figures)
        print(f"run {i + 1}: " + ", ".join(f"{k}={v:.3f}" for k, v in figures.items()))
    print(f"machine: {machine()}, pid {os.getpid()}")
    shape = (
        "default settings (duetime.Worker(url, queues=[...]))"
        if not args.concurrency
        else f"{args.concurrency} slots, lease batch {args.batch}"
    )
    print(f"store: {args.store}; {args.tasks} tasks; {args.workers} worker processes x {shape}")
    for key in runs[0]:
        print(f"  {key}: median {statistics.median(r[key] for r in runs):.3f}")


if __name__ == "__main__":
    main()
