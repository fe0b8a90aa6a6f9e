"""What a connection may cost a node: time to send its request, bytes of its head, and a place
among a bounded number of open connections.

uvicorn times out only an idle keep-alive connection (``timeout_keep_alive``). A client that
connects and sends nothing, or half a request head, or a body one byte a minute, holds its
connection — and its file descriptor and buffers — for as long as it likes; httptools buffers a
header value of any length. :func:`guarded_protocol` makes uvicorn's httptools protocol (the one
``duetime serve`` runs) refuse those:

- **Head**: a request head (request line and headers) must arrive within
  :attr:`ConnectionLimits.header_timeout` of the connection opening, or of the first byte of a
  following request on a kept-alive one; else ``408`` and the connection closes. A head over
  :data:`MAX_HEAD_BYTES` is a ``431`` (the app's own header limits are smaller; this one only
  keeps a head from growing without end before the app sees it).
- **Body**: once the head is in, the body must arrive within
  :attr:`ConnectionLimits.body_timeout`; else ``408`` and the connection closes (the route
  waiting for it sees a client that went away).
- **Open connections**: past :attr:`ConnectionLimits.max_connections`, a new connection is
  answered ``503`` (``Retry-After: 1``) and closed at once, while the connections already open
  are served as before. (uvicorn's ``limit_concurrency`` would instead answer 503 to every
  request while too many connections are open — idle ones included — which lets a client that
  opens many idle connections refuse everyone else's requests.)

Every refusal is an RFC 9457 problem with ``Connection: close`` and
``X-Content-Type-Options: nosniff``. Timeouts are logged at debug level (a slow-client flood
would otherwise flood the log); refused connections are logged at most every 10 s, counted.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Any

import orjson
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

log = logging.getLogger("duetime.server")

MAX_HEAD_BYTES = 1024 * 1024
"""Bytes of a request head (counted by the reads that left it unfinished)."""
_REFUSAL_LOG_SECONDS = 10.0


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """The limits of :func:`guarded_protocol` (``DUETIME_HEADER_TIMEOUT_SECONDS``,
    ``DUETIME_BODY_TIMEOUT_SECONDS``, ``DUETIME_MAX_CONNECTIONS``)."""

    header_timeout: float = 10.0
    body_timeout: float = 60.0
    max_connections: int = 4096

    def __post_init__(self) -> None:
        if self.header_timeout <= 0 or self.body_timeout <= 0:
            raise ValueError("header_timeout and body_timeout must be positive")
        if self.max_connections < 1:
            raise ValueError("max_connections must be at least 1")


def _refusal(status: int, reason: str, slug: str, title: str, detail: str) -> bytes:
    """A whole HTTP/1.1 problem response that closes the connection."""
    body = orjson.dumps(
        {
            "type": f"urn:duetime:problem:{slug}",
            "title": title,
            "status": status,
            "detail": detail,
            "instance": "",
        }
    )
    head = (
        f"HTTP/1.1 {status} {reason}\r\n"
        "content-type: application/problem+json\r\n"
        f"content-length: {len(body)}\r\n"
        "connection: close\r\n"
        "x-content-type-options: nosniff\r\n"
        + ("retry-after: 1\r\n" if status == 503 else "")
        + "\r\n"
    )
    return head.encode() + body


class _Refusals:
    """Refused connections, logged at most every :data:`_REFUSAL_LOG_SECONDS`."""

    def __init__(self) -> None:
        self.count = 0
        self.logged_at = -_REFUSAL_LOG_SECONDS

    def note(self, cap: int) -> None:
        self.count += 1
        now = time.monotonic()
        if now - self.logged_at >= _REFUSAL_LOG_SECONDS:
            log.warning(
                "refused %d connection(s) over the cap of %d open connections "
                "(DUETIME_MAX_CONNECTIONS)",
                self.count,
                cap,
            )
            self.count, self.logged_at = 0, now


def guarded_protocol(limits: ConnectionLimits) -> type[asyncio.Protocol]:
    """uvicorn's httptools protocol under ``limits`` (see the module docstring): pass it as
    ``uvicorn.Config(http=...)``."""
    refusals = _Refusals()
    busy = _refusal(
        503, "Service Unavailable", "too-many-connections", "Too many connections",
        f"this node has {limits.max_connections} connections open; try again shortly",
    )  # fmt: skip
    slow_head = _refusal(
        408, "Request Timeout", "request-timeout", "Request timeout",
        f"the request head did not arrive within {limits.header_timeout:g} s",
    )  # fmt: skip
    slow_body = _refusal(
        408, "Request Timeout", "request-timeout", "Request timeout",
        f"the request body did not arrive within {limits.body_timeout:g} s",
    )  # fmt: skip
    big_head = _refusal(
        431, "Request Header Fields Too Large", "request-header-fields-too-large",
        "Request header fields too large",
        f"the request head is over {MAX_HEAD_BYTES} bytes",
    )  # fmt: skip

    class GuardedHttpTools(HttpToolsProtocol):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._timer: asyncio.TimerHandle | None = None
            self._in_head = False
            self._head_bytes = 0

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if len(self.connections) > limits.max_connections:
                refusals.note(limits.max_connections)
                self._refuse(busy)
                return
            self._start_head()

        def connection_lost(self, exc: Exception | None) -> None:
            self._stop_timer()
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self._in_head and not self.transport.is_closing():
                self._head_bytes += len(data)  # a read that left the head unfinished
                if self._head_bytes > MAX_HEAD_BYTES:
                    self._refuse(big_head)

        def on_message_begin(self) -> None:
            super().on_message_begin()
            if not self._in_head:  # a following request on a kept-alive connection
                self._start_head()

        def on_headers_complete(self) -> None:
            self._in_head = False
            self._stop_timer()
            super().on_headers_complete()
            self._timer = self.loop.call_later(limits.body_timeout, self._too_slow, slow_body)

        def on_message_complete(self) -> None:
            self._stop_timer()
            super().on_message_complete()

        def _start_head(self) -> None:
            self._in_head, self._head_bytes = True, 0
            self._stop_timer()
            self._timer = self.loop.call_later(limits.header_timeout, self._too_slow, slow_head)

        def _stop_timer(self) -> None:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

        def _too_slow(self, answer: bytes) -> None:
            self._timer = None
            log.debug("closing a connection from %s: %s", self.client, answer.split(b"\r\n")[0])
            self._refuse(answer)

        def _refuse(self, answer: bytes) -> None:
            """Answer ``answer`` unless a response is under way, and close."""
            self._in_head = False
            self._stop_timer()
            if self.transport.is_closing():
                return
            cycle = self.cycle
            if cycle is None or not cycle.response_started or cycle.response_complete:
                if cycle is not None and not cycle.response_complete:
                    cycle.disconnected = True  # the route's own answer goes nowhere now
                self.transport.write(answer)
            self.transport.close()

    return GuardedHttpTools
