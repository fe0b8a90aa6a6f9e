"""Keyed rate limits at scale (SPEC §6 "keyed limits", §7): ``--keys`` keys each offered
``--rate`` tasks a second plus one hot key offered ``--hot-rate``, in one queue whose keyed rate
limit is ``--rate`` per key (burst 1), for ``--seconds``; then the same start rate in a plain
queue (no limits). Prints every key's start rate against its limit, and what a claim costs per
task in each queue::

    flock /tmp/bench.lock .venv/bin/python benchmarks/flow_keys.py [--keys 10000] [--rate 1]
        [--hot-rate 10] [--seconds 60] [--warmup 5] [--limit 1000] [--repeat 1]
        [--plain-rate limit|keyed]

How: every task is made up front, ``scheduled`` at its key's slot (key ``i``'s ``j``-th task
due at ``j / rate + i / (keys x rate)``, the hot key's every ``1 / hot-rate``), and a promoter
loop makes them ready as they fall due, so tasks become ready at exactly the offered rates. A
claimer process claims like a pull worker (``task_claim`` of one tenant's queue, up to
``--limit``; 5 ms apart while a claim comes back short) and acknowledges every lease on a
second connection. A claim's cost is the claimer's own CPU while in ``task_claim`` plus the CPU
of the PostgreSQL backend serving its one connection (``/proc``; Linux), per task claimed: the
claim statements only, not the creates, promotions or acks around them.

Figures: per key, starts in the window after ``--warmup`` seconds over its length (the limit
is ``--rate``; the hot key's too, offered ten times more); the share of keys within 5 % of the
limit; keys that never started (starved); the claim's CPU per task in the keyed queue and in
the plain one at the same rate, and their ratio (the bar: within 10 %).

The plain queue's keys are offered ``--rate`` each (``--plain-rate limit``), or, with
``--plain-rate keyed``, the median start rate the keyed queue's keys reached in the same round:
when one claimer cannot keep up with the keyed queue, the plain one then starts tasks at the
keyed one's rate too, so both claims fill alike (a claim's cost per task falls as it fills).
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import statistics
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from duetime.bench.runs import BenchConfig, bench_store, cpu_speed, machine, process_cpu_seconds
from duetime.store import store_from_url
from duetime.store.postgres.backend import PostgresStore
from duetime.types import ClaimRequest, FlowRules, NewTask, QueueSettings, TargetType

TENANT = "bench"
HOT = "hot"
WORKER = frozenset({TargetType.WORKER})


def _key(i: int) -> str:
    return f"k{i:06d}"


def plan(keys: int, rate: float, hot_rate: float, seconds: float) -> list[tuple[float, str]]:
    """(offset in seconds, key) of every task to offer, in due order."""
    offers = [
        (j / rate + i / (keys * rate), _key(i))
        for i in range(keys)
        for j in range(int(seconds * rate) + 1)
        if j / rate + i / (keys * rate) < seconds
    ]
    offers += [(j / hot_rate, HOT) for j in range(int(seconds * hot_rate))]
    offers.sort()
    return offers


async def make_tasks(
    url: str, queue: str, keyed: bool, offers: list[tuple[float, str]]
) -> datetime:
    """Store every offer as a scheduled task of ``queue`` (with its flow key when ``keyed``);
    returns the instant offsets count from."""
    store = store_from_url(url)
    await store.open()
    try:
        await store.migrate()
        await store.tenant_create(TENANT, tenant_id=TENANT)
        if keyed:
            rules = FlowRules(key=("payload.key",), key_rate=ARGS.rate, key_burst=1)
            await store.queue_put(TENANT, queue, QueueSettings(flow=rules))
        # Far enough ahead to make them all first (creates in batches of 1,000 run at 20,000 to
        # 30,000 a second on PostgreSQL; a task made after its due time is ready at once).
        start = await store.now() + timedelta(seconds=10 + len(offers) / 10_000)
        for i in range(0, len(offers), 1000):
            await store.task_create_many(
                [
                    NewTask(
                        tenant_id=TENANT,
                        target={"type": "worker"},
                        name="job",
                        queue=queue,
                        payload_json=f'{{"key": "{key}"}}',
                        run_at=start + timedelta(seconds=offset),
                        flow_key=key if keyed else None,
                    )
                    for offset, key in offers[i : i + 1000]
                ]
            )
        late = (await store.now() - start).total_seconds()
        if late > 0:
            print(f"  warning: the tasks were made {late:.1f} s after the first fell due")
        return start
    finally:
        await store.close()


async def promote(url: str, until: float) -> None:
    """Make due tasks ready every few milliseconds until ``until`` (monotonic)."""
    store = store_from_url(url)
    await store.open()
    try:
        while time.monotonic() < until:
            while await store.task_promote_due(5000) == 5000:
                pass
            await asyncio.sleep(0.005)
    finally:
        await store.close()


def claimer(url: str, queue: str, start_unix: float, seconds: float, limit: int, out: Any) -> None:
    """The claimer process: claims and acks until the offers end; sends its figures."""
    out.send(asyncio.run(_claim_loop(url, queue, start_unix, seconds, limit)))


async def _claim_loop(
    url: str, queue: str, start_unix: float, seconds: float, limit: int
) -> dict[str, Any]:
    claims = store_from_url(url)
    acks = store_from_url(url)
    if isinstance(claims, PostgresStore):
        claims = PostgresStore(url, pool_min=1, pool_max=1)
        acks = PostgresStore(url, pool_min=1, pool_max=1)
    await claims.open()
    await acks.open()
    backend = None
    if isinstance(claims, PostgresStore):
        async with claims._connection() as conn:  # the one connection every claim runs on
            backend = int(await conn.fetchval("SELECT pg_backend_pid()"))
    request = ClaimRequest(
        worker_id="bench", limit=limit, target_types=WORKER, queue=queue, tenant_id=TENANT
    )
    starts: dict[str, list[float]] = {}
    client_cpu = server_cpu = 0.0
    claimed = calls = 0
    end = start_unix + seconds + 2.0
    try:
        while time.time() < end:
            cpu0 = time.process_time()
            pg0 = 0.0 if backend is None else process_cpu_seconds(backend)
            leases = await claims.task_claim(request)
            client_cpu += time.process_time() - cpu0
            if backend is not None:
                server_cpu += process_cpu_seconds(backend) - pg0
            calls += 1
            claimed += len(leases)
            for lease in leases:
                at = lease.task.started_at
                assert at is not None
                key = lease.task.payload["key"]
                starts.setdefault(key, []).append(at.timestamp() - start_unix)
            if leases:
                await acks.task_complete_leased(
                    TENANT, [x.lease_id for x in leases], [None] * len(leases)
                )
            if len(leases) < limit:
                await asyncio.sleep(0.005)
    finally:
        await claims.close()
        await acks.close()
    return {
        "starts": starts,
        "claimed": claimed,
        "calls": calls,
        "client_cpu": client_cpu,
        "server_cpu": server_cpu,
    }


def run_queue(url: str, queue: str, keyed: bool, offers: list[tuple[float, str]]) -> dict[str, Any]:
    """Offer ``offers`` to ``queue`` and claim them; the claimer's figures."""
    start = asyncio.run(make_tasks(url, queue, keyed, offers))
    start_unix = start.timestamp()
    mp = multiprocessing.get_context("spawn")
    here, there = mp.Pipe()
    proc = mp.Process(
        target=claimer, args=(url, queue, start_unix, ARGS.seconds, ARGS.limit, there)
    )
    proc.start()
    until = time.monotonic() + (start_unix - time.time()) + ARGS.seconds + 2.0
    asyncio.run(promote(url, until))
    figures: dict[str, Any] = here.recv()
    proc.join(30)
    return figures


