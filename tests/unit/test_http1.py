"""The lean HTTP/1.1 client (:mod:`duetime.http1`) against real loopback servers.

Every test starts its own asyncio server on 127.0.0.1 (or ::1) whose handler reads requests and
writes hand-crafted response bytes, so framing, connection reuse and closes are under the test's
control; the server counts the connections it accepted and sees the client's closes. Nothing
below the pool is faked: it resolves through a GuardedResolver and dials real sockets. A subset
of the scenarios runs once more on uvloop, the loop duetime's processes use.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import socket
import ssl
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import pytest
from aiohttp.resolver import DefaultResolver
from yarl import URL

from duetime.delivery.netguard import ForbiddenAddressError, GuardedResolver, StaticResolver
from duetime.http1 import (
    ConnectError,
    ConnectTimeoutError,
    DisconnectedError,
    HttpClientError,
    HttpPool,
    Origin,
    ProtocolError,
    ResolveError,
    SystemResolver,
)

trustme: ModuleType | None
try:
    import trustme
except ImportError:  # the dev extra may not have it yet
    trustme = None

HOST = "receiver.test"
TABLE = {HOST: ["127.0.0.1"]}
TIMEOUT = 10.0  # the deadline of requests expected to succeed (generous: a loaded machine)


# -- a loopback server that answers with exact bytes -------------------------------------------


@dataclass
class Request:
    connection: int  # index of the server-side connection it arrived on
    head: bytes  # request line and headers, as received
    method: str
    target: str
    version: str
    headers: list[tuple[str, str]]  # as sent: original spelling and order
    body: bytes


class Peer:
    """The server's side of one accepted connection."""

    def __init__(
        self,
        server: Server,
        index: int,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        self.server = server
        self.index = index
        self.reader = reader
        self.writer = writer
        self.requests: list[Request] = []
        self.eof = asyncio.Event()  # the client closed (or reset) the connection

    async def read_request(self) -> Request | None:
        """The next request on this connection, or ``None`` once the client closed it."""
        try:
            head = await self.reader.readuntil(b"\r\n\r\n")
            request_line, *lines = head[:-4].decode("latin-1").split("\r\n")
            method, target, version = request_line.split(" ")
            headers = [(n, v.strip()) for n, _, v in (line.partition(":") for line in lines)]
            lengths = [v for n, v in headers if n.lower() == "content-length"]
            body = await self.reader.readexactly(int(lengths[0])) if lengths else b""
        except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
            self.eof.set()
            return None
        request = Request(self.index, head, method, target, version, headers, body)
        self.requests.append(request)
        self.server.requests.append(request)
        return request

    async def send(self, *parts: bytes, pause: float = 0.0) -> None:
        """Write each of ``parts`` separately, ``pause`` seconds apart."""
        for i, part in enumerate(parts):
            if i and pause:
                await asyncio.sleep(pause)
            self.writer.write(part)
            await self.writer.drain()

    async def wait_eof(self) -> None:
        """Read (and drop) whatever comes until the client closes the connection."""
        with contextlib.suppress(ConnectionError, ssl.SSLError):
            while await self.reader.read(65536):
                pass
        self.eof.set()

    def close(self) -> None:
        self.writer.close()


Handler = Callable[[Peer], Awaitable[None]]


class Server:
    """An asyncio server on a loopback address running ``handler`` for each connection."""

    def __init__(
        self, handler: Handler, *, host: str = "127.0.0.1", tls: ssl.SSLContext | None = None
    ) -> None:
        self.handler = handler
        self.host = host
        self.tls = tls
        self.port = 0
        self.peers: list[Peer] = []
        self.requests: list[Request] = []
        self.active = 0  # connections open right now (handler running)
        self.max_active = 0
        self.errors: list[BaseException] = []
        self._tasks: set[asyncio.Task[Any]] = set()
        self._server: asyncio.Server | None = None

    @property
    def accepted(self) -> int:
        return len(self.peers)

    def url(self, path: str = "/", *, host: str | None = None, scheme: str = "http") -> URL:
        name = host or self.host
        if ":" in name:
            name = f"[{name}]"
        return URL(f"{scheme}://{name}:{self.port}{path}")

    async def __aenter__(self) -> Server:
        self._server = await asyncio.start_server(self._serve, self.host, 0, ssl=self.tls)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._server is not None
        self._server.close()
        for peer in self.peers:
            peer.close()
        if self._tasks:
            _, pending = await asyncio.wait(self._tasks, timeout=1.0)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending)
        await self._server.wait_closed()
        if exc_info[0] is None:
            assert not self.errors, f"the test server's handler failed: {self.errors!r}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        peer = Peer(self, len(self.peers), reader, writer)
        self.peers.append(peer)
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        try:
            await self.handler(peer)
        except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError):
            peer.eof.set()
        except asyncio.CancelledError:
            pass  # torn down at the end of the test
        except Exception as exc:
            self.errors.append(exc)
        finally:
            self.active -= 1
            writer.close()


