"""Flow-control benchmarks (SPEC §6 "queue limits" and "fairness", §7), measured at loopback
receivers (:mod:`duetime.bench.receiver`'s ``/delay/MS`` and ``/hang`` paths).

``queue-limits``: on the configured store, one node —

- **max_concurrency drains**: for N = 5 and N = 50, ``N / 0.05 x DUETIME_BENCH_SECONDS``
  (default 5) webhook tasks with 50 ms handlers, due at one instant in a queue with
  ``max_concurrency`` N: the drain rate (from the first arrival to the last answer) against the bar
  0.8 x N / 0.05, the most requests in flight at the receiver (must be ≤ N), and the gap from
  an answer to the arrival that takes its slot (p50, p99: the cost of a freed slot).
- **serial keys**: ``max_concurrency_per_key`` 1, 16 keys x 12 tasks with 20 ms handlers, made
  while the queue is paused with mixed priorities and due times: keys whose tasks started out of
  (priority, due, creation) order, starts before the key's previous task was answered, and the
  most requests of all keys at once (keys in parallel).

then on PostgreSQL (always), two nodes sharing the store —

- **rate limit**: ``rate_limit_per_second`` R (``DUETIME_BENCH_RATE_LIMIT``, default 100) with the
  default burst, R x ``DUETIME_BENCH_RATE_SECONDS`` (default 30) + burst tasks due at once: the
  fewest and most starts in any 10 s window against R x 10 ± (burst + 10 %).

``fairness``: on the configured store, one node with auth on. Tenant A creates
``DUETIME_BENCH_FLOOD`` (default 50,000) webhook tasks, due at once, at a target that never
answers (``timeout_seconds`` 60, so they hang for the whole run); then tenant B creates
``DUETIME_BENCH_RATE`` (default 500) tasks per second for ``DUETIME_BENCH_SECONDS`` (default 20),
each due 0-2 s after its create, at a fast target. Reported: B's due-lag (tasks due after a 5 s
warm-up), and A's requests in flight at its receiver (sampled every 0.25 s) before and after B
starts, beside the node's delivery slots (``DUETIME_DISPATCH_CONCURRENCY``). The per-origin
connection cap is raised to the slot count so that it is the slots, not the cap, that the tenants
share (``DUETIME_BENCH_WEIGHTS=A:B`` sets the tenants' weights, default 1:1).
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import random
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import httpx

from duetime.bench import flow_measures as fm
from duetime.bench.harness import receiver_records, start_receiver, wait_delivered, wait_until
from duetime.bench.runs import BenchConfig, Figures, bench_store, node, percentile
from duetime.config import Settings

HANDLER_MS = 50
"""The handler time of the max_concurrency drains (SPEC §6)."""
DRAIN_LIMITS = (5, 50)
SERIAL_KEYS = 16
SERIAL_TASKS_PER_KEY = 12
SERIAL_HANDLER_MS = 20
RATE_WINDOW_SECONDS = 10.0
FAIRNESS_WARMUP_SECONDS = 5.0
FAIRNESS_SAMPLE_SECONDS = 0.25
ADMIN_TOKEN = "bench-admin-token-" + "0" * 32
"""The fairness node's admin token (loopback only, a throwaway node)."""


def _env_float(name: str, default: float) -> float:
    return float(os.environ.get(name, str(default)))


def _iso(unix: float) -> str:
    return datetime.fromtimestamp(unix, UTC).isoformat()


def bearer(key: str) -> dict[str, str]:
    return {"authorization": f"Bearer {key}"}


# -- the API calls the flow measurements make -------------------------------------------------


