"""The SDK over a real loopback socket (its aiohttp path, used whenever no httpx transport is
given): headers, query strings, error mapping, retries, timeouts and refused connections."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from duetime.sdk import ApiNotFound, ApiUnavailable, AsyncClient, TransportError, worker_target
from duetime.sdk.http_aiohttp import AiohttpBackend

TASK = {
    "id": "0b0f7a52-5f1e-4a8e-9a55-3c1d2b1a0c01",
    "status": "ready",
    "run_at": "2030-01-01T00:00:00Z",
    "target": {"type": "worker"},
    "created_at": "2030-01-01T00:00:00Z",
    "updated_at": "2030-01-01T00:00:00Z",
}


class FakeServer:
    """Answers from a script: each request pops the next reply (or sleeps, for timeouts)."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, dict[str, str], bytes]] = []
        self.replies: list[Any] = []

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        self.requests.append((request.method, request.path_qs, dict(request.headers), body))
        reply = self.replies.pop(0) if self.replies else web.json_response(TASK, status=201)
        if isinstance(reply, float):
            await asyncio.sleep(reply)
            return web.json_response(TASK, status=201)
        assert isinstance(reply, web.StreamResponse)
        return reply


@pytest.fixture
async def server() -> AsyncIterator[tuple[FakeServer, str]]:
    fake = FakeServer()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", fake.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield fake, f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_a_call_sends_headers_body_and_query_as_httpx_did(
    server: tuple[FakeServer, str],
) -> None:
    fake, url = server
    async with AsyncClient(url, "dt_key") as client:
        assert isinstance(client._http, AiohttpBackend)
        task = await client.create_task(target=worker_target(), payload={"a": 1})
        assert task.created is True and task.id == TASK["id"]
        fake.replies.append(web.json_response({"items": [], "next_cursor": None}))
        await client._request("GET", "/v1/tasks", params=[("a", True), ("b", None), ("c", 1.5)])
    (method, path, headers, body), (_, query, _, _) = fake.requests
    assert method == "POST" and path == "/v1/tasks"
    assert headers["Authorization"] == "Bearer dt_key"
    assert headers["Content-Type"] == "application/json"
    assert headers["User-Agent"].startswith("duetime-python/")
    assert body == b'{"target":{"type":"worker"},"payload":{"a":1}}'
    assert query == "/v1/tasks?a=true&b=&c=1.5"


async def test_errors_map_to_typed_api_errors(server: tuple[FakeServer, str]) -> None:
    fake, url = server
    problem = {"type": "urn:duetime:problem:not-found", "title": "Not found", "status": 404}
    fake.replies.append(web.json_response(problem, status=404))
    async with AsyncClient(url) as client:
        with pytest.raises(ApiNotFound):
            await client.get_task(TASK["id"])


async def test_a_503_is_tried_again_with_its_retry_after(server: tuple[FakeServer, str]) -> None:
    fake, url = server
    busy = {"title": "Store unavailable", "status": 503}
    fake.replies += [
        web.json_response(busy, status=503, headers={"Retry-After": "0"}) for _ in range(2)
    ]
    async with AsyncClient(url, retries=1) as client:
        with pytest.raises(ApiUnavailable):
            await client.create_task(target=worker_target())
    assert len(fake.requests) == 2


async def test_a_timeout_is_a_transport_error_and_a_plain_post_is_not_repeated(
    server: tuple[FakeServer, str],
) -> None:
    fake, url = server
    # 0.5 s: room for the answers that come at once on a loaded machine; 1.5 s replies time out.
    fake.replies += [1.5, 1.5]
    async with AsyncClient(url, timeout=0.5, retries=3) as client:
        with pytest.raises(TransportError, match="timed out"):
            await client.create_task(target=worker_target())
        assert len(fake.requests) == 1, "a create without an idempotency key may have landed"
        fake.replies[:] = [1.5, web.json_response(TASK)]
        await client.get_task(TASK["id"])  # a GET is safe to repeat: the second try answers
    assert len(fake.requests) == 3


async def test_a_refused_connection_is_retried_then_raised() -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    async with AsyncClient(url, retries=2) as client:
        with pytest.raises(TransportError, match="cannot reach"):
            await client.create_task(target=worker_target())


async def test_a_long_poll_stretches_the_read_timeout(server: tuple[FakeServer, str]) -> None:
    fake, url = server
    fake.replies.append(0.4)
    async with AsyncClient(url, timeout=0.2, retries=0) as client:
        reply = await client._send("POST", "/v1/queues/q/lease", body={}, extra_read_seconds=1.0)
    assert reply.status_code == 201 and reply.is_success


async def test_a_client_works_from_one_event_loop_after_another(
    server: tuple[FakeServer, str],
) -> None:
    """Two ``asyncio.run`` calls (in a thread, while this loop serves) share one client."""
    fake, url = server
    client = AsyncClient(url)

    async def create() -> str:
        return (await client.create_task(target=worker_target())).id

    def twice() -> list[str]:
        return [asyncio.run(create()), asyncio.run(create())]

    assert await asyncio.to_thread(twice) == [TASK["id"]] * 2
    assert len(fake.requests) == 2


def test_without_aiohttp_the_client_speaks_httpx(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from duetime.sdk._http import network_backend
    from duetime.sdk.http import HttpxBackend

    monkeypatch.setitem(sys.modules, "duetime.sdk.http_aiohttp", None)  # as if not installed
    backend = network_backend("http://127.0.0.1:9", {}, 1.0)
    assert isinstance(backend, HttpxBackend)
