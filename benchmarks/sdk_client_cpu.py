"""The client's CPU per call, apart from any server work (ADR 0009): one caller on the default
asyncio loop (what ``asyncio.run`` gives users) awaits POSTs of a task body to a server in another
process that answers every request at once with a canned 201 and a task (uvloop, a bare
protocol), so the round trip is almost all client::

    aiohttp      aiohttp.ClientSession.post + read (the SDK's transport before ADR 0009)
    http1        duetime.http1.HttpPool.request_at (the SDK's transport now)
    sdk          duetime.AsyncClient.create_task (model checks, JSON, http1, Task decoding)
    sdk-httpx    duetime.AsyncClient.create_task over httpx (the install without duetime[fast])

    .venv/bin/python benchmarks/sdk_client_cpu.py [--seconds 3] [--repeat 3] [--only a,b]

Clients run in turn, one round after another; medians of the rounds are reported.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

from duetime.bench.harness import free_port
from duetime.bench.runs import cpu_speed, machine

TASK = (
    b'{"id":"01a22036-833d-707f-8ebb-bc36b306ecff","name":null,"queue":"default",'
    b'"status":"scheduled","target":{"type":"worker"},"payload":{"k":"v"},'
    b'"run_at":"2026-11-28T04:32:52.000000Z","created_at":"2026-11-28T03:32:52.100000Z",'
    b'"updated_at":"2026-11-28T03:32:52.100000Z","attempts":0,"max_attempts":5,"priority":0,'
    b'"idempotency_key":null,"labels":{},"tenant_id":"default","last_error":null}'
)
ANSWER = (
    b"HTTP/1.1 201 Created\r\ndate: Sat, 28 Nov 2026 03:32:52 GMT\r\nserver: uvicorn\r\n"
    b"content-length: %d\r\ncontent-type: application/json\r\n\r\n" % len(TASK)
) + TASK
BODY = b'{"target":{"type":"worker"},"payload":{"k":"v"},"run_at":"2030-01-01T00:00:00Z"}'
CLIENTS = ("aiohttp", "http1", "sdk", "sdk-httpx")


def serve(port: int) -> None:
    """The canned server: every complete request (``Content-Length`` framed) gets :data:`ANSWER`."""
    import uvloop

    class Answer(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            self.transport: asyncio.Transport = transport  # type: ignore[assignment]
            self.buffer = b""

        def data_received(self, data: bytes) -> None:
            self.buffer += data
            while (end := self.buffer.find(b"\r\n\r\n")) >= 0:
                head = self.buffer[:end].lower()
                at = head.find(b"content-length:")
                length = int(head[at + 15 :].split(b"\r\n")[0]) if at >= 0 else 0
                if len(self.buffer) < end + 4 + length:
                    return
                self.buffer = self.buffer[end + 4 + length :]
                self.transport.write(ANSWER)

    async def main() -> None:
        server = await asyncio.get_running_loop().create_server(Answer, "127.0.0.1", port)
        await server.serve_forever()

    uvloop.run(main())


async def _caller(
    kind: str, url: str
) -> tuple[Callable[[], Awaitable[object]], Callable[[], Awaitable[None]]]:
    """The call to time and how to close its client."""
    if kind == "aiohttp":
        import aiohttp
        from yarl import URL

        session = aiohttp.ClientSession()
        target = URL(url + "/v1/tasks", encoded=True)
        headers = {"content-type": "application/json"}

        async def post() -> bytes:
            async with session.post(target, data=BODY, headers=headers) as response:
                return await response.read()

        return post, session.close
    if kind == "http1":
        from yarl import URL

        from duetime import http1

        pool = http1.HttpPool(http1.SystemResolver(), body_limit=None)
        origin = http1.Origin.of(URL(url))
        headers = [("content-type", "application/json")]

        async def send() -> object:
            return await pool.request_at(origin, "POST", "/v1/tasks", headers, BODY, timeout=10)

        return send, pool.close
    from duetime import AsyncClient
    from duetime.sdk.http import HttpxBackend

    client = AsyncClient(url, retries=0)
    if kind == "sdk-httpx":
        client._http = HttpxBackend(url, {"user-agent": "bench"}, 10.0)
    later = datetime.now(UTC) + timedelta(hours=1)

    async def create() -> object:
        return await client.create_task(target={"type": "worker"}, payload={"k": "v"}, run_at=later)

    return create, client.aclose


async def measure(kind: str, url: str, seconds: float) -> tuple[float, float]:
    """(calls per second, client CPU µs per call)."""
    call, close = await _caller(kind, url)
    try:
        for _ in range(500):
            await call()
        done, cpu, start = 0, time.process_time(), time.perf_counter()
        while time.perf_counter() - start < seconds:
            await call()
            done += 1
        wall = time.perf_counter() - start
        return done / wall, (time.process_time() - cpu) / done * 1e6
    finally:
        await close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", default=",".join(CLIENTS))
    args = parser.parse_args()
    kinds = [k for k in args.only.split(",") if k]
    unknown = set(kinds) - set(CLIENTS)
    if unknown:
        parser.error(f"unknown clients {sorted(unknown)}; known: {', '.join(CLIENTS)}")
    print(f"# machine: {machine()}; speed: {cpu_speed()}")
    port = free_port()
    server = subprocess.Popen([sys.executable, __file__, "--serve", str(port)])
    try:
        time.sleep(1.0)
        url = f"http://127.0.0.1:{port}"
        results: dict[str, list[tuple[float, float]]] = {k: [] for k in kinds}
        for round_ in range(1, args.repeat + 1):
            for kind in kinds:
                rate, cpu = asyncio.run(measure(kind, url, args.seconds))
                results[kind].append((rate, cpu))
                print(f"round {round_}: {kind:10s} {rate:8,.0f} calls/s  client CPU {cpu:6.1f} us")
        for kind, runs in results.items():
            rate = statistics.median(r for r, _ in runs)
            cpu = statistics.median(c for _, c in runs)
            print(f"median: {kind:10s} {rate:8,.0f} calls/s  client CPU {cpu:6.1f} us")
    finally:
        server.kill()
        server.wait()


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--serve":
        serve(int(sys.argv[2]))
    else:
        main()
