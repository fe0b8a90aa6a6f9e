"""The node's own CPU per task in each of the two hot routes of a pull worker, apart: one caller
leases ``--batch`` tasks (``POST /v1/queues/{name}/lease``) and acknowledges them in one call
(``POST /v1/leases/complete``), through ``--tasks`` ready worker tasks, nothing else running.

The CPU is the node's main thread's (the event loop: ``/proc/<pid>/schedstat``, nanoseconds)
read around each call, so the figure holds the route's whole cost in the node (HTTP, auth,
validation, the store's statement and its rows, the answer) and nothing of the caller's or
PostgreSQL's. A fresh store and node per run::

    .venv/bin/python benchmarks/route_cpu.py --store postgres --tasks 20000 --repeat 3

For two revisions side by side, run this file from each one's worktree
(``PYTHONPATH=<worktree>/src``, the file copied into an older one) in turn, one run of each per
round.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
from pathlib import Path

import aiohttp
import orjson

from duetime.bench.runs import BenchConfig, bench_store, machine, node

QUEUE = "routes"


def _thread_cpu(pid: int) -> float:
    """Seconds the process's main thread has run on a CPU."""
    return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0]) / 1e9


def one_run(args: argparse.Namespace, workdir: Path) -> dict[str, float]:
    config = BenchConfig(store=args.store, pg_url=args.pg_url, tasks=args.tasks)
    with bench_store(config, workdir) as db, node(workdir, db, config) as proc:
        pid = proc.popen.pid

        async def measure() -> dict[str, float]:
            body = {"target": {"type": "worker"}, "queue": QUEUE}
            async with aiohttp.ClientSession() as session:
                for start in range(0, args.tasks, 1000):
                    batch = {"tasks": [body] * min(1000, args.tasks - start)}
                    async with session.post(f"{proc.url}/v1/tasks/batch", json=batch) as r:
                        assert r.status == 201, await r.text()
                await asyncio.sleep(1.0)  # the creates' own after-work done
                lease_s = ack_s = 0.0
                done = 0
                ask = {"max_tasks": args.batch, "worker_id": "route-cpu", "wait_seconds": 1}
                while done < args.tasks:
                    before = _thread_cpu(pid)
                    async with session.post(f"{proc.url}/v1/queues/{QUEUE}/lease", json=ask) as r:
                        leases = orjson.loads(await r.read())["leases"]
                    leased = _thread_cpu(pid)
                    acks = {"items": [{"lease_id": x["lease_id"]} for x in leases]}
                    async with session.post(f"{proc.url}/v1/leases/complete", json=acks) as r:
                        assert r.status == 200, await r.text()
                        await r.read()
                    lease_s += leased - before
                    ack_s += _thread_cpu(pid) - leased
                    done += len(leases)
            return {
                "lease_us_per_task": lease_s * 1e6 / done,
                "ack_us_per_task": ack_s * 1e6 / done,
            }

        return asyncio.run(measure())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--store", choices=("sqlite", "postgres"), default="postgres")
    parser.add_argument("--pg-url", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--tasks", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=500, help="tasks per lease and per ack")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    runs = []
    for i in range(args.repeat):
        with tempfile.TemporaryDirectory(prefix="duetime-routes-") as tmp:
            figures = one_run(args, Path(tmp))
        runs.append(figures)
        print(f"run {i + 1}: " + ", ".join(f"{k}={v:.1f}" for k, v in figures.items()))
    print(f"machine: {machine()}")
    print(f"store: {args.store}; {args.tasks} tasks, {args.batch} a lease and an ack")
    for key in runs[0]:
        print(f"  {key}: median {statistics.median(r[key] for r in runs):.1f}")


if __name__ == "__main__":
    main()