def key_rates(starts: dict[str, list[float]], warmup: float, seconds: float) -> dict[str, float]:
    """Each key's starts per second within [warmup, seconds)."""
    span = seconds - warmup
    return {
        key: sum(1 for t in times if warmup <= t < seconds) / span for key, times in starts.items()
    }


def report(label: str, figures: dict[str, Any], keys: int) -> tuple[float, float]:
    """Print one queue's figures; returns its claim CPU per task in microseconds and its keys'
    median start rate."""
    claimed = max(1, figures["claimed"])
    client = figures["client_cpu"] / claimed * 1e6
    server = figures["server_cpu"] / claimed * 1e6
    print(
        f"  {label}: {figures['claimed']} claimed in {figures['calls']} claims; claim CPU per "
        f"task {client + server:.1f} us (client {client:.1f} + PostgreSQL backend {server:.1f})"
    )
    rates = key_rates(figures["starts"], ARGS.warmup, ARGS.seconds)
    normal = [rates.get(_key(i), 0.0) for i in range(keys)]
    within = sum(1 for r in normal if abs(r - ARGS.rate) <= 0.05 * ARGS.rate)
    starved = sum(1 for i in range(keys) if not figures["starts"].get(_key(i)))
    print(
        f"    keys: start rate min {min(normal):.3f}/s, median {statistics.median(normal):.3f}/s, "
        f"max {max(normal):.3f}/s (limit {ARGS.rate:g}/s); within 5 %: {within}/{keys}; "
        f"never started: {starved}; hot key: {rates.get(HOT, 0.0):.3f}/s "
        f"(offered {ARGS.hot_rate:g}/s)"
    )
    return client + server, statistics.median(normal)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--rate", type=float, default=1.0)
    parser.add_argument("--hot-rate", type=float, default=10.0)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--warmup", type=float, default=5.0)
    parser.add_argument("--limit", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--plain-rate", choices=("limit", "keyed"), default="limit")
    parser.add_argument("--store", choices=("postgres",), default="postgres")
    parser.add_argument("--pg-url", default="postgresql://postgres@127.0.0.1:5432/test")
    global ARGS
    ARGS = parser.parse_args()
    print(f"machine: {machine()}; {cpu_speed()}")
    print(
        f"store: {ARGS.store}; {ARGS.keys} keys at {ARGS.rate:g}/s + one at "
        f"{ARGS.hot_rate:g}/s, keyed rate limit {ARGS.rate:g}/s per key (burst 1), "
        f"{ARGS.seconds:g} s (the first {ARGS.warmup:g} s not counted), claims of "
        f"{ARGS.limit}"
    )
    keyed_offers = plan(ARGS.keys, ARGS.rate, ARGS.hot_rate, ARGS.seconds)
    # The plain queue at the keyed one's start rate: the hot key at its limit, not its offer.
    plain_offers = plan(ARGS.keys, ARGS.rate, ARGS.rate, ARGS.seconds)
    print(f"  offered: {len(keyed_offers)} keyed tasks, {len(plain_offers)} plain")
    config = BenchConfig(store=ARGS.store, pg_url=ARGS.pg_url)
    ratios = []
    for round_ in range(ARGS.repeat):
        print(f"run {round_ + 1}:")
        with tempfile.TemporaryDirectory() as tmp:
            with bench_store(config, Path(tmp)) as url:
                keyed, reached = report(
                    "keyed", run_queue(url, "keyed", True, keyed_offers), ARGS.keys
                )
            offers = plain_offers
            if ARGS.plain_rate == "keyed" and 0 < reached < ARGS.rate:
                offers = plan(ARGS.keys, reached, reached, ARGS.seconds)
                print(f"  plain queue offered {reached:.3f}/s a key ({len(offers)} tasks)")
            with bench_store(config, Path(tmp)) as url:
                plain, _ = report("plain", run_queue(url, "plain", False, offers), ARGS.keys)
        ratios.append(keyed / plain if plain else float("inf"))
        print(f"  claim CPU per task, keyed / plain: {ratios[-1]:.3f}")
    print(f"keyed / plain, median of {len(ratios)}: {statistics.median(ratios):.3f}")


ARGS: argparse.Namespace

if __name__ == "__main__":
    main()
