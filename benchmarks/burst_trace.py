"""Where a PostgreSQL ``http`` burst's CPU goes: N tasks due at one instant (as ``duetime bench
run burst-http``), and the CPU seconds of every process on the machine while it drains — the
node and its dispatcher processes, PostgreSQL's backends, the receiver — per task; then how many
tasks each dispatcher process delivered, and the machine's user/system/idle split::

    .venv/bin/python benchmarks/burst_trace.py [--tasks 20000] [--env NAME=VALUE ...]

One run; CPU is read from ``/proc``, so it runs on Linux only.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from duetime.bench.harness import start_receiver, wait_delivered
from duetime.bench.runs import (
    BenchConfig,
    bench_store,
    cpu_speed,
    create_batches,
    machine_ticks,
    node,
    stat_cpu,
)
from duetime.store.postgres.schema import connect as pg_connect

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_by_process() -> dict[int, tuple[str, float]]:
    """Every process's command line and CPU seconds (user + system) so far."""
    found: dict[int, tuple[str, float]] = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            cmd = Path(f"/proc/{pid}/cmdline").read_text().replace("\0", " ")
        except OSError:
            continue
        found[int(pid)] = (cmd, stat_cpu(stat)[1])
    return found


def kind(cmd: str) -> str:
    if "postgres" in cmd:
        return "postgresql"
    if "duetime serve" in cmd:
        return "node"
    if "multiprocessing" in cmd:
        return "node: dispatcher processes"
    if "duetime.bench.receiver" in cmd or "receiver" in cmd:
        return "receiver"
    if "burst_trace" in cmd:
        return "this script"
    return "other"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=20_000)
    parser.add_argument("--pg-url", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--env", action="append", default=[], help="NAME=VALUE for the node")
    args = parser.parse_args()
    env = tuple((k, v) for k, _, v in (kv.partition("=") for kv in args.env))
    config = BenchConfig(store="postgres", pg_url=args.pg_url, tasks=args.tasks, node_env=env)
    print(f"speed: {cpu_speed()}; node: {' '.join(args.env) or 'defaults'}")
    with tempfile.TemporaryDirectory(prefix="duetime-bench-") as tmp:
        workdir = Path(tmp)
        receiver = start_receiver(workdir)
        try:
            with bench_store(config, workdir) as db, node(workdir, db, config) as proc:
                lead = 3.0 + args.tasks / 10_000
                due = datetime.now(UTC) + timedelta(seconds=lead)
                body = {
                    "target": {"type": "http", "url": f"{receiver.url}/hook"},
                    "payload": {"k": "v"},
                    "run_at": due.isoformat(),
                }
                asyncio.run(create_batches(proc.url, [body] * args.tasks))
                time.sleep(max(0.0, (due - datetime.now(UTC)).total_seconds() - 0.05))
                before, split_before, start = cpu_by_process(), machine_ticks(), time.time()
                wait_delivered(receiver.url, args.tasks, timeout=lead + 120)
                after, split_after, end = cpu_by_process(), machine_ticks(), time.time()
                time.sleep(1)  # the last completions
                per_process = asyncio.run(_attempts_by_worker(db))
        finally:
            receiver.stop(5)
    window = end - start
    drained = end - due.timestamp()
    print(f"drained {args.tasks:,} tasks in {drained:.2f} s: {args.tasks / drained:,.0f}/s")
    used: dict[str, float] = collections.defaultdict(float)
    for pid, (cmd, seconds) in after.items():
        used[kind(cmd)] += seconds - before.get(pid, (cmd, 0.0))[1]
    for name, seconds in sorted(used.items(), key=lambda item: -item[1]):
        print(
            f"  {name:28s} {seconds:6.2f} CPU s  {seconds / window:4.2f} cores"
            f"  {1e6 * seconds / args.tasks:5.0f} µs/task"
        )
    names = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
    split = (
        f"{n} {(b - a) / TICKS / window:.2f}"
        for n, a, b in zip(names, split_before, split_after, strict=True)
    )
    print("  machine (cores):", ", ".join(split))
    for worker, count in per_process:
        print(f"  delivered by {worker}: {count:,}")


async def _attempts_by_worker(db: str) -> list[tuple[str, int]]:
    conn = await pg_connect(db)
    try:
        rows = await conn.fetch("SELECT worker, count(*) FROM attempts GROUP BY 1 ORDER BY 1")
    finally:
        await conn.close()
    return [(r[0], r[1]) for r in rows]


if __name__ == "__main__":
    main()
