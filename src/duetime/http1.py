"""A lean HTTP/1.1 client: one request shape, a keep-alive pool. Webhook deliveries and the
SDK's network transport both speak through it.

Webhook delivery is duetime's hottest path, and a general client spends most of a delivery's CPU
on features a delivery never uses (cookies, redirects, proxies, streaming bodies, middlewares):
aiohttp's ``ClientSession.request`` measured ~3x the CPU of this module per request (see
``docs/adr/0004-lean-webhook-client-and-dispatcher-processes.md`` and
``benchmarks/webhook_micro.py``); the SDK's one-caller creates and worker lease calls pay the
same per call (``docs/adr/0009-the-sdk-speaks-through-http1.md``). What is left is deliberately
small, and the delicate parts are well-kept libraries: ``httptools`` (llhttp, the parser uvicorn
uses) reads responses, ``aiohappyeyeballs`` (aiohttp's) dials, the stdlib ``ssl`` does TLS. DNS
is the caller's: the deliverer passes an aiohttp resolver wrapped by
:class:`~duetime.delivery.netguard.GuardedResolver` — so every address dialled was checked
first — and the SDK the system's (:class:`SystemResolver`).

What a request gets: ``METHOD path HTTP/1.1``, ``Host``, the caller's headers, a
``Content-Length`` body; keep-alive connections per ``(scheme, host, port)`` reused LIFO and
closed after ``idle_seconds``; at most ``max_connections`` open in all and ``max_per_origin`` to one
``(scheme, host, port)`` (a burst to one receiver queues here instead of flooding its accept
backlog; other receivers are not held up by it); one overall deadline
(resolution, connect, pool wait, request and response); a connection that a server closed while
idle is retried once on a fresh one, unless the caller says the request must not be sent twice.
Responses: the status, the headers (lower-cased names), and the first ``body_limit`` bytes of the
body; a body beyond ``drain_limit`` is not read to its end (the connection is closed instead) —
or, with ``body_limit=None``, the whole body, however long. Redirects are never followed.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import aiohappyeyeballs
import httptools
from yarl import URL

__all__ = [
    "ConnectError",
    "ConnectTimeoutError",
    "DisconnectedError",
    "HttpClientError",
    "HttpPool",
    "Origin",
    "ProtocolError",
    "ResolveError",
    "Resolver",
    "Response",
    "SystemResolver",
]

_MAX_HEADER_BYTES = 64 * 1024
_DNS_TTL_SECONDS = 10.0
_Key = tuple[bool, str, int]  # (tls, host, port)


class HttpClientError(Exception):
    """A request that got no usable response."""


class ConnectError(HttpClientError):
    """No connection to ``host:port``; ``os_error`` says why (a ForbiddenAddressError for a
    refused address)."""

    def __init__(self, host: str, port: int, os_error: BaseException) -> None:
        self.host = host
        self.port = port
        self.os_error = os_error
        reason = getattr(os_error, "strerror", None) or str(os_error) or type(os_error).__name__
        super().__init__(f"{host}:{port}: {reason}")
        self.reason = reason


class ResolveError(ConnectError):
    """``host`` did not resolve."""


class DisconnectedError(HttpClientError):
    """The server closed the connection before the response was complete."""


class ProtocolError(HttpClientError):
    """The server's answer was not valid HTTP/1.1."""


class ConnectTimeoutError(TimeoutError):
    """The deadline passed before the request was sent (resolving, dialling or waiting for a
    free connection): the server saw nothing of it."""


class Resolver(Protocol):
    """DNS for the pool: ``resolve`` returns mappings with ``family``, ``host`` and ``port``
    (aiohttp's resolvers fit, and so does :class:`SystemResolver`)."""

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> Any: ...

    async def close(self) -> None: ...


class SystemResolver:
    """The system's resolver: ``getaddrinfo`` in the loop's executor (the pool keeps each
    answer for 10 s)."""

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[Mapping[str, Any]]:
        infos = await asyncio.get_running_loop().getaddrinfo(
            host, port, family=family, type=socket.SOCK_STREAM, flags=socket.AI_ADDRCONFIG
        )
        return [{"family": f, "host": addr[0], "port": addr[1]} for f, _, _, _, addr in infos]

    async def close(self) -> None:
        return None


