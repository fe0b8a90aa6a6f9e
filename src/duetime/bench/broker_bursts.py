"""Broker bursts (SPEC §6 "broker targets"): N tasks due at one instant, published by a duetime
node to RabbitMQ, NATS JetStream or Redis Streams on loopback, each confirmed by the broker.

Due-lag runs from the instant the tasks were due to the message being stored: for NATS and
Redis the time the stream stored each message (its JetStream metadata, its Redis entry id); for
RabbitMQ, which keeps no such time, the time duetime recorded the confirmed publish (the task's
``finished_at``), once the queue holds every message. All are read after the burst, so no
consumer competes with the node for the cores during it. ``confirmed_per_s`` is N over the time
from the due instant to the last arrival; ``all_succeeded_after_s`` is when the node had recorded
every task succeeded (confirmed publishes only count as succeeded); ``failed_attempts`` counts
the attempts that failed or timed out on the way (each was retried).

Brokers: ``DUETIME_BENCH_AMQP_URL``, ``DUETIME_BENCH_NATS_URL``, ``DUETIME_BENCH_REDIS_URL``
(default: the local services). Every run uses its own queue, stream or key, removed afterwards.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
import uuid
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from duetime.bench.runs import BenchConfig

Figures = dict[str, float]
T = TypeVar("T")
Arrivals = dict[str, float]
"""task id -> unix time its message reached the broker (first arrival)."""

AMQP_URL = os.environ.get("DUETIME_BENCH_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/")
NATS_URL = os.environ.get("DUETIME_BENCH_NATS_URL", "nats://127.0.0.1:4222")
REDIS_URL = os.environ.get("DUETIME_BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")


class _Sink:
    """Where a burst goes: the target to give tasks, and how to learn the arrival times."""

    target: dict[str, Any]

    async def open(self) -> None: ...

    async def arrivals(self, expected: int, timeout: float, node_url: str) -> Arrivals:
        raise NotImplementedError

    async def close(self) -> None: ...


class _AmqpSink(_Sink):
    def __init__(self) -> None:
        self.queue = f"duetime-bench-{uuid.uuid4().hex[:8]}"
        self.target = {"type": "amqp", "url": AMQP_URL, "routing_key": self.queue}

    async def open(self) -> None:
        import aiormq

        self._conn = await aiormq.connect(AMQP_URL)
        self._channel = await self._conn.channel()
        await self._channel.queue_declare(self.queue, auto_delete=False)

    async def arrivals(self, expected: int, timeout: float, node_url: str) -> Arrivals:
        deadline = time.monotonic() + timeout
        while True:
            declared = await self._channel.queue_declare(self.queue, passive=True)
            if (declared.message_count or 0) >= expected:
                break
            if time.monotonic() > deadline:
                return {}
            await asyncio.sleep(0.05)
        # RabbitMQ keeps no arrival time, and a live consumer would compete for the same cores:
        # take when duetime recorded each confirmed publish (the task's finished_at).
        return await _finished_at(node_url)

    async def close(self) -> None:
        await self._channel.queue_delete(self.queue)
        await self._conn.close()


async def _finished_at(node_url: str) -> Arrivals:
    """task id -> unix time the node recorded it succeeded, for every succeeded task."""
    import httpx

    seen: Arrivals = {}
    cursor: str | None = None
    async with httpx.AsyncClient(base_url=node_url, timeout=30) as client:
        while True:
            params: dict[str, Any] = {"status": "succeeded", "limit": 1000}
            if cursor:
                params["cursor"] = cursor
            page = (await client.get("/v1/tasks", params=params)).json()
            for task in page["items"]:
                at = datetime.fromisoformat(task["finished_at"].replace("Z", "+00:00"))
                seen[task["id"]] = at.timestamp()
            cursor = page.get("next_cursor")
            if not cursor:
                return seen


class _NatsSink(_Sink):
    def __init__(self) -> None:
        self.stream = f"duetime_bench_{uuid.uuid4().hex[:8]}"
        self.target = {"type": "nats", "url": NATS_URL, "subject": f"{self.stream}.due"}

    async def open(self) -> None:
        import nats
        from nats.js.api import StreamConfig

        self._nc = await nats.connect(NATS_URL)
        self._js = self._nc.jetstream()
        await self._js.add_stream(StreamConfig(name=self.stream, subjects=[f"{self.stream}.>"]))

    async def arrivals(self, expected: int, timeout: float, node_url: str) -> Arrivals:
        deadline = time.monotonic() + timeout
        while (await self._js.stream_info(self.stream)).state.messages < expected:
            if time.monotonic() > deadline:
                break
            await asyncio.sleep(0.05)
        # Read the stream afterwards (no consumer competes for CPU during the burst): each
        # message's metadata says when the stream stored it.
        seen: Arrivals = {}
        sub = await self._js.subscribe(f"{self.stream}.due", ordered_consumer=True)
        try:
            stored = (await self._js.stream_info(self.stream)).state.messages
            for _ in range(stored):
                msg = await sub.next_msg(timeout=10)
                stamp = msg.metadata.timestamp.timestamp()
                seen.setdefault((msg.headers or {})["duetime-task-id"], stamp)
        finally:
            await sub.unsubscribe()
        return seen

    async def close(self) -> None:
        await self._js.delete_stream(self.stream)
        await self._nc.close()


class _RedisSink(_Sink):
    def __init__(self) -> None:
        self.key = f"duetime-bench-{uuid.uuid4().hex[:8]}"
        self.target = {"type": "redis", "url": REDIS_URL, "stream": self.key}

    async def open(self) -> None:
        import redis.asyncio as aioredis

        self._client = aioredis.Redis.from_url(REDIS_URL)

    async def arrivals(self, expected: int, timeout: float, node_url: str) -> Arrivals:
        deadline = time.monotonic() + timeout
        while await self._client.xlen(self.key) < expected:
            if time.monotonic() > deadline:
                break
            await asyncio.sleep(0.05)
        seen: Arrivals = {}
        start = "-"
        while True:  # the entry id is <ms since epoch>-<seq>: when Redis stored it
            page: list[Any] = await self._client.xrange(self.key, min=start, count=5000)  # type: ignore[assignment]
            for entry_id, fields in page:
                ms = int(entry_id.split(b"-")[0])
                seen.setdefault(fields[b"duetime-task-id"].decode(), ms / 1000)
            if len(page) < 5000:
                return seen
            start = "(" + page[-1][0].decode()

    async def close(self) -> None:
        await self._client.delete(self.key)
        await self._client.aclose()


def _burst(make: Callable[[], _Sink], broker: str) -> Callable[[BenchConfig, Path], Figures]:
    def scenario(config: BenchConfig, workdir: Path) -> Figures:
        return _run(make(), config, workdir)

    scenario.__doc__ = f"N tasks due at one instant, published to {broker} with confirms."
    return scenario


class _Loop:
    """An event loop on a thread of its own for the broker clients of a run, which outlive the
    shared bench helpers' own ``asyncio.run`` calls."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()

    def call(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()


def _run(sink: _Sink, config: BenchConfig, workdir: Path) -> Figures:
    from duetime.bench import runs
    from duetime.bench.harness import metric_total

    consumer = _Loop()
    try:
        consumer.call(sink.open())
        try:
            with runs.bench_store(config, workdir) as db, runs.node(workdir, db, config) as proc:
                # Room to create the burst on a loaded machine (the figures count from `due`).
                lead = 3.0 + config.tasks / 5_000
                due = datetime.now(UTC) + timedelta(seconds=lead)
                bodies = [
                    {"target": sink.target, "payload": {"n": i}, "run_at": due.isoformat()}
                    for i in range(config.tasks)
                ]
                asyncio.run(runs.create_batches(proc.url, bodies))
                if datetime.now(UTC) >= due:
                    raise RuntimeError("creating the burst took longer than its lead time")
                drained_at = runs.wait_succeeded(proc.url, config.tasks, timeout=lead + 120)
                first = consumer.call(sink.arrivals(config.tasks, 30, proc.url))
                retried = sum(
                    metric_total(proc.url, "duetime_attempts_total", f'outcome="{outcome}"')
                    for outcome in ("failed", "timed_out")
                )
        finally:
            consumer.call(sink.close())
    finally:
        consumer.close()
    if len(first) < config.tasks:
        raise RuntimeError(f"only {len(first)} of {config.tasks} tasks reached the broker")
    lags = [at - due.timestamp() for at in first.values()]
    span = max(first.values()) - due.timestamp()
    return {
        "confirmed_per_s": config.tasks / span,
        "lag_p50_s": runs.percentile(lags, 50),
        "lag_p99_s": runs.percentile(lags, 99),
        "all_succeeded_after_s": drained_at - due.timestamp(),
        "failed_attempts": retried,
    }


BROKER_SCENARIOS: dict[str, Callable[[BenchConfig, Path], Figures]] = {
    "burst-amqp": _burst(_AmqpSink, "RabbitMQ"),
    "burst-nats": _burst(_NatsSink, "NATS JetStream"),
    "burst-redis": _burst(_RedisSink, "Redis Streams"),
}
"""Registered in :data:`duetime.bench.scenarios.SCENARIOS`."""

__all__ = ["BROKER_SCENARIOS"]
