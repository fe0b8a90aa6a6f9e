"""Waits for results during a burst (SPEC §3 "Waiting for a result"): ``--waits`` concurrent
``GET /v1/tasks/{id}?wait=60`` calls on one node while SDK worker processes drain a burst of
``--tasks`` no-op tasks (the waited ones among them), all due at one instant.

Measures, per wait, how long after its task's end (the task's ``finished_at``, the store's
clock) the answer arrived, p50/p99/max, and how much the node's memory (RSS) grew while the
waits were open. The bar: p99 within 50 ms, growth under 50 MiB for 1,000 waits. An answer
arrives when its first bytes are read from its connection (:class:`_Call`): one client process
parsing 1,000 answers with an HTTP library stamps the last of a batch late for its own sake.

::

    .venv/bin/python benchmarks/result_waits.py --store postgres --waits 1000 --tasks 20000
    .venv/bin/python benchmarks/result_waits.py --store sqlite --repeat 1
    .venv/bin/python benchmarks/result_waits.py --store postgres --waits 500 --floor

``--floor`` prices what every answer of the burst pays, without the burst: ``--waits`` waits on
ready tasks, leased in one call and acknowledged in one (the SDK's ack batch), timed from the
ack's send to each answer.

Workers are ``benchmarks/worker_burst.py``'s (default ``duetime.Worker`` settings).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import re
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlsplit

import aiohttp
import orjson

from duetime.bench.runs import BenchConfig, bench_store, create_batches, machine, node, percentile

BURST = Path(__file__).with_name("worker_burst.py")
QUEUE = "burst"


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


class _Call(asyncio.Protocol):
    """One ``GET`` on its own connection, read by hand: the answer's arrival is stamped when its
    first bytes are read from the socket, not after an HTTP client library has parsed it, so
    the client's own turn through 1,000 answers arriving together is not counted as lag."""

    def __init__(self, request: bytes, answer: asyncio.Future[tuple[float, bytes]]) -> None:
        self.request, self.answer = request, answer
        self.at: float | None = None
        self.data = bytearray()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        transport.write(self.request)

    def data_received(self, data: bytes) -> None:
        if self.at is None:
            self.at = time.time()  # the answer arrived (it is parsed after)
        self.data += data
        head, sep, body = bytes(self.data).partition(b"\r\n\r\n")
        length = _LENGTH.search(head)
        if sep and length is not None and len(body) >= int(length[1]) and not self.answer.done():
            self.answer.set_result((self.at, body))

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.answer.done():
            self.answer.set_exception(exc or ConnectionError("closed before the answer"))


_LENGTH = re.compile(rb"(?im)^content-length:\s*(\d+)")


async def _waits(base: str, ids: list[str], opened: asyncio.Event) -> dict[str, float]:
    """Every wait, concurrently, each on its own connection (:class:`_Call`); the wall time
    each answer arrived, by task id."""
    url = urlsplit(base)
    host, port = url.hostname or "127.0.0.1", url.port or 80
    loop = asyncio.get_running_loop()
    answered: dict[str, float] = {}
    started = 0

    async def wait(task_id: str) -> None:
        nonlocal started
        request = (
            f"GET /v1/tasks/{task_id}?wait=60 HTTP/1.1\r\nHost: {url.netloc}\r\n"
            "Connection: close\r\n\r\n"
        ).encode()
        while True:
            started += 1
            if started == len(ids):
                opened.set()
            answer: asyncio.Future[tuple[float, bytes]] = loop.create_future()
            call = functools.partial(_Call, request, answer)
            transport, _ = await loop.create_connection(call, host, port)
            try:
                at, body = await asyncio.wait_for(answer, 120)
            finally:
                transport.close()
            if orjson.loads(body)["status"] in ("succeeded", "failed", "cancelled"):
                answered[task_id] = at
                return

    await asyncio.gather(*(wait(i) for i in ids))
    return answered


async def _finished(base: str, ids: list[str]) -> dict[str, float]:
    async with aiohttp.ClientSession() as session:

        async def one(task_id: str) -> tuple[str, float]:
            async with session.get(f"{base}/v1/tasks/{task_id}") as r:
                body = orjson.loads(await r.read())
            at = datetime.fromisoformat(body["finished_at"].replace("Z", "+00:00"))
            return task_id, at.timestamp()

        found: dict[str, float] = {}
        for start in range(0, len(ids), 200):
            found.update(await asyncio.gather(*(one(i) for i in ids[start : start + 200])))
        return found


