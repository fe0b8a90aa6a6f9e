"""The SDK's HTTP layer: one request in, one :class:`Reply` (or a :class:`Failure`) out.

Over the network the SDK speaks through aiohttp, whose C parser and lean connection pool cost a
fraction of httpx's per-request work (docs/benchmarks.md, "SDK single creates"): that work is
most of what a one-caller create or a worker's lease call costs on the client. A caller that
passes an httpx transport (``httpx.MockTransport``, ``httpx.ASGITransport`` in tests) gets the
httpx path instead, with the same replies and failures.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlencode

import aiohttp
import httpx
from yarl import URL

__all__ = ["AiohttpBackend", "Backend", "Failure", "HttpxBackend", "Params", "Reply"]

Params = list[tuple[str, str | int | float | bool | None]]


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


def _query_value(value: str | int | float | bool | None) -> str:
    # As httpx writes them, so both paths send the same query strings.
    if value is True:
        return "true"
    if value is False:
        return "false"
    return "" if value is None else str(value)


class AiohttpBackend:
    """aiohttp over the network; the session is made on first use, inside the caller's loop."""

    def __init__(self, base_url: str, headers: Mapping[str, str], timeout: float) -> None:
        self._base = base_url
        self._headers = dict(headers)
        self._timeout = timeout
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timeouts: dict[float, aiohttp.ClientTimeout] = {}

    def _open(self) -> aiohttp.ClientSession:
        session = self._session
        loop = asyncio.get_running_loop()
        if session is None or session.closed or self._loop is not loop:
            # A session belongs to the loop it was made in: a client used from a new loop (two
            # asyncio.run calls) gets a new one; the old loop's connections go with that loop.
            self._loop = loop
            connector = aiohttp.TCPConnector(limit=100, ttl_dns_cache=300)
            session = aiohttp.ClientSession(
                connector=connector, headers=self._headers, auto_decompress=True
            )
            self._session = session
        return session

    def _timeout_for(self, extra_read_seconds: float) -> aiohttp.ClientTimeout:
        found = self._timeouts.get(extra_read_seconds)
        if found is None:
            t = self._timeout
            found = aiohttp.ClientTimeout(
                total=None, connect=t, sock_connect=t, sock_read=t + extra_read_seconds
            )
            if len(self._timeouts) < 64:
                self._timeouts[extra_read_seconds] = found
        return found

    async def request(
        self,
        method: str,
        path: str,
        content: bytes | None,
        params: Params | None,
        headers: Mapping[str, str],
        extra_read_seconds: float,
    ) -> Reply:
        url = self._base + path
        if params:
            query = urlencode([(k, _query_value(v)) for k, v in params])
            url = f"{url}?{query}"
        session = self._open()
        try:
            async with session.request(
                method,
                URL(url, encoded=True),  # path segments are quoted by the caller already
                data=content,
                headers=headers,
                timeout=self._timeout_for(extra_read_seconds),
                allow_redirects=False,
            ) as response:
                body = await response.read()
                return Reply(response.status, response.reason or "", response.headers, body)
        except aiohttp.ConnectionTimeoutError as exc:
            raise Failure(f"timed out connecting ({exc})", never_sent=True, timed_out=True) from exc
        except aiohttp.ClientConnectorError as exc:
            raise Failure(str(exc), never_sent=True, timed_out=False) from exc
        except (TimeoutError, aiohttp.ServerTimeoutError) as exc:
            raise Failure(f"timed out ({exc})", never_sent=False, timed_out=True) from exc
        except aiohttp.ClientError as exc:
            text = str(exc) or type(exc).__name__
            raise Failure(text, never_sent=False, timed_out=False) from exc

    async def aclose(self) -> None:
        session, self._session = self._session, None
        if session is not None and not session.closed and self._loop is asyncio.get_running_loop():
            await session.close()


class HttpxBackend:
    """httpx, for a caller's own transport (tests: ``MockTransport``, ``ASGITransport``)."""

    def __init__(
        self,
        base_url: str,
        headers: Mapping[str, str],
        timeout: float,
        transport: httpx.AsyncBaseTransport,
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
