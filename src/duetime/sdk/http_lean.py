"""The SDK's network transport (``duetime[fast]``): :mod:`duetime.http1`, the lean HTTP/1.1
keep-alive pool webhook deliveries use, which :func:`duetime.sdk._http.network_backend` picks
when its parser (httptools) is installed.

A one-caller create spends most of the client's CPU in its HTTP client: aiohttp's
``ClientSession.request`` took ~100-115 µs of CPU per call on this project's machine, ``http1``
~30 µs (``docs/adr/0009-the-sdk-speaks-through-http1.md``). What the SDK sends is one shape —
a method, a path under the base URL, a few headers, a JSON body — which is all ``http1`` does.

Timeouts: one deadline per call, ``timeout`` (+ ``extra_read_seconds`` for long polls) from the
call to the whole answer, connecting included. A request on a kept-alive connection that the
server closed meanwhile is sent again on a new connection only for an idempotent method (as
aiohttp does); for others the SDK's own retry rules decide (``_Api``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from urllib.parse import urlencode

from yarl import URL

from duetime import http1
from duetime.sdk.http import SAFE_METHODS, Failure, Params, Reply, query_value

__all__ = ["LeanBackend"]

IDLE_SECONDS = 4.0
"""How long a connection may wait idle for reuse: under uvicorn's default keep-alive (5 s), so
the server is not the one closing it while a request goes out."""


class LeanBackend:
    """:mod:`duetime.http1` over the network; its pool is made on first use, inside the caller's
    loop (a client used from a second loop gets a second pool)."""

    def __init__(self, base_url: str, headers: Mapping[str, str], timeout: float) -> None:
        url = URL(base_url)
        self._origin = http1.Origin.of(url)  # ValueError for a URL that is not http(s)
        self._prefix = url.raw_path.rstrip("/")
        self._headers = list(headers.items())
        self._timeout = timeout
        self._pool: http1.HttpPool | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _open(self) -> http1.HttpPool:
        pool = self._pool
        loop = asyncio.get_running_loop()
        if pool is None or self._loop is not loop:
            # The old loop's connections stay with that loop (it may be closed already).
            self._loop = loop
            pool = http1.HttpPool(
                http1.SystemResolver(),
                max_connections=100,
                max_per_origin=100,
                idle_seconds=IDLE_SECONDS,
                body_limit=None,
            )
            self._pool = pool
        return pool

    async def request(
        self,
        method: str,
        path: str,
        content: bytes | None,
        params: Params | None,
        headers: Mapping[str, str],
        extra_read_seconds: float,
    ) -> Reply:
        target = self._prefix + path  # path segments are quoted by the caller already
        if params:
            target = f"{target}?{urlencode([(k, query_value(v)) for k, v in params])}"
        all_headers = self._headers + list(headers.items()) if headers else self._headers
        try:
            response = await self._open().request_at(
                self._origin,
                method,
                target,
                all_headers,
                content or b"",
                timeout=self._timeout + extra_read_seconds,
                retry_stale=method in SAFE_METHODS,
            )
        except http1.ConnectTimeoutError as exc:
            raise Failure(f"timed out connecting ({exc})", never_sent=True, timed_out=True) from exc
        except TimeoutError as exc:
            raise Failure(
                "timed out waiting for the answer", never_sent=False, timed_out=True
            ) from exc
        except http1.ConnectError as exc:  # ResolveError included
            raise Failure(str(exc), never_sent=True, timed_out=False) from exc
        except http1.HttpClientError as exc:
            raise Failure(
                str(exc) or type(exc).__name__, never_sent=False, timed_out=False
            ) from exc
        return Reply(response.status, response.reason, response.headers, response.body)

    async def aclose(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None and self._loop is asyncio.get_running_loop():
            await pool.close()