def response(
    body: bytes = b"ok",
    *,
    status: int = 200,
    reason: str = "OK",
    headers: Iterable[tuple[str, str]] = (),
) -> bytes:
    """A complete response framed by Content-Length."""
    lines = [f"HTTP/1.1 {status} {reason}", *(f"{n}: {v}" for n, v in headers)]
    lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def answering(answer: bytes | Callable[[Request], bytes], *, delay: float = 0.0) -> Handler:
    """A keep-alive handler: answer every request (after ``delay``) until the client closes."""

    async def handler(peer: Peer) -> None:
        while (request := await peer.read_request()) is not None:
            if delay:
                await asyncio.sleep(delay)
            await peer.send(answer(request) if callable(answer) else answer)

    return handler


def make_pool(
    table: Mapping[str, Sequence[str]] = TABLE, *, allow_private: bool = True, **options: Any
) -> HttpPool:
    resolver = GuardedResolver(StaticResolver(table), allow_private=allow_private)
    return HttpPool(resolver, **options)


async def get(pool: HttpPool, url: URL, *, timeout: float = TIMEOUT) -> Any:
    return await pool.request("GET", url, [], b"", timeout=timeout)


async def happens(event: asyncio.Event, timeout: float = 10.0) -> bool:
    """Whether ``event`` is set within ``timeout`` seconds (it returns as soon as it is: the
    generous default costs only the tests that fail)."""
    try:
        await asyncio.wait_for(event.wait(), timeout)
    except TimeoutError:
        return False
    return True


