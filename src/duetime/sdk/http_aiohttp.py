"""The SDK's aiohttp transport (``duetime[fast]``): :func:`duetime.sdk._http.network_backend`
uses it when aiohttp is installed; its C parser and lean pool cost a fraction of httpx's work per
request (docs/benchmarks.md, "SDK single creates")."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from urllib.parse import urlencode

import aiohttp
from yarl import URL

from duetime.sdk.http import Failure, Params, Reply, query_value

__all__ = ["AiohttpBackend"]


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
            query = urlencode([(k, query_value(v)) for k, v in params])
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