def one_run(args: argparse.Namespace, workdir: Path) -> dict[str, float]:
    config = BenchConfig(store=args.store, pg_url=args.pg_url, tasks=args.tasks)
    with bench_store(config, workdir) as db, node(workdir, db, config) as proc:
        lead = 8.0 + args.tasks / 4_000
        due = datetime.now(UTC) + timedelta(seconds=lead)
        body = {
            "target": {"type": "worker"},
            "name": "noop",
            "queue": QUEUE,
            "run_at": due.isoformat(),
        }

        async def prepare() -> list[str]:
            await create_batches(proc.url, [body] * (args.tasks - args.waits))
            async with aiohttp.ClientSession() as session:
                ids: list[str] = []
                for start in range(0, args.waits, 1000):
                    batch = {"tasks": [body] * min(1000, args.waits - start)}
                    async with session.post(f"{proc.url}/v1/tasks/batch", json=batch) as r:
                        ids += [t["id"] for t in orjson.loads(await r.read())["items"]]
                return ids

        ids = asyncio.run(prepare())
        rss_before = _rss_mib(proc.popen.pid)
        outs = [workdir / f"worker-{i}.json" for i in range(args.workers)]
        workers = [
            subprocess.Popen(
                [sys.executable, str(BURST), "--child", proc.url, str(out), "0", "500"],
                stdout=(workdir / f"worker-{i}.log").open("wb"),
                stderr=subprocess.STDOUT,
            )
            for i, out in enumerate(outs)
        ]
        peak = rss_before

        async def measure() -> dict[str, float]:
            nonlocal peak
            opened = asyncio.Event()
            waiting = asyncio.create_task(_waits(proc.url, ids, opened))
            await opened.wait()
            while not waiting.done():
                peak = max(peak, _rss_mib(proc.popen.pid))
                await asyncio.sleep(0.05)
            return await waiting

        try:
            if datetime.now(UTC) >= due:
                raise RuntimeError("preparing the burst took longer than its lead time")
            answered = asyncio.run(measure())
        finally:
            for w in workers:
                w.terminate()
            for w in workers:
                w.wait(30)
        finished = asyncio.run(_finished(proc.url, ids))
    lags = [(answered[i] - finished[i]) * 1000 for i in ids]
    return {
        "answer_lag_p50_ms": percentile(lags, 50),
        "answer_lag_p99_ms": percentile(lags, 99),
        "answer_lag_max_ms": max(lags),
        "node_rss_growth_mib": peak - rss_before,
        "node_rss_before_mib": rss_before,
    }


def floor_run(args: argparse.Namespace, workdir: Path) -> dict[str, float]:
    """The floor under the lag (``--floor``): ``--waits`` waits on as many ready worker tasks,
    nothing else running; the tasks leased in one call and acknowledged in one call (as one
    worker's ack batch). The lag from each task's ``finished_at`` as in a burst; and, from the
    ack's send, its answer, the first and the last wait's answer, and the answers' spread per
    answer."""
    config = BenchConfig(store=args.store, pg_url=args.pg_url, tasks=args.waits)
    with bench_store(config, workdir) as db, node(workdir, db, config) as proc:

        async def measure() -> dict[str, float]:
            body = {"target": {"type": "worker"}, "name": "noop", "queue": QUEUE}
            async with aiohttp.ClientSession() as session:
                async with session.post(
                    f"{proc.url}/v1/tasks/batch", json={"tasks": [body] * args.waits}
                ) as r:
                    ids = [t["id"] for t in orjson.loads(await r.read())["items"]]
                opened = asyncio.Event()
                waiting = asyncio.create_task(_waits(proc.url, ids, opened))
                await opened.wait()
                await asyncio.sleep(1.0)  # every wait registered and its first read done
                leases: list[str] = []
                while len(leases) < len(ids):
                    ask = {"max_tasks": len(ids) - len(leases), "worker_id": "floor"}
                    async with session.post(f"{proc.url}/v1/queues/{QUEUE}/lease", json=ask) as r:
                        leases += [x["lease_id"] for x in orjson.loads(await r.read())["leases"]]
                acks = {"items": [{"lease_id": lease} for lease in leases]}
                sent = time.time()
                async with session.post(f"{proc.url}/v1/leases/complete", json=acks) as r:
                    assert r.status == 200, await r.text()
                acked = time.time()
                by_id = await waiting
            finished = await _finished(proc.url, ids)
            lags = [(by_id[i] - finished[i]) * 1000 for i in ids]
            answered = sorted(by_id.values())
            return {
                "answer_lag_p50_ms": percentile(lags, 50),
                "answer_lag_p99_ms": percentile(lags, 99),
                "ack_ms": (acked - sent) * 1000,
                "first_answer_ms": (answered[0] - sent) * 1000,
                "last_answer_ms": (answered[-1] - sent) * 1000,
                "per_answer_us": (answered[-1] - answered[0]) * 1e6 / max(1, len(answered) - 1),
            }

        return asyncio.run(measure())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--store", choices=("sqlite", "postgres"), default="postgres")
    parser.add_argument("--pg-url", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--tasks", type=int, default=20_000, help="the burst, waited ones included")
    parser.add_argument("--waits", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=2, help="worker processes")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--floor", action="store_true", help="the floor: --waits waits ended by one ack, no burst"
    )
    args = parser.parse_args()
    runs = []
    for i in range(args.repeat):
        with tempfile.TemporaryDirectory(prefix="duetime-waits-") as tmp:
            figures = (floor_run if args.floor else one_run)(args, Path(tmp))
        runs.append(figures)
        print(f"run {i + 1}: " + ", ".join(f"{k}={v:.1f}" for k, v in figures.items()))
    print(f"machine: {machine()}")
    if args.floor:
        print(f"store: {args.store}; {args.waits} waits ended by one ack of {args.waits} leases")
    else:
        print(f"store: {args.store}; {args.waits} waits in a burst of {args.tasks} tasks; "
              f"{args.workers} worker processes at default settings")  # fmt: skip
    for key in runs[0]:
        print(f"  {key}: median {statistics.median(r[key] for r in runs):.1f}")


if __name__ == "__main__":
    main()