@dataclass(slots=True)
class Response:
    status: int
    headers: dict[str, str]
    """Lower-cased names; a repeated header keeps its last value."""
    body: bytes
    """The first ``body_limit`` bytes."""
    reason: str = ""
    """The status line's reason phrase."""


@dataclass(frozen=True, slots=True)
class Origin:
    """Where requests go: ``(scheme, host, port)`` and the ``Host`` header line they carry."""

    tls: bool
    host: str
    """The host to dial (an IPv6 address without brackets)."""
    port: int
    host_line: str

    @classmethod
    def of(cls, url: URL) -> Origin:
        """The origin of an ``http``/``https`` URL with a host; ``ValueError`` for any other."""
        if not url.raw_host or url.scheme not in ("http", "https"):
            raise ValueError(f"not an http(s) URL: {str(url)!r}")
        tls = url.scheme == "https"
        return cls(
            tls,
            url.raw_host or "",
            url.port or (443 if tls else 80),
            f"Host: {url.host_port_subcomponent}",
        )

    @property
    def key(self) -> _Key:
        return (self.tls, self.host, self.port)


class _Connection(asyncio.Protocol):
    """One keep-alive connection; at most one request on it at a time."""

    def __init__(self, pool: HttpPool, key: _Key) -> None:
        self.pool = pool
        self.key = key
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.closed = False
        self.idle_since = 0.0
        self.waiter: asyncio.Future[Response] | None = None
        self.received = False  # any byte of the current response
        self._reset()

    def _reset(self) -> None:
        self.headers: dict[str, str] = {}
        self.header_bytes = 0
        self.body: list[bytes] = []
        self.body_size = 0
        self.status = 0
        self.reason = b""
        self.keep_alive = False
        self.headers_done = False

    # -- asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is not a subclass

    def data_received(self, data: bytes) -> None:
        self.received = True
        if self.waiter is None or self.waiter.done():
            # Bytes nobody asked for: the connection can't be trusted any more.
            self.abort()
            return
        try:
            self.parser.feed_data(data)
        except (httptools.HttpParserError, httptools.HttpParserUpgrade) as exc:
            self._fail(ProtocolError(f"invalid HTTP response: {exc}"))
            self.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            if self.headers_done and not self.parser.should_keep_alive() and self._ends_at_eof():
                # A body delimited by the end of the connection (no length, not chunked).
                self.keep_alive = False
                self.on_message_complete()
            else:
                why = f": {exc}" if exc else ""
                waiter.set_exception(DisconnectedError(f"server closed the connection{why}"))
        self.pool._lost(self)

    # -- httptools callbacks
    def on_message_begin(self) -> None:
        if self.waiter is None or self.waiter.done():
            # More bytes after the response, in the same read: the connection can't be trusted.
            raise httptools.HttpParserError("unexpected bytes after the response")

    def on_status(self, reason: bytes) -> None:
        self.reason += reason

    def on_header(self, name: bytes, value: bytes) -> None:
        self.header_bytes += len(name) + len(value)
        if self.header_bytes > _MAX_HEADER_BYTES:
            raise httptools.HttpParserError("response headers are too large")
        self.headers[name.decode("latin-1").lower()] = value.decode("latin-1")

    def on_headers_complete(self) -> None:
        self.status = self.parser.get_status_code()
        self.keep_alive = self.parser.should_keep_alive()
        self.headers_done = True

    def on_body(self, body: bytes) -> None:
        pool = self.pool
        if pool.body_limit is None:  # every byte is wanted
            self.body.append(body)
            return
        room = pool.body_limit - self.body_size
        if room > 0:
            self.body.append(body[:room] if len(body) > room else body)
        self.body_size += len(body)
        if self.body_size > pool.drain_limit:  # don't read a large answer nobody keeps
            self.keep_alive = False
            self.on_message_complete()
            self.abort()

    def on_message_complete(self) -> None:
        waiter = self.waiter
        if waiter is None or waiter.done():
            return
        if 100 <= self.status < 200:  # an interim answer; the real one follows
            self._reset()
            return
        body = b"".join(self.body) if len(self.body) != 1 else self.body[0]
        reason = self.reason.decode("latin-1")
        waiter.set_result(Response(self.status, self.headers, body, reason))

    # -- helpers
    def _ends_at_eof(self) -> bool:
        """Whether the body ends where the connection does: no length given, not chunked."""
        coding = self.headers.get("transfer-encoding", "").rpartition(",")[2].strip().lower()
        return "content-length" not in self.headers and coding != "chunked"

    def _fail(self, exc: Exception) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)

    def abort(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()

    def send(self, data: bytes, waiter: asyncio.Future[Response]) -> None:
        self._reset()
        self.received = False
        self.waiter = waiter
        assert self.transport is not None
        self.transport.write(data)


class HttpPool:
    """Keep-alive connections to any number of hosts, shared by concurrent requests.

    ``resolver`` answers DNS (give it a GuardedResolver: what it returns is dialled as is);
    ``ssl_context`` verifies ``https`` servers (the system's trust store by default).
    """

    def __init__(
        self,
        resolver: Resolver,
        *,
        max_connections: int = 512,
        max_per_origin: int = 64,
        idle_seconds: float = 15.0,
        body_limit: int | None = 4097,
        drain_limit: int = 64 * 1024,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self._resolver = resolver
        self.max_connections = max_connections
        self.max_per_origin = max(1, max_per_origin)
        self.idle_seconds = idle_seconds
        self.body_limit = body_limit
        self.drain_limit = drain_limit if body_limit is None else max(drain_limit, body_limit)
        self._ssl = ssl_context
        self._idle: dict[_Key, list[_Connection]] = {}
        self._open = 0  # connected or connecting
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._per_origin: dict[_Key, int] = {}  # open (or opening) connections to each origin
        self._origin_waiters: dict[_Key, deque[asyncio.Future[None]]] = {}
        self._dns: dict[tuple[str, int], tuple[float, list[tuple[Any, ...]]]] = {}
        self._closed = False
        self._sweeper: asyncio.TimerHandle | None = None

    @property
    def open_connections(self) -> int:
        return self._open

    async def request(
        self,
        method: str,
        url: URL,
        headers: Iterable[tuple[str, str]],
        body: bytes,
        *,
        timeout: float,
    ) -> Response:
        """Send one request and return its response. Raises :class:`TimeoutError` when
        ``timeout`` seconds pass first, or a :class:`HttpClientError`."""
        try:
            origin = Origin.of(url)
        except ValueError as exc:
            raise ConnectError(str(url.raw_host), url.port or 0, exc) from exc
        return await self.request_at(
            origin, method, url.raw_path_qs, headers, body, timeout=timeout
        )

    async def request_at(
        self,
        origin: Origin,
        method: str,
        target: str,
        headers: Iterable[tuple[str, str]],
        body: bytes,
        *,
        timeout: float,
        retry_stale: bool = True,
    ) -> Response:
        """:meth:`request` to ``origin`` for the request target ``target`` (path and query,
        already encoded): no URL to parse per call. ``retry_stale=False``: a request whose
        kept-alive connection turns out closed by the server fails (DisconnectedError) instead
        of being sent again on a new one (a request that must not run twice)."""
        if self._closed:
            raise HttpClientError("the HTTP pool is closed")
        lines = [f"{method} {target} HTTP/1.1", origin.host_line]
        lines.extend(f"{name}: {value}" for name, value in headers)
        lines.append(f"Content-Length: {len(body)}\r\n\r\n")
        data = "\r\n".join(lines).encode() + body
        key = origin.key
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        conn = self._idle_connection(key, loop.time())
        reused = conn is not None
        if conn is None:
            conn, reused = await self._acquire_by(key, deadline)
        try:
            return await self._exchange(conn, data, deadline)
        except DisconnectedError:
            if not reused or conn.received or not retry_stale:
                raise
        # The server closed a connection we kept idle: once more on a new one.
        conn, _ = await self._acquire_by(key, deadline, fresh=True)
        return await self._exchange(conn, data, deadline)

    async def _acquire_by(
        self, key: _Key, deadline: float, *, fresh: bool = False
    ) -> tuple[_Connection, bool]:
        """:meth:`_acquire` within ``deadline`` (:class:`ConnectTimeoutError` past it)."""
        try:
            async with asyncio.timeout_at(deadline):
                return await self._acquire(key, fresh=fresh)
        except TimeoutError as exc:
            raise ConnectTimeoutError(f"no connection to {key[1]}:{key[2]} in time") from exc

    async def _exchange(self, conn: _Connection, data: bytes, deadline: float) -> Response:
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[Response] = loop.create_future()
        # One timer per request, failing only the waiter: cheaper than asyncio.timeout.
        timer = loop.call_at(deadline, _expire, waiter)
        try:
            conn.send(data, waiter)
            response = await waiter
        except BaseException:
            conn.waiter = None
            conn.abort()
            raise
        finally:
            timer.cancel()
        conn.waiter = None
        if conn.keep_alive and not conn.closed and not self._closed:
            self._release(conn)
        else:
            conn.abort()
        return response

    def _usable(self, conn: _Connection, now: float) -> bool:
        """Whether an idle connection may carry another request."""
        return not conn.closed and now - conn.idle_since < self.idle_seconds

    def _idle_connection(self, key: _Key, now: float) -> _Connection | None:
        """The most recently used live idle connection to ``key``, if any."""
        idle = self._idle.get(key)
        while idle:
            conn = idle.pop()
            if self._usable(conn, now):
                return conn
            conn.abort()
        return None

    async def _acquire(self, key: _Key, *, fresh: bool = False) -> tuple[_Connection, bool]:
        loop = asyncio.get_running_loop()
        while True:
            conn = None if fresh else self._idle_connection(key, loop.time())
            if conn is not None:
                return conn, True
            if self._per_origin.get(key, 0) >= self.max_per_origin:
                # This origin has all it may have: wait for one of its connections to come back.
                await self._wait_turn(self._origin_waiters.setdefault(key, deque()), key)
            elif self._open < self.max_connections or self._evict_one():
                self._open += 1
                self._count(key, 1)
                try:
                    return await self._connect(key), False
                except BaseException:
                    self._open -= 1
                    self._count(key, -1)
                    self._wake(key)
                    raise
            else:
                await self._wait_turn(self._waiters, None)
            if self._closed:
                raise HttpClientError("the HTTP pool is closed")
            if fresh:
                fresh = False  # a released connection is as good as a new one now

    async def _wait_turn(self, queue: deque[asyncio.Future[None]], key: _Key | None) -> None:
        """Wait in ``queue`` until :meth:`_wake` gives this request a turn."""
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        queue.append(waiter)
        try:
            await waiter
        except BaseException:
            if waiter.done() and not waiter.cancelled():
                self._wake(key)  # pass on the turn this request was given
            else:
                with contextlib.suppress(ValueError):
                    queue.remove(waiter)
            raise

    def _count(self, key: _Key, delta: int) -> None:
        left = self._per_origin.get(key, 0) + delta
        if left > 0:
            self._per_origin[key] = left
        else:
            self._per_origin.pop(key, None)

    def _evict_one(self) -> bool:
        """Close an idle connection (to any host) so a new one may open; False if none."""
        for conns in self._idle.values():
            while conns:
                conn = conns.pop(0)
                if not conn.closed:
                    conn.abort()
                    self._open -= 1  # its connection_lost will not count it again
                    self._count(conn.key, -1)
                    conn.pool = _DETACHED
                    self._wake_origin(conn.key)
                    return True
        return False

    async def _connect(self, key: _Key) -> _Connection:
        tls, host, port = key
        loop = asyncio.get_running_loop()
        infos = await self._resolve(host, port)
        try:
            sock = await aiohappyeyeballs.start_connection(
                infos, happy_eyeballs_delay=0.25, interleave=1
            )
        except OSError as exc:
            raise ConnectError(host, port, exc) from exc
        conn = _Connection(self, key)
        context = None
        if tls:
            if self._ssl is None:
                self._ssl = ssl.create_default_context()
            context = self._ssl
        try:
            await loop.create_connection(
                lambda: conn, sock=sock, ssl=context, server_hostname=host if tls else None
            )
        except BaseException as exc:
            conn.pool = _DETACHED  # _acquire uncounts it; its connection_lost must not again
            sock.close()
            if isinstance(exc, OSError):  # ssl.SSLError and CertificateError included
                raise ConnectError(host, port, exc) from exc
            raise
        return conn

    async def _resolve(self, host: str, port: int) -> list[tuple[Any, ...]]:
        loop = asyncio.get_running_loop()
        cached = self._dns.get((host, port))
        if cached is not None and cached[0] > loop.time():
            return cached[1]
        try:
            results = await self._resolver.resolve(host, port, socket.AF_UNSPEC)
        except OSError as exc:
            # ForbiddenAddressError (an OSError) included: nothing was dialled.
            raise ResolveError(host, port, exc) from exc
        if not results:
            raise ResolveError(host, port, OSError(f"{host} did not resolve to any address"))
        infos = [
            (r["family"], socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (r["host"], r["port"]))
            for r in results
        ]
        if len(self._dns) > 4096:
            self._dns.clear()
        self._dns[(host, port)] = (loop.time() + _DNS_TTL_SECONDS, infos)
        return infos

    def _release(self, conn: _Connection) -> None:
        loop = asyncio.get_running_loop()
        conn.idle_since = loop.time()
        self._idle.setdefault(conn.key, []).append(conn)
        if self._sweeper is None:
            self._sweeper = loop.call_later(self.idle_seconds, self._sweep)
        self._wake(conn.key)

    def _sweep(self) -> None:
        """Close connections idle for longer than ``idle_seconds``."""
        self._sweeper = None
        now = asyncio.get_running_loop().time()
        remaining = False
        for key, conns in list(self._idle.items()):
            keep = []
            for conn in conns:
                if self._usable(conn, now):
                    keep.append(conn)
                else:
                    conn.abort()
            if keep:
                self._idle[key] = keep
                remaining = True
            else:
                del self._idle[key]
        if remaining and not self._closed:
            self._sweeper = asyncio.get_running_loop().call_later(self.idle_seconds, self._sweep)

    def _lost(self, conn: _Connection) -> None:
        self._open -= 1
        self._count(conn.key, -1)
        self._wake(conn.key)

    def _wake(self, key: _Key | None) -> None:
        """A connection (to ``key``, when given) came back or closed: give a turn to a request
        waiting for that origin, and one to a request waiting for any connection."""
        if key is not None:
            self._wake_origin(key)
        _give_turn(self._waiters)

    def _wake_origin(self, key: _Key) -> None:
        queue = self._origin_waiters.get(key)
        if queue is not None:
            _give_turn(queue)
            if not queue:
                del self._origin_waiters[key]

    async def close(self) -> None:
        """Close every idle connection; later requests fail. In-flight ones finish or fail."""
        self._closed = True
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        for conns in self._idle.values():
            for conn in conns:
                conn.abort()
        self._idle.clear()
        # Requests waiting for a slot fail now, not when one frees.
        for queue in (self._waiters, *self._origin_waiters.values()):
            while queue:
                _give_turn(queue)
        self._origin_waiters.clear()
        await asyncio.sleep(0)  # let transports deliver connection_lost


def _give_turn(queue: deque[asyncio.Future[None]]) -> None:
    """Wake the first request in ``queue`` still waiting."""
    while queue:
        waiter = queue.popleft()
        if not waiter.done():
            waiter.set_result(None)
            return


def _expire(waiter: asyncio.Future[Response]) -> None:
    if not waiter.done():
        waiter.set_exception(TimeoutError())


class _Detached:
    """The pool of a connection that was evicted: it no longer counts anywhere."""

    def _lost(self, conn: _Connection) -> None:
        return None


_DETACHED: Any = _Detached()