def put_queue(
    base: str, queue: str, settings: Mapping[str, Any], headers: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """``PUT /v1/queues/{queue}``; the queue as the server returns it (RuntimeError otherwise)."""
    r = httpx.put(f"{base}/v1/queues/{queue}", json=dict(settings), headers=headers, timeout=30)
    if r.status_code != 200:
        raise RuntimeError(f"PUT /v1/queues/{queue} {dict(settings)}: {r.status_code} {r.text}")
    return dict(r.json())


def queue_counts(
    base: str,
    queue: str,
    headers: Mapping[str, str] | None = None,
    client: httpx.Client | None = None,
) -> dict[str, int]:
    """The queue's task counts by status."""
    get = httpx.get if client is None else client.get
    r = get(f"{base}/v1/queues/{queue}", headers=headers, timeout=30)
    return {} if r.status_code == 404 else dict(r.json()["counts"])


def wait_queue_done(
    base: str, queue: str, total: int, timeout: float, headers: Mapping[str, str] | None = None
) -> None:
    """Wait until ``total`` tasks of ``queue`` have succeeded."""
    with httpx.Client() as poll:
        wait_until(
            lambda: queue_counts(base, queue, headers, poll).get("succeeded", 0) >= total,
            timeout,
            f"{total} tasks of queue {queue} to succeed",
        )


def new_tenant(base: str, name: str, weight: int | None = None) -> str:
    """Create a tenant (admin) and set its weight; its API key."""
    admin = bearer(ADMIN_TOKEN)
    made = httpx.post(f"{base}/v1/admin/tenants", json={"name": name}, headers=admin, timeout=30)
    if made.status_code != 201:
        raise RuntimeError(f"tenant {name}: {made.status_code} {made.text}")
    if weight is not None:
        patched = httpx.patch(
            f"{base}/v1/admin/tenants/{made.json()['id']}",
            json={"weight": weight},
            headers=admin,
            timeout=30,
        )
        if patched.status_code != 200:
            raise RuntimeError(f"weight of {name}: {patched.status_code} {patched.text}")
    return str(made.json()["api_key"])


async def create_tasks(
    base: str,
    bodies: Sequence[Mapping[str, Any]],
    headers: Mapping[str, str] | None = None,
    concurrency: int = 4,
) -> list[str]:
    """Create ``bodies`` in batches of 1,000 (``concurrency`` at once); their ids, in order."""
    chunks = [bodies[i : i + 1000] for i in range(0, len(bodies), 1000)]
    made: list[list[str]] = [[] for _ in chunks]
    sem = asyncio.Semaphore(concurrency)
    async with aiohttp.ClientSession(headers=dict(headers or {})) as session:

        async def post(index: int) -> None:
            body = {"tasks": list(chunks[index])}
            async with sem, session.post(f"{base}/v1/tasks/batch", json=body) as r:
                if r.status != 201:
                    raise RuntimeError(f"batch create failed: {r.status} {await r.text()}")
                made[index] = [item["id"] for item in (await r.json())["items"]]

        await asyncio.gather(*(post(i) for i in range(len(chunks))))
    return [task_id for chunk in made for task_id in chunk]


def records_of(receiver_url: str, ids: Sequence[str]) -> list[dict[str, Any]]:
    """The receiver's records of the tasks ``ids``."""
    wanted = set(ids)
    return [r for r in receiver_records(receiver_url) if r["task_id"] in wanted]


# -- queue-limits -----------------------------------------------------------------------------


def _drain(base: str, receiver_url: str, limit: int, seconds: float) -> Figures:
    """``max_concurrency`` ``limit``: tasks with 50 ms handlers, due at one instant."""
    queue = f"drain-{limit}"
    count = int(limit / (HANDLER_MS / 1000) * seconds)
    put_queue(base, queue, {"max_concurrency": limit})
    due = time.time() + 2.0 + count / 5000
    target = {"type": "http", "url": f"{receiver_url}/delay/{HANDLER_MS}"}
    body = {"target": target, "queue": queue, "run_at": _iso(due)}
    ids = asyncio.run(create_tasks(base, [body] * count))
    if time.time() >= due:
        raise RuntimeError("creating the drain took longer than its lead time")
    wait_queue_done(base, queue, count, timeout=seconds * 20 + 60)
    spans = fm.intervals(fm.first_records(records_of(receiver_url, ids)).values())
    prefix = f"mc{limit}_"
    gaps = fm.slot_gaps(spans, limit)
    return {
        f"{prefix}tasks": float(count),
        f"{prefix}drain_per_s": fm.drain_rate(spans),
        f"{prefix}bar_per_s": 0.8 * limit / (HANDLER_MS / 1000),
        f"{prefix}max_in_flight": float(fm.max_overlap(spans)),
        f"{prefix}first_lag_s": min(s for s, _ in spans) - due,
        f"{prefix}slot_gap_ms_p50": 1000 * percentile(gaps, 50),
        f"{prefix}slot_gap_ms_p99": 1000 * percentile(gaps, 99),
    }


def serial_tasks(
    receiver_url: str, queue: str, keys: int, per_key: int, handler_ms: int, seed: int = 7
) -> tuple[list[dict[str, Any]], dict[str, list[int]]]:
    """Task bodies for a serial-keys check, in creation order, with mixed priorities (0 or 1) and
    due times (one of three past instants), so that every tie-break of (priority desc, due,
    creation) is exercised; and each key's body indexes in the order they must run."""
    rng = random.Random(seed)
    past = time.time() - 60
    target = {"type": "http", "url": f"{receiver_url}/delay/{handler_ms}"}
    bodies: list[dict[str, Any]] = []
    order: dict[str, list[tuple[int, float, int]]] = {}
    for index in range(keys * per_key):
        key = f"key-{rng.randrange(keys)}"
        priority = rng.choice((0, 1))
        run_at = past + rng.choice((0.0, 1.0, 2.0))
        bodies.append(
            {
                "target": target,
                "queue": queue,
                "concurrency_key": key,
                "priority": priority,
                "run_at": _iso(run_at),
            }
        )
        order.setdefault(key, []).append((-priority, run_at, index))
    return bodies, {key: [i for *_, i in sorted(items)] for key, items in order.items()}


def _serial(base: str, receiver_url: str) -> Figures:
    """``max_concurrency_per_key`` 1: order and overlap per key, keys in parallel."""
    queue = "serial"
    put_queue(base, queue, {"max_concurrency_per_key": 1, "paused": True})
    bodies, order = serial_tasks(
        receiver_url, queue, SERIAL_KEYS, SERIAL_TASKS_PER_KEY, SERIAL_HANDLER_MS
    )
    ids = asyncio.run(create_tasks(base, bodies))
    started = time.time()
    put_queue(base, queue, {"max_concurrency_per_key": 1, "paused": False})
    wait_queue_done(base, queue, len(ids), timeout=120)
    elapsed = time.time() - started
    expected = {key: [ids[i] for i in indexes] for key, indexes in order.items()}
    check = fm.serial_check(records_of(receiver_url, ids), expected)
    longest = max(len(v) for v in expected.values()) * SERIAL_HANDLER_MS / 1000
    return {
        "serial_tasks": float(check.tasks),
        "serial_keys_out_of_order": float(check.out_of_order),
        "serial_overlaps": float(check.overlaps),
        "serial_missing": float(check.missing),
        "serial_most_keys_at_once": float(check.most_keys_at_once),
        "serial_elapsed_s": elapsed,
        "serial_longest_key_handlers_s": longest,
    }


def _node_of(worker: str) -> str:
    return worker.split("/")[0]


def _nodes_seen(base: str, ids: Sequence[str], sample: int = 40) -> int:
    """How many nodes made the attempts of a sample of the tasks ``ids``."""
    nodes: set[str] = set()
    with httpx.Client(timeout=10) as client:
        for task_id in ids[:: max(1, len(ids) // sample)]:
            attempts = client.get(f"{base}/v1/tasks/{task_id}/attempts").json()["items"]
            nodes.update(_node_of(a["worker"]) for a in attempts)
    return len(nodes)


def _rate_two_nodes(config: BenchConfig, workdir: Path, receiver_url: str) -> Figures:
    """``rate_limit_per_second`` across two nodes on PostgreSQL: starts per 10 s window."""
    rate = _env_float("DUETIME_BENCH_RATE_LIMIT", 100.0)
    seconds = _env_float("DUETIME_BENCH_RATE_SECONDS", 30.0)
    burst = fm.default_burst(rate)
    pg = dataclasses.replace(
        config, store="postgres", database=config.database if config.store == "postgres" else None
    )
    queue = "rate"
    count = int(rate * seconds) + burst
    with (
        bench_store(pg, workdir) as db,
        node(workdir, db, config) as first,
        node(workdir, db, config) as second,
    ):
        put_queue(first.url, queue, {"rate_limit_per_second": rate})
        target = {"type": "http", "url": f"{receiver_url}/hook"}
        ids = asyncio.run(create_tasks(second.url, [{"target": target, "queue": queue}] * count))
        wait_queue_done(first.url, queue, count, timeout=seconds * 3 + 60)
        nodes = _nodes_seen(first.url, ids)
    starts = [float(r["at"]) for r in fm.first_records(records_of(receiver_url, ids)).values()]
    windows = fm.window_counts(starts, RATE_WINDOW_SECONDS)
    low, high = fm.rate_bounds(rate, burst, RATE_WINDOW_SECONDS)
    return {
        "rate_limit_per_s": rate,
        "rate_burst": float(burst),
        "rate_nodes_delivering": float(nodes),
        "rate_windows": float(windows.count),
        "rate_window_fewest": float(windows.low),
        "rate_window_most": float(windows.high),
        "rate_bucket_excess": fm.bucket_excess(starts, rate, burst),
        "rate_bar_low": low,
        "rate_bar_high": high,
        "rate_after_burst_per_s": (len(starts) - burst) / (max(starts) - min(starts)),
    }


def queue_limits(config: BenchConfig, workdir: Path) -> Figures:
    """max_concurrency drains (N=5, 50; 50 ms handlers), serial keys, a rate limit on 2 nodes."""
    seconds = _env_float("DUETIME_BENCH_SECONDS", 5.0)
    receiver = start_receiver(workdir)
    try:
        figures: Figures = {}
        with bench_store(config, workdir) as db, node(workdir, db, config) as proc:
            for limit in DRAIN_LIMITS:
                figures.update(_drain(proc.url, receiver.url, limit, seconds))
            figures.update(_serial(proc.url, receiver.url))
        figures.update(_rate_two_nodes(config, workdir, receiver.url))
    finally:
        receiver.stop(5)
    return figures


# -- fairness ---------------------------------------------------------------------------------


async def steady_creates(
    base: str,
    headers: Mapping[str, str],
    target: Mapping[str, Any],
    rate: float,
    seconds: float,
) -> dict[str, float]:
    """Create tasks at ``rate`` per second for ``seconds`` (open loop, a batch every 20 ms), each
    due 0-2 s after its create; their due times (unix seconds) by id."""
    due: dict[str, float] = {}
    inflight: set[asyncio.Task[None]] = set()
    total = int(rate * seconds)
    async with aiohttp.ClientSession(headers=dict(headers)) as session:

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
                bodies = [{"target": dict(target), "run_at": _iso(at)} for at in times]
                job = asyncio.create_task(post(bodies, times))
                inflight.add(job)
                job.add_done_callback(inflight.discard)
                sent += count
            await asyncio.sleep(0.02)
        await asyncio.gather(*inflight)
    return due


class InFlightSampler:
    """Samples a receiver's requests in flight (``/_stats``) every ``interval`` seconds, in a
    task of the running loop, until stopped."""

    def __init__(self, receiver_url: str, interval: float = FAIRNESS_SAMPLE_SECONDS) -> None:
        self._url = receiver_url + "/_stats"
        self._interval = interval
        self.samples: list[int] = []
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        async with aiohttp.ClientSession() as session:
            while True:
                async with session.get(self._url) as r:
                    self.samples.append(int((await r.json(content_type=None))["inflight"]))
                await asyncio.sleep(self._interval)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> list[int]:
        assert self._task is not None
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)
        return self.samples


def _in_flight(receiver_url: str) -> int:
    return int(httpx.get(receiver_url + "/_stats", timeout=10).json()["inflight"])


def _slots(config: BenchConfig) -> int:
    configured = dict(config.node_env).get("DUETIME_DISPATCH_CONCURRENCY")
    return int(configured) if configured else Settings().dispatch_concurrency


def fairness(config: BenchConfig, workdir: Path) -> Figures:
    """Tenant A floods hanging webhooks while tenant B runs 500 tasks/s: B's lag, A's slots."""
    flood = int(_env_float("DUETIME_BENCH_FLOOD", 50_000))
    rate = _env_float("DUETIME_BENCH_RATE", 500.0)
    seconds = _env_float("DUETIME_BENCH_SECONDS", 20.0)
    weight_a, weight_b = (int(w) for w in os.environ.get("DUETIME_BENCH_WEIGHTS", "1:1").split(":"))
    slots = _slots(config)
    env = {
        "DUETIME_ADMIN_TOKEN": ADMIN_TOKEN,
        "DUETIME_ALLOW_PRIVATE_TARGETS": "true",
        "DUETIME_MAX_CONNECTIONS_PER_ORIGIN": str(slots),
    }
    hanging, fast = start_receiver(workdir), start_receiver(workdir)
    try:
        with bench_store(config, workdir) as db, node(workdir, db, config, **env) as proc:
            a = bearer(new_tenant(proc.url, "noisy", weight_a))
            b = bearer(new_tenant(proc.url, "quiet", weight_b))
            hang = {"target": {"type": "http", "url": f"{hanging.url}/hang"}, "timeout_seconds": 60}
            flood_started = time.time()
            asyncio.run(create_tasks(proc.url, [hang] * flood, a))
            flood_created = time.time() - flood_started
            alone = _in_flight(hanging.url)
            due, samples = asyncio.run(
                _quiet_tenant(proc.url, b, f"{fast.url}/hook", hanging.url, rate, seconds)
            )
            wait_delivered(fast.url, len(due), timeout=60, interval=0.2)
        arrived = {
            k: float(r["at"]) for k, r in fm.first_records(receiver_records(fast.url)).items()
        }
    finally:
        hanging.stop(5)
        fast.stop(5)
    measured_from = min(due.values()) + FAIRNESS_WARMUP_SECONDS
    lags = [arrived[task_id] - at for task_id, at in due.items() if at >= measured_from]
    return {
        "slots": float(slots),
        "a_flood": float(flood),
        "a_flood_create_s": flood_created,
        "a_in_flight_alone": float(alone),
        "a_in_flight_max": float(max(samples)),
        "a_in_flight_median": float(statistics.median(samples)),
        "b_rate_per_s": rate,
        "b_measured": float(len(lags)),
        "b_lag_p50_s": percentile(lags, 50),
        "b_lag_p99_s": percentile(lags, 99),
        "b_lag_max_s": max(lags),
    }


async def _quiet_tenant(
    base: str,
    headers: Mapping[str, str],
    url: str,
    hanging_url: str,
    rate: float,
    seconds: float,
) -> tuple[dict[str, float], list[int]]:
    sampler = InFlightSampler(hanging_url)
    sampler.start()
    due = await steady_creates(base, headers, {"type": "http", "url": url}, rate, seconds)
    return due, await sampler.stop()


FLOW_SCENARIOS: dict[str, Callable[[BenchConfig, Path], Figures]] = {
    "queue-limits": queue_limits,
    "fairness": fairness,
}