async def until(predicate: Callable[[], bool], within: float = 10.0) -> None:
    """Return once ``predicate()`` holds (checked every loop turn); fail after ``within`` s."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not predicate():
        assert loop.time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.001)


async def open_after_close(pool: HttpPool) -> int:
    """Close ``pool`` and give the loop a moment to deliver the closes: its open connections."""
    await pool.close()
    for _ in range(100):
        if pool.open_connections == 0:
            break
        await asyncio.sleep(0.005)
    return pool.open_connections


def ipv6_loopback() -> bool:
    if not socket.has_ipv6:
        return False
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as sock:
            sock.bind(("::1", 0))
    except OSError:
        return False
    return True


# -- 1. keep-alive and the request's shape -------------------------------------------------------


async def test_keep_alive_reuses_one_connection_and_requests_arrive_intact() -> None:
    def echo(request: Request) -> bytes:
        return response(
            f"{request.method}:{len(request.body)}".encode(),
            headers=[("X-Reply", "Yes"), ("X-Repeat", "first"), ("x-repeat", "last")],
        )

    async with Server(answering(echo)) as server:
        static = StaticResolver(TABLE)
        pool = HttpPool(GuardedResolver(static, allow_private=True))
        url = server.url("/hooks/a%20b?x=1&y=a%26b", host=HOST)
        caller_headers = [
            ("Content-Type", "application/json"),
            ("webhook-id", "msg_1"),
            ("X-Mixed-Case", "v a l"),
        ]
        sent = [("POST", b'{"task": 1}'), ("PUT", bytes(range(256)) * 20), ("GET", b"")]
        for method, body in sent:
            answer = await pool.request(method, url, caller_headers, body, timeout=TIMEOUT)
            assert answer.status == 200
            assert answer.body == f"{method}:{len(body)}".encode()
            # Lower-cased names; a repeated header keeps its last value.
            assert answer.headers == {
                "x-reply": "Yes",
                "x-repeat": "last",
                "content-length": str(len(answer.body)),
            }
        assert pool.open_connections == 1

        assert server.accepted == 1, "sequential requests must share one keep-alive connection"
        assert [r.connection for r in server.requests] == [0, 0, 0]
        assert static.lookups == [HOST]
        for request, (method, body) in zip(server.requests, sent, strict=True):
            assert request.head.startswith(
                f"{method} /hooks/a%20b?x=1&y=a%26b HTTP/1.1\r\n"
                f"Host: {HOST}:{server.port}\r\n".encode()
            )
            assert (request.method, request.target, request.version) == (
                method,
                "/hooks/a%20b?x=1&y=a%26b",
                "HTTP/1.1",
            )
            assert request.headers == [
                ("Host", f"{HOST}:{server.port}"),
                *caller_headers,
                ("Content-Length", str(len(body))),
            ]
            assert request.body == body
        assert await open_after_close(pool) == 0


async def test_ipv6_literal_host_is_bracketed_and_an_empty_path_is_slash() -> None:
    if not ipv6_loopback():
        pytest.skip("this machine has no IPv6 loopback (::1)")
    async with Server(answering(response(b"six")), host="::1") as server:
        resolver = DefaultResolver()
        pool = HttpPool(GuardedResolver(resolver, allow_private=True))
        try:
            url = URL(f"http://[::1]:{server.port}")
            for _ in range(2):
                answer = await get(pool, url)
                assert (answer.status, answer.body) == (200, b"six")
        finally:
            assert await open_after_close(pool) == 0
            await resolver.close()
        assert server.accepted == 1
        for request in server.requests:
            assert request.head.startswith(
                f"GET / HTTP/1.1\r\nHost: [::1]:{server.port}\r\n".encode()
            )
            assert ("Content-Length", "0") in request.headers


# -- 2. response framing ---------------------------------------------------------------------------


async def test_chunked_body_is_joined_and_the_connection_kept() -> None:
    parts = [
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-A: 1\r\n\r\n",
        b"5\r\nhello\r\n",
        b"7;ext=1\r\n, world\r\n",
        b"0\r\nX-Trailer: t\r\n\r\n",
    ]

    async def handler(peer: Peer) -> None:
        while await peer.read_request() is not None:
            await peer.send(*parts, pause=0.01)

    async with Server(handler) as server:
        pool = make_pool()
        for _ in range(2):
            answer = await get(pool, server.url())
            assert answer.status == 200
            assert answer.body == b"hello, world"
            assert answer.headers["x-a"] == "1"
        assert server.accepted == 1
        assert await open_after_close(pool) == 0


@pytest.mark.parametrize(
    "head",
    [
        b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n",
        b"HTTP/1.0 200 OK\r\n\r\n",
    ],
    ids=["http11-connection-close", "http10"],
)
async def test_close_delimited_body_is_read_to_the_end_and_not_reused(head: bytes) -> None:
    async def handler(peer: Peer) -> None:
        assert await peer.read_request() is not None
        await peer.send(head, b"part one, ", b"part two", pause=0.02)
        peer.close()

    async with Server(handler) as server:
        static = StaticResolver(TABLE)
        pool = HttpPool(GuardedResolver(static, allow_private=True))
        for _ in range(2):
            answer = await get(pool, server.url(host=HOST))
            assert (answer.status, answer.body) == (200, b"part one, part two")
        assert server.accepted == 2, "a close-delimited response must not leave a reusable conn"
        assert static.lookups == [HOST], "the second connection uses the cached address"
        assert await open_after_close(pool) == 0


@pytest.mark.parametrize(("status", "reason"), [(204, "No Content"), (304, "Not Modified")])
async def test_bodiless_status_completes_without_a_body(status: int, reason: str) -> None:
    answer_bytes = f"HTTP/1.1 {status} {reason}\r\nX-Id: 7\r\n\r\n".encode()
    async with Server(answering(answer_bytes)) as server:
        pool = make_pool()
        for _ in range(2):
            answer = await get(pool, server.url(), timeout=1.0)
            assert (answer.status, answer.body, answer.headers) == (status, b"", {"x-id": "7"})
        assert server.accepted == 1
        assert await open_after_close(pool) == 0


@pytest.mark.parametrize("split", [True, False], ids=["separate-writes", "one-write"])
@pytest.mark.parametrize(
    "interim",
    [
        b"HTTP/1.1 100 Continue\r\nX-Interim: 1\r\n\r\n",
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\n",
    ],
    ids=["100", "100+103"],
)
async def test_interim_responses_are_skipped(interim: bytes, split: bool) -> None:
    final = response(b"final", status=201, reason="Created", headers=[("X-Final", "1")])

    async def handler(peer: Peer) -> None:
        while await peer.read_request() is not None:
            if split:
                await peer.send(interim, final, pause=0.02)
            else:
                await peer.send(interim + final)

    async with Server(handler) as server:
        pool = make_pool()
        for _ in range(2):
            answer = await get(pool, server.url())
            assert (answer.status, answer.body) == (201, b"final")
            assert answer.headers == {"x-final": "1", "content-length": "5"}
        assert server.accepted == 1
        assert await open_after_close(pool) == 0


@pytest.mark.parametrize(
    "partial",
    [
        b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\nConnection: close\r\n\r\nonly this",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n20\r\nshort",
        b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly this",
        b"HTTP/1.1 200 OK\r\nContent-Le",
    ],
    ids=["length-close", "chunked-close", "length-keep-alive", "in-headers"],
)
async def test_a_response_cut_short_by_the_server_is_a_disconnect(partial: bytes) -> None:
    async def handler(peer: Peer) -> None:
        assert await peer.read_request() is not None
        await peer.send(partial)
        peer.close()

    async with Server(handler) as server:
        pool = make_pool()
        with pytest.raises(DisconnectedError, match="server closed the connection"):
            await get(pool, server.url())
        assert server.accepted == 1, "a connection that already answered is not retried"
        assert await open_after_close(pool) == 0


async def test_bytes_after_a_response_do_not_leak_into_it_or_the_next_one() -> None:
    # The server answers, and in the same write starts a second response nobody asked for.
    stale = b"HTTP/1.1 500 Stale\r\nX-Stale: 1\r\n"

    async def handler(peer: Peer) -> None:
        while await peer.read_request() is not None:
            if peer.index == 0:
                await peer.send(response(b"first", headers=[("X-Order", "1")]) + stale)
            else:
                await peer.send(response(b"fresh"))

    async with Server(handler) as server:
        pool = make_pool()
        first = await get(pool, server.url())
        assert (first.status, first.body) == (200, b"first")
        assert first.headers == {"x-order": "1", "content-length": "5"}
        assert await happens(server.peers[0].eof), "a desynchronised connection must be closed"
        second = await get(pool, server.url())
        assert (second.status, second.body) == (200, b"fresh")
        assert server.accepted == 2
        assert await open_after_close(pool) == 0


async def test_unsolicited_bytes_on_an_idle_connection_close_it() -> None:
    wrote = asyncio.Event()

    async def handler(peer: Peer) -> None:
        assert await peer.read_request() is not None
        await peer.send(response())
        if peer.index == 0:
            await asyncio.sleep(0.02)
            await peer.send(response(b"unasked"))
            wrote.set()
        await peer.wait_eof()

    async with Server(handler) as server:
        pool = make_pool()
        assert (await get(pool, server.url())).body == b"ok"
        assert await happens(wrote)
        assert await happens(server.peers[0].eof), "the client must drop the connection"
        answer = await get(pool, server.url())
        assert (answer.status, answer.body) == (200, b"ok")
        assert server.accepted == 2
        assert await open_after_close(pool) == 0


# -- 3. body_limit and drain_limit -----------------------------------------------------------------

PAYLOAD = bytes(range(256)) * 2  # 512 bytes


@pytest.mark.parametrize("chunked", [False, True], ids=["length", "chunked"])
async def test_body_limit_keeps_a_prefix_and_drains_the_rest(chunked: bool) -> None:
    if chunked:
        halves = [PAYLOAD[:300], PAYLOAD[300:]]
        answer_bytes = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b"".join(
            f"{len(h):x}\r\n".encode() + h + b"\r\n" for h in halves
        )
        answer_bytes += b"0\r\n\r\n"
    else:
        answer_bytes = response(PAYLOAD)
    async with Server(answering(answer_bytes)) as server:
        pool = make_pool(body_limit=10, drain_limit=1000)
        for _ in range(3):
            answer = await get(pool, server.url())
            assert answer.status == 200
            assert answer.body == PAYLOAD[:10]
        assert server.accepted == 1, "a body within drain_limit is drained, the conn kept"
        assert await open_after_close(pool) == 0


@pytest.mark.parametrize("chunked", [False, True], ids=["length", "chunked"])
async def test_without_a_body_limit_the_whole_body_arrives_and_the_connection_is_kept(
    chunked: bool,
) -> None:
    body = bytes(range(256)) * 4096  # 1 MiB, far past the drain limit
    if chunked:
        parts = b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in (body[:700_000], body[700_000:]))
        answer = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + parts + b"0\r\n\r\n"
    else:
        answer = response(body)
    async with Server(answering(answer)) as server:
        pool = make_pool(body_limit=None, drain_limit=1024)
        for _ in range(2):
            assert (await get(pool, server.url())).body == body
        assert server.accepted == 1
        assert await open_after_close(pool) == 0


async def test_the_reason_phrase_and_a_request_target_without_a_url() -> None:
    async with Server(answering(response(b"gone", status=404, reason="Not Found"))) as server:
        pool = HttpPool(SystemResolver())  # a numeric host: answered without the resolver
        origin = Origin.of(server.url())
        got = await pool.request_at(origin, "GET", "/a/b?c=1", [("X-A", "1")], b"", timeout=TIMEOUT)
        assert (got.status, got.reason, got.body) == (404, "Not Found", b"gone")
        (request,) = server.requests
        assert request.target == "/a/b?c=1"
        assert ("Host", f"127.0.0.1:{server.port}") in request.headers
        assert ("X-A", "1") in request.headers
        assert await open_after_close(pool) == 0


async def test_the_system_resolver_answers_localhost() -> None:
    found = await SystemResolver().resolve("localhost", 80, socket.AF_UNSPEC)
    assert found and all(r["port"] == 80 for r in found)
    assert {r["host"] for r in found} <= {"127.0.0.1", "::1"}


async def test_drain_limit_is_never_below_body_limit() -> None:
    pool = make_pool(body_limit=50, drain_limit=10)
    assert (pool.body_limit, pool.drain_limit) == (50, 50)
    async with Server(answering(response(PAYLOAD[:50]))) as server:
        assert (await get(pool, server.url())).body == PAYLOAD[:50]
        assert (await get(pool, server.url())).body == PAYLOAD[:50]
        assert server.accepted == 1
    assert await open_after_close(pool) == 0


async def test_a_body_beyond_drain_limit_ends_the_request_and_its_connection() -> None:
    async def handler(peer: Peer) -> None:
        if peer.index > 0:
            await answering(response(b"small"))(peer)
            return
        assert await peer.read_request() is not None
        # Announce a megabyte, send 4 KiB and never the rest.
        await peer.send(b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n" + PAYLOAD * 8)
        await peer.wait_eof()

    async with Server(handler) as server:
        pool = make_pool(body_limit=10, drain_limit=100)
        loop = asyncio.get_running_loop()
        started = loop.time()
        answer = await get(pool, server.url(), timeout=30.0)
        # The rest of the body never comes: waiting for it would hit the 30 s deadline.
        assert loop.time() - started < 10.0, "the request must not wait for the rest of the body"
        assert (answer.status, answer.body) == (200, PAYLOAD[:10])
        assert await happens(server.peers[0].eof), "the connection must be closed, not drained"
        again = await get(pool, server.url())
        assert (again.status, again.body) == (200, b"small")
        assert server.accepted == 2
        assert await open_after_close(pool) == 0


# -- 4. connections the server closes --------------------------------------------------------------


async def test_an_idle_connection_the_server_closed_is_replaced() -> None:
    async def handler(peer: Peer) -> None:  # one request per connection, then close
        assert await peer.read_request() is not None
        await peer.send(response(f"conn {peer.index}".encode()))
        peer.close()
        peer.eof.set()

    async with Server(handler) as server:
        pool = make_pool()
        assert (await get(pool, server.url())).body == b"conn 0"
        assert await happens(server.peers[0].eof)
        await asyncio.sleep(0.05)  # the client sees the server's FIN
        assert (await get(pool, server.url())).body == b"conn 1"
        assert server.accepted == 2
        assert len(server.requests) == 2
        assert await open_after_close(pool) == 0


async def closes_on_its_second_request(peer: Peer) -> None:
    """Echo the first request of a connection; close it when the second arrives, unanswered."""
    while (request := await peer.read_request()) is not None:
        if len(peer.requests) > 1:
            peer.close()
            return
        await peer.send(response(request.body))


async def test_a_reused_connection_closed_under_a_request_is_retried_once() -> None:
    # The server closes its keep-alive connection just as the second request arrives (the race a
    # client cannot see coming): the request is sent again on a fresh connection.
    async with Server(closes_on_its_second_request) as server:
        pool = make_pool()
        url = server.url()
        first = await pool.request("POST", url, [], b"one", timeout=TIMEOUT)
        second = await pool.request("POST", url, [("X-N", "2")], b"two", timeout=TIMEOUT)
        assert (first.body, second.body) == (b"one", b"two")
        assert server.accepted == 2
        assert [(r.connection, r.body) for r in server.requests] == [
            (0, b"one"),
            (0, b"two"),
            (1, b"two"),
        ]
        assert server.requests[1].head == server.requests[2].head, "the same request is resent"
        assert pool.open_connections == 1
        assert await open_after_close(pool) == 0


async def test_the_retry_happens_only_once() -> None:
    # Only the very first request is answered; every later one is read and the connection closed.
    async def handler(peer: Peer) -> None:
        while await peer.read_request() is not None:
            if len(peer.server.requests) > 1:
                peer.close()
                return
            await peer.send(response())

    async with Server(handler) as server:
        pool = make_pool()
        assert (await get(pool, server.url())).status == 200
        with pytest.raises(DisconnectedError):
            await get(pool, server.url())
        assert server.accepted == 2
        assert [r.connection for r in server.requests] == [0, 0, 1]
        assert await open_after_close(pool) == 0


async def test_a_fresh_connection_closed_after_the_request_is_not_retried() -> None:
    async def handler(peer: Peer) -> None:
        assert await peer.read_request() is not None
        peer.close()

    async with Server(handler) as server:
        pool = make_pool()
        with pytest.raises(DisconnectedError):
            await get(pool, server.url())
        assert server.accepted == 1
        assert len(server.requests) == 1
        assert await open_after_close(pool) == 0


async def test_a_reused_connection_that_answered_part_of_a_response_is_not_retried() -> None:
    async def handler(peer: Peer) -> None:
        assert await peer.read_request() is not None
        await peer.send(response())
        assert await peer.read_request() is not None
        await peer.send(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")
        peer.close()

    async with Server(handler) as server:
        pool = make_pool()
        assert (await get(pool, server.url())).status == 200
        with pytest.raises(DisconnectedError):
            await get(pool, server.url())
        assert server.accepted == 1, "a response had begun: resending could repeat the effect"
        assert await open_after_close(pool) == 0


async def test_a_request_that_must_not_run_twice_is_not_resent_on_a_stale_connection() -> None:
    # As above, but the caller says the request must not be repeated (the SDK's non-idempotent
    # calls): the closed connection is an error and the server saw the request once.
    async with Server(closes_on_its_second_request) as server:
        pool = make_pool()
        origin = Origin.of(server.url())
        first = await pool.request_at(origin, "POST", "/t", [], b"one", timeout=TIMEOUT)
        assert first.body == b"one"
        with pytest.raises(DisconnectedError):
            await pool.request_at(
                origin, "POST", "/t", [], b"two", timeout=TIMEOUT, retry_stale=False
            )
        assert [(r.connection, r.body) for r in server.requests] == [(0, b"one"), (0, b"two")]
        assert await open_after_close(pool) == 0


# -- 5. invalid responses --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "garbage",
    [
        b"garbage\r\n\r\n",
        b"HTTP/1.1 2x0 OK\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: nope\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        b"HTTP/1.1 200 OK\r\nX-Nul: a\x00b\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * 70_000 + b"\r\n\r\n",
        b"HTTP/1.1 101 Switching Protocols\r\n\r\n",
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
    ],
    ids=[
        "not-http",
        "bad-status",
        "bad-length",
        "two-lengths",
        "length-and-chunked",
        "bad-chunk-size",
        "nul-in-header",
        "headers-too-large",
        "101",
        "101-upgrade",
    ],
)
async def test_invalid_response_is_a_protocol_error(garbage: bytes) -> None:
    loop = asyncio.get_running_loop()
    loop_errors: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, context: loop_errors.append(context))

    async def handler(peer: Peer) -> None:
        assert await peer.read_request() is not None
        await peer.send(garbage)
        await peer.wait_eof()

    async with Server(handler) as server:
        pool = make_pool()
        with pytest.raises(ProtocolError, match="invalid HTTP response"):
            await get(pool, server.url())
        assert await happens(server.peers[0].eof), "the client must close a broken connection"
        assert await open_after_close(pool) == 0
    assert not loop_errors, "the parser's error must not escape into the event loop"


# -- 6. timeouts -----------------------------------------------------------------------------------


async def test_a_server_that_never_answers_times_out_and_is_hung_up_on() -> None:
    async def handler(peer: Peer) -> None:
        assert await peer.read_request() is not None
        await peer.wait_eof()

    async with Server(handler) as server:
        pool = make_pool()
        loop = asyncio.get_running_loop()
        started = loop.time()
        with pytest.raises(TimeoutError):
            await get(pool, server.url(), timeout=0.2)
        elapsed = loop.time() - started
        # Not before the deadline; the upper bound only needs to say "not never" and is generous
        # for a loaded machine.
        assert 0.18 <= elapsed < 5, elapsed
        assert await happens(server.peers[0].eof), "a timed-out connection must be closed"
        assert pool.open_connections == 0
        assert await open_after_close(pool) == 0


async def test_waiting_for_a_pool_slot_counts_against_the_timeout() -> None:
    release = asyncio.Event()

    async def held(peer: Peer) -> None:
        while await peer.read_request() is not None:
            await release.wait()  # the first answer waits for the test; later ones do not
            await peer.send(response(b"slow"))

    async with Server(held) as server:
        pool = make_pool(max_connections=1)
        loop = asyncio.get_running_loop()
        slow = asyncio.create_task(get(pool, server.url()))
        await until(lambda: len(server.requests) == 1)  # it holds the only connection
        started = loop.time()
        # The slot is held until the test lets go: only the timeout can end this wait. It ends
        # before anything was sent, which the error's class says (the SDK may then retry).
        with pytest.raises(ConnectTimeoutError):
            await get(pool, server.url(), timeout=0.1)
        assert 0.08 <= loop.time() - started < 5  # generous for a loaded machine
        release.set()
        assert (await slow).body == b"slow"
        # The slot the timed-out request waited for was not lost: the pool still works.
        assert (await get(pool, server.url())).body == b"slow"
        assert server.accepted == 1
        assert len(server.requests) == 2, "the timed-out request was never sent"
        assert await open_after_close(pool) == 0


async def test_cancelling_a_request_at_any_step_keeps_the_connection_count_right() -> None:
    # Cancel after 0, 1, 2... loop iterations: across resolving, dialling, connection setup and
    # the exchange, a cancelled request must give its slot back exactly once.
    async with Server(answering(response())) as server:
        for steps in range(30):
            pool = make_pool(max_connections=1)
            task = asyncio.create_task(get(pool, server.url()))
            for _ in range(steps):
                await asyncio.sleep(0)
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            for _ in range(5):
                await asyncio.sleep(0)
            assert pool.open_connections in (0, 1), (steps, pool.open_connections)
            answer = await get(pool, server.url(), timeout=1.0)
            assert answer.status == 200, steps
            assert pool.open_connections == 1, (steps, pool.open_connections)
            assert await open_after_close(pool) == 0, steps


# -- 7. max_connections ----------------------------------------------------------------------------


async def test_max_connections_bounds_concurrent_connections() -> None:
    limit = 2
    async with Server(answering(lambda r: response(r.body), delay=0.05)) as server:
        pool = make_pool(max_connections=limit)
        bodies = [f"request {i}".encode() for i in range(3 * limit)]
        answers = await asyncio.gather(
            *(pool.request("POST", server.url(), [], b, timeout=TIMEOUT) for b in bodies)
        )
        assert [(a.status, a.body) for a in answers] == [(200, b) for b in bodies]
        assert server.max_active == limit, "never more than max_connections at once"
        assert server.accepted == limit, "a released connection is handed to a waiting request"
        assert pool.open_connections == limit
        assert await open_after_close(pool) == 0


async def test_max_per_origin_bounds_one_receiver_and_leaves_others_unhindered() -> None:
    async with (
        Server(answering(lambda r: response(r.body), delay=0.05)) as busy,
        Server(answering(response(b"other"))) as other,
    ):
        pool = make_pool(max_connections=10, max_per_origin=2)
        bodies = [f"request {i}".encode() for i in range(8)]
        burst = asyncio.gather(
            *(pool.request("POST", busy.url(), [], b, timeout=TIMEOUT) for b in bodies)
        )
        await until(lambda: busy.accepted == 2)  # the burst holds both of busy's connections
        assert (await get(pool, other.url())).body == b"other", "another origin is not held up"
        answers = await burst
        assert [(a.status, a.body) for a in answers] == [(200, b) for b in bodies]
        assert busy.max_active == 2, "never more than max_per_origin to one origin"
        assert busy.accepted == 2, "a released connection goes to a request waiting for it"
        assert pool.open_connections == 3
        assert await open_after_close(pool) == 0


async def test_a_request_waiting_for_its_origin_gives_up_at_its_deadline() -> None:
    async with Server(answering(response(), delay=0.5)) as server:
        pool = make_pool(max_per_origin=1)
        first = asyncio.create_task(get(pool, server.url(), timeout=TIMEOUT))
        await until(lambda: len(server.requests) == 1)  # the first holds the origin's one slot
        with pytest.raises(TimeoutError):
            await get(pool, server.url(), timeout=0.1)
        assert (await first).status == 200
        assert (await get(pool, server.url(), timeout=TIMEOUT)).status == 200
        assert server.accepted == 1
        assert await open_after_close(pool) == 0


# -- 8. eviction -----------------------------------------------------------------------------------


async def test_a_full_pool_evicts_an_idle_connection_to_another_host() -> None:
    def keep_alive_until_closed(name: bytes) -> Handler:
        return answering(response(name))

    async with (
        Server(keep_alive_until_closed(b"A")) as a,
        Server(keep_alive_until_closed(b"B")) as b,
    ):
        pool = make_pool(max_connections=1)
        assert (await get(pool, a.url())).body == b"A"
        assert pool.open_connections == 1
        assert (await get(pool, b.url())).body == b"B"
        assert await happens(a.peers[0].eof), "A's idle connection must be closed for B's"
        assert pool.open_connections == 1
        assert (await get(pool, a.url())).body == b"A"
        assert await happens(b.peers[0].eof)
        assert (a.accepted, b.accepted) == (2, 1)
        assert pool.open_connections == 1
        assert await open_after_close(pool) == 0


# -- 9. idle sweep ---------------------------------------------------------------------------------


async def test_idle_connections_are_closed_after_idle_seconds() -> None:
    async def handler(peer: Peer) -> None:
        await answering(response())(peer)
        peer.eof.set()

    async with Server(handler) as server:
        # idle_seconds well above the 0.05 s pause, so that a loaded machine's stalls do not
        # get the connection swept before it is reused.
        pool = make_pool(idle_seconds=0.5)
        loop = asyncio.get_running_loop()
        assert (await get(pool, server.url())).status == 200
        await asyncio.sleep(0.05)
        assert (await get(pool, server.url())).status == 200  # still fresh: reused
        assert server.accepted == 1
        idle_from = loop.time()
        assert await happens(server.peers[0].eof), "the sweep must close it"
        assert loop.time() - idle_from >= 0.4, "closed before idle_seconds had passed"
        for _ in range(10):
            await asyncio.sleep(0)
        assert pool.open_connections == 0
        assert (await get(pool, server.url())).status == 200
        assert server.accepted == 2
        assert await open_after_close(pool) == 0


# -- 10. connect and resolve errors ----------------------------------------------------------------


async def test_connection_refused_is_a_connect_error() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))  # bound, never listening: connections are refused
        port = sock.getsockname()[1]
        pool = make_pool()
        with pytest.raises(ConnectError) as info:
            await get(pool, URL(f"http://{HOST}:{port}/"), timeout=1.0)
    exc = info.value
    assert not isinstance(exc, ResolveError)
    assert (exc.host, exc.port) == (HOST, port)
    assert isinstance(exc.os_error, ConnectionRefusedError)
    assert str(exc).startswith(f"{HOST}:{port}: ")
    assert pool.open_connections == 0
    assert await open_after_close(pool) == 0


async def test_an_unknown_name_is_a_resolve_error() -> None:
    static = StaticResolver(TABLE)
    pool = HttpPool(GuardedResolver(static, allow_private=True))
    with pytest.raises(ResolveError) as info:
        await get(pool, URL("http://nowhere.test:8123/x"), timeout=1.0)
    assert (info.value.host, info.value.port) == ("nowhere.test", 8123)
    assert isinstance(info.value.os_error, socket.gaierror)
    assert static.lookups == ["nowhere.test"]
    assert pool.open_connections == 0
    await pool.close()


@pytest.mark.parametrize("by_name", [True, False], ids=["name", "literal"])
async def test_a_forbidden_address_is_refused_before_dialling(by_name: bool) -> None:
    async with Server(answering(response())) as server:
        pool = make_pool(allow_private=False)
        url = server.url(host=HOST if by_name else "127.0.0.1")
        with pytest.raises(ResolveError) as info:
            await get(pool, url, timeout=1.0)
        assert isinstance(info.value.os_error, ForbiddenAddressError)
        assert info.value.os_error.address == "127.0.0.1"
        assert "loopback" in str(info.value)
        await asyncio.sleep(0.05)
        assert server.accepted == 0, "nothing may be dialled"
        assert await open_after_close(pool) == 0


async def test_a_url_that_is_not_http_is_refused() -> None:
    pool = make_pool()
    with pytest.raises(ConnectError) as info:
        await get(pool, URL("ftp://receiver.test/file"))
    assert isinstance(info.value.os_error, ValueError)
    await pool.close()


# -- 11. HTTPS -------------------------------------------------------------------------------------


async def test_https_with_a_private_ca() -> None:
    if trustme is None:
        pytest.skip("trustme is not installed (it comes with the dev extra)")
    ca = trustme.CA()
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert(HOST, "127.0.0.1").configure_cert(server_context)
    client_context = ssl.create_default_context()
    ca.configure_trust(client_context)
    table = {HOST: ["127.0.0.1"], "other.test": ["127.0.0.1"]}

    async with Server(answering(lambda r: response(r.body)), tls=server_context) as server:
        pool = make_pool(table, ssl_context=client_context)
        for host in (HOST, "127.0.0.1"):
            for body in (b"one", b"two"):
                url = server.url("/tls", host=host, scheme="https")
                answer = await pool.request("POST", url, [], body, timeout=TIMEOUT)
                assert (answer.status, answer.body) == (200, body)
        assert server.accepted == 2, "one keep-alive TLS connection per host"
        assert server.requests[0].head.startswith(
            f"POST /tls HTTP/1.1\r\nHost: {HOST}:{server.port}\r\n".encode()
        )

        # A certificate for another name, and the system's trust store, both fail to verify.
        with pytest.raises(ConnectError) as wrong_name:
            await get(pool, server.url(host="other.test", scheme="https"))
        assert isinstance(wrong_name.value.os_error, ssl.SSLCertVerificationError)
        assert not isinstance(wrong_name.value, ResolveError)
        untrusting = make_pool(table)
        with pytest.raises(ConnectError) as unknown_ca:
            await get(untrusting, server.url(host=HOST, scheme="https"))
        assert isinstance(unknown_ca.value.os_error, ssl.SSLCertVerificationError)
        assert await open_after_close(untrusting) == 0
        assert await open_after_close(pool) == 0
        assert len(server.requests) == 4, "nothing is sent over an unverified connection"


# -- 12. close() -----------------------------------------------------------------------------------


async def test_close_closes_idle_connections_and_refuses_new_requests() -> None:
    async def handler(peer: Peer) -> None:
        await answering(response(f"conn {peer.index}".encode()))(peer)
        peer.eof.set()

    async with Server(handler) as server:
        pool = make_pool()
        assert (await get(pool, server.url())).body == b"conn 0"
        assert pool.open_connections == 1
        await pool.close()
        assert await happens(server.peers[0].eof), "close() must close idle connections"
        assert pool.open_connections == 0
        with pytest.raises(HttpClientError, match="closed") as info:
            await get(pool, server.url())
        assert type(info.value) is HttpClientError
        assert server.accepted == 1, "a closed pool dials nothing"
        await pool.close()  # idempotent
        assert pool.open_connections == 0


async def test_an_in_flight_request_finishes_after_close_and_its_connection_is_closed() -> None:
    release = asyncio.Event()

    async def handler(peer: Peer) -> None:
        while await peer.read_request() is not None:
            await release.wait()  # answered only once the pool is closed
            await peer.send(response(b"late"))
        peer.eof.set()

    async with Server(handler) as server:
        pool = make_pool()
        in_flight = asyncio.create_task(get(pool, server.url()))
        await until(lambda: len(server.requests) == 1)  # in flight: sent, not answered
        await pool.close()
        release.set()
        assert (await in_flight).body == b"late"
        assert await happens(server.peers[0].eof), "not kept alive after close()"
        for _ in range(10):
            await asyncio.sleep(0)
        assert pool.open_connections == 0


# -- the same scenarios on uvloop ------------------------------------------------------------------

UVLOOP_SCENARIOS: list[Callable[[], Awaitable[None]]] = [
    test_keep_alive_reuses_one_connection_and_requests_arrive_intact,
    test_chunked_body_is_joined_and_the_connection_kept,
    functools.partial(
        test_close_delimited_body_is_read_to_the_end_and_not_reused,
        b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n",
    ),
    functools.partial(test_interim_responses_are_skipped, b"HTTP/1.1 100 Continue\r\n\r\n", True),
    functools.partial(
        test_a_response_cut_short_by_the_server_is_a_disconnect,
        b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\nConnection: close\r\n\r\nonly this",
    ),
    test_bytes_after_a_response_do_not_leak_into_it_or_the_next_one,
    test_a_body_beyond_drain_limit_ends_the_request_and_its_connection,
    test_a_reused_connection_closed_under_a_request_is_retried_once,
    test_the_retry_happens_only_once,
    functools.partial(
        test_invalid_response_is_a_protocol_error,
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
    ),
    test_a_server_that_never_answers_times_out_and_is_hung_up_on,
    test_waiting_for_a_pool_slot_counts_against_the_timeout,
    test_cancelling_a_request_at_any_step_keeps_the_connection_count_right,
    test_max_connections_bounds_concurrent_connections,
    test_max_per_origin_bounds_one_receiver_and_leaves_others_unhindered,
    test_a_full_pool_evicts_an_idle_connection_to_another_host,
    test_connection_refused_is_a_connect_error,
    test_https_with_a_private_ca,
    test_close_closes_idle_connections_and_refuses_new_requests,
]


def _scenario_id(scenario: object) -> str:
    func = scenario.func if isinstance(scenario, functools.partial) else scenario
    return str(getattr(func, "__name__", scenario)).removeprefix("test_")


@pytest.mark.parametrize("scenario", UVLOOP_SCENARIOS, ids=_scenario_id)
def test_on_uvloop(scenario: Callable[[], Awaitable[None]]) -> None:
    uvloop = pytest.importorskip("uvloop", reason="uvloop is not installed on this platform")

    async def run() -> None:
        await scenario()

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(run())
