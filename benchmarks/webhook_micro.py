"""Micro-benchmark of the webhook hot path: signed deliveries per second, store and engine left out.

Starts the minimal receiver the node benchmarks use (:mod:`duetime.bench.receiver`:
httptools on uvloop, keep-alive, answers 204) in a separate process, then pushes ``--count``
signed deliveries through one :class:`duetime.delivery.webhook.WebhookDeliverer` with
``--concurrency`` in flight, ``--runs`` times, and prints the median rate next to the machine
and the configuration::

    .venv/bin/python benchmarks/webhook_micro.py --count 5000 --concurrency 256 --runs 3
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import tempfile
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import aiohttp

from duetime.auth import new_signing_secret
from duetime.bench.harness import start_receiver
from duetime.delivery.base import Delivery
from duetime.delivery.webhook import WebhookDeliverer
from duetime.testing.fakes import running_task
from duetime.types import AttemptOutcome, Task


def make_tasks(url: str, count: int) -> list[Task]:
    now = datetime.now(UTC)
    base = running_task(
        {"type": "http", "url": url},
        tenant_id="bench",
        name="bench",
        payload_json='{"report": "2030-01", "rows": [1, 2, 3], "customer": 42}',
        run_at=now,
        due_at=now,
        created_at=now,
        updated_at=now,
    )
    return [replace(base, id=f"0190f000-0000-7000-8000-{n:012d}") for n in range(count)]


async def one_run(
    deliverer: WebhookDeliverer, tasks: list[Task], secrets: tuple[str, ...], concurrency: int
) -> tuple[float, int]:
    pending = iter(tasks)
    errors: list[str] = []

    async def worker() -> None:
        for task in pending:
            outcome = await deliverer.deliver(Delivery(task=task, attempt=1, secrets=secrets))
            if outcome.outcome is not AttemptOutcome.SUCCEEDED:
                errors.append(outcome.error or str(outcome.outcome))

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = time.perf_counter() - started
    if errors:
        raise SystemExit(f"{len(errors)} deliveries failed, e.g. {errors[0]}")
    return elapsed, len(errors)


async def bench(args: argparse.Namespace, url: str) -> None:
    secrets = tuple(new_signing_secret() for _ in range(args.secrets))
    tasks = make_tasks(f"{url}/hook", args.count)
    deliverer = WebhookDeliverer(allow_private=True, max_connections=args.concurrency)
    rates: list[float] = []
    try:
        await one_run(deliverer, tasks[: min(500, len(tasks))], secrets, args.concurrency)  # warm
        for run in range(args.runs):
            elapsed, failures = await one_run(deliverer, tasks, secrets, args.concurrency)
            rate = len(tasks) / elapsed
            rates.append(rate)
            print(
                f"run {run + 1}: {len(tasks)} in {elapsed:.3f}s = {rate:,.0f}/s, {failures} failed"
            )
    finally:
        await deliverer.close()
    print(
        f"machine: {platform.machine()} {os.cpu_count()} cpus, {platform.system()} "
        f"{platform.release()}; python {platform.python_version()}; aiohttp {aiohttp.__version__}; "
        f"loop {args.loop}"
    )
    print(
        f"config: count={args.count} concurrency={args.concurrency} secrets={args.secrets} "
        f"receiver=duetime.bench.receiver (separate process)"
    )
    print(f"median: {statistics.median(rates):,.0f} signed deliveries/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=5000)
    parser.add_argument("--concurrency", type=int, default=256)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--secrets", type=int, default=1, help="signatures per delivery")
    parser.add_argument("--loop", choices=("uvloop", "asyncio"), default="uvloop")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="duetime-webhook-micro-") as tmp:
        receiver = start_receiver(Path(tmp))  # the same receiver the node benchmarks use
        try:
            if args.loop == "uvloop":
                import uvloop

                uvloop.run(bench(args, receiver.url))
            else:
                asyncio.run(bench(args, receiver.url))
        finally:
            receiver.stop(10)


if __name__ == "__main__":
    main()
