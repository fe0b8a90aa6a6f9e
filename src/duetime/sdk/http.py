"""The SDK's HTTP layer: one request in, one :class:`Reply` (or a :class:`Failure`) out.

Over the network the SDK speaks through :mod:`duetime.http1` when its libraries are installed
(``duetime[fast]``; :mod:`duetime.sdk.http_lean`, chosen by
:func:`duetime.sdk._http.network_backend`), whose C parser and lean keep-alive pool cost a
fraction of httpx's or aiohttp's per-request work (ADR 0009): that work is most of what a
one-caller create or a worker's lease call costs on the client. A caller that passes an httpx
transport (``httpx.MockTransport``, ``httpx.ASGITransport`` in tests) gets the httpx path
instead, with the same replies and failures.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import httpx

__all__ = ["SAFE_METHODS", "Backend", "Failure", "HttpxBackend", "Params", "Reply"]

Params = list[tuple[str, str | int | float | bool | None]]

SAFE_METHODS = frozenset({"GET", "HEAD", "PUT", "DELETE"})
"""Methods whose repeat cannot do more than the first call did (HTTP idempotent methods): the
SDK tries them again after a timeout, and its transport re-sends them on a new connection when
a kept-alive one turns out closed."""


@dataclass(frozen=True, slots=True)
class Reply:
    """An HTTP answer: status, reason, headers (case-insensitive) and the whole body."""

    status_code: int
    reason_phrase: str
    headers: Mapping[str, str]
    content: bytes

    @property
    def is_success(self) -> bool:
        return 200 <= self.status_code < 300

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")


class Failure(Exception):
    """No answer. ``never_sent``: the connection could not be made, so the server saw nothing;
    ``timed_out``: a timeout ended the call."""

    def __init__(self, message: str, *, never_sent: bool, timed_out: bool) -> None:
        super().__init__(message)
        self.never_sent = never_sent
        self.timed_out = timed_out


class Backend(Protocol):
    """Sends requests for :class:`~duetime.sdk.client.AsyncClient`."""

    async def request(
        self,
        method: str,
        path: str,
        content: bytes | None,
        params: Params | None,
        headers: Mapping[str, str],
        extra_read_seconds: float,
    ) -> Reply: ...

    async def aclose(self) -> None: ...


def query_value(value: str | int | float | bool | None) -> str:
    """A query value as httpx writes it, so both transports send the same query strings."""
    if value is True:
        return "true"
    if value is False:
        return "false"
    return "" if value is None else str(value)


class HttpxBackend:
    """httpx: for a caller's own transport (tests: ``MockTransport``, ``ASGITransport``), and
    over the network when ``duetime[fast]`` is not installed."""

    def __init__(
        self,
        base_url: str,
        headers: Mapping[str, str],
        timeout: float,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._http = httpx.AsyncClient(
            base_url=base_url, headers=dict(headers), timeout=timeout, transport=transport
        )

    async def request(
        self,
        method: str,
        path: str,
        content: bytes | None,
        params: Params | None,
        headers: Mapping[str, str],
        extra_read_seconds: float,
    ) -> Reply:
        timeout: Any = httpx.USE_CLIENT_DEFAULT
        if extra_read_seconds:
            base = self._http.timeout
            read = None if base.read is None else base.read + extra_read_seconds
            timeout = httpx.Timeout(base.connect, read=read, write=base.write, pool=base.pool)
        try:
            response = await self._http.request(
                method, path, content=content, params=params, headers=headers, timeout=timeout
            )
        except httpx.TransportError as exc:
            never_sent = isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout)
            timed_out = isinstance(exc, httpx.TimeoutException)
            text = f"timed out ({exc})" if timed_out else str(exc)
            raise Failure(text, never_sent=never_sent, timed_out=timed_out) from exc
        return Reply(
            response.status_code, response.reason_phrase, response.headers, response.content
        )

    async def aclose(self) -> None:
        await self._http.aclose()
