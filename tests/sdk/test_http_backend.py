"""The SDK over a real loopback socket (its :mod:`duetime.http1` path, used whenever no httpx
transport is given): headers, query strings, error mapping, retries, timeouts, refused
connections, connections the server closed, and long bodies."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from duetime.sdk import ApiNotFound, ApiUnavailable, AsyncClient, TransportError, worker_target
from duetime.sdk.http_lean import LeanBackend

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
        assert isinstance(client._http, LeanBackend)
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


def test_without_the_fast_extra_the_client_speaks_httpx(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from duetime.sdk._http import network_backend
    from duetime.sdk.http import HttpxBackend

    # As if httptools (or another of the extra's libraries) were missing: the import fails.
    monkeypatch.setitem(sys.modules, "duetime.sdk.http_lean", None)
    backend = network_backend("http://127.0.0.1:9", {}, 1.0)
    assert isinstance(backend, HttpxBackend)


async def test_a_base_url_with_a_path_prefixes_every_call(server: tuple[FakeServer, str]) -> None:
    fake, url = server
    async with AsyncClient(url + "/duetime/", retries=0) as client:
        await client.create_task(target=worker_target())
    assert fake.requests[0][1] == "/duetime/v1/tasks"


async def test_a_long_answer_arrives_whole(server: tuple[FakeServer, str]) -> None:
    fake, url = server
    items = [{**TASK, "payload": {"pad": "x" * 1000}} for _ in range(2000)]  # ~2.3 MB
    fake.replies.append(web.json_response({"items": items, "next_cursor": None}))
    async with AsyncClient(url, retries=0) as client:
        got = await client._request("GET", "/v1/tasks")
    assert got["items"] == items


class ClosingServer:
    """Answers the first request of each connection with a task, then closes the connection
    when the next request on it arrives, without answering (a keep-alive connection the server
    let go of just as the client reused it)."""

    def __init__(self) -> None:
        self.requests: list[tuple[int, bytes]] = []  # (connection number, request line)
        self.connections = 0

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        number = self.connections
        body = json.dumps(TASK).encode()
        answered = False
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
                await reader.readexactly(length)
                self.requests.append((number, head.split(b"\r\n")[0]))
                if answered:
                    return
                answered = True
                writer.write(
                    b"HTTP/1.1 201 Created\r\ncontent-type: application/json\r\n"
                    b"content-length: %d\r\n\r\n%s" % (len(body), body)
                )
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        finally:
            writer.close()


async def test_a_closed_keep_alive_connection_repeats_only_what_is_safe_to_repeat() -> None:
    closing = ClosingServer()
    listener = await asyncio.start_server(closing.serve, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    try:
        async with AsyncClient(f"http://127.0.0.1:{port}", retries=0) as client:
            await client.create_task(target=worker_target())
            # A plain create may have landed before the connection closed: not sent again.
            with pytest.raises(TransportError):
                await client.create_task(target=worker_target())
            assert [n for n, _ in closing.requests] == [1, 1]
            await client.create_task(target=worker_target())  # a new connection
            # A read is safe to repeat: sent again on a new connection, and answered.
            task = await client.get_task(TASK["id"])
            assert task.id == TASK["id"]
        assert [n for n, _ in closing.requests] == [1, 1, 2, 2, 3]
        assert closing.requests[-1][1].startswith(b"GET /v1/tasks/")
    finally:
        listener.close()
        await listener.wait_closed()
