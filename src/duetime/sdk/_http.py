"""The HTTP core of the SDK: :class:`_Api`, the one base every group of calls subclasses
(:class:`~duetime.sdk.client.AsyncClient` is their union), with the retrying request machinery
and the helpers the call groups share.

A group of calls is a subclass of :class:`_Api` written with :meth:`_Api._request` (decoded
JSON) or :meth:`_Api._send` (the raw 2xx reply); this module imports none of them.
"""

from __future__ import annotations

import asyncio
import os
import random
from collections.abc import Mapping
from types import TracebackType
from typing import Any, Self
from urllib.parse import quote

import httpx
import orjson

from duetime.sdk.errors import (
    ApiTooManyRequests,
    ApiUnavailable,
    TransportError,
    error_from_response,
)
from duetime.sdk.http import SAFE_METHODS, Backend, Failure, HttpxBackend, Params, Reply
from duetime.variables import client_api_key
from duetime.version import __version__

DEFAULT_URL = "http://127.0.0.1:8080"

DEFAULT_RETRIES = 3
"""Transient failures a call is tried again after, by default (see :class:`_Api`)."""


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()
"""Marks an argument the caller did not give (where ``None`` is a meaningful JSON value)."""


def _segment(value: str) -> str:
    """A path segment; ids are quoted so they can never change the route."""
    return quote(value, safe="")


def network_backend(base_url: str, headers: Mapping[str, str], timeout: float) -> Backend:
    """:mod:`duetime.http1` when its libraries are installed (``duetime[fast]``, or with the
    server), else httpx."""
    try:
        from duetime.sdk.http_lean import LeanBackend
    except ImportError:  # the lean client install
        return HttpxBackend(base_url, headers, timeout)
    return LeanBackend(base_url, headers, timeout)


class _Api:
    """The HTTP core every group of calls is built on.

    ``base_url`` and ``api_key`` default to ``DUETIME_URL`` and ``DUETIME_API_KEY`` (or the file
    ``DUETIME_API_KEY_FILE`` names, as the CLI reads them), then to :data:`DEFAULT_URL` and no
    key; both key variables together, or an unreadable or empty file, raise
    :class:`~duetime.errors.ConfigError`.

    Transient failures are tried again, up to ``retries`` times with exponential backoff and
    jitter (``Retry-After`` honoured, at most 30 s): a 503 or 429 (the server changed nothing) and a
    connection that could not be made (nothing was sent) always; a timeout or a connection lost
    mid-call only where repeating cannot do more than the first call did — an idempotent method
    (GET, PUT, DELETE) or a body carrying an ``idempotency_key``. ``retries=0`` turns it off.
    """

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float = 10.0,
        retries: int = DEFAULT_RETRIES,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        base_url = base_url or os.environ.get("DUETIME_URL") or DEFAULT_URL
        if api_key is None:
            api_key = client_api_key()
        headers = {"user-agent": f"duetime-python/{__version__}", "accept": "application/json"}
        if api_key:
            headers["authorization"] = f"Bearer {api_key}"
        self.base_url = base_url.rstrip("/")
        self.retries = max(0, retries)
        # duetime.http1 over the network when installed (far less work per call); httpx
        # otherwise and for a caller's transport.
        self._http: Backend = (
            network_backend(self.base_url, headers, timeout)
            if transport is None
            else HttpxBackend(self.base_url, headers, timeout, transport)
        )

    async def aclose(self) -> None:
        """Close the connection pool; idempotent."""
        await self._http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def _request(
        self,
        method: str,
        path: str,
        *,
        body: Any = UNSET,
        params: Params | None = None,
        retries: int | None = None,
    ) -> Any:
        """Send one call and return its decoded JSON (None for an empty body).

        Raises the typed :class:`~duetime.sdk.errors.ApiError` for a non-2xx answer and
        :class:`~duetime.sdk.errors.TransportError` when there is no answer, once ``retries``
        (default: the client's) tries of a transient failure are spent.
        """
        return _decoded(await self._send(method, path, body=body, params=params, retries=retries))

    async def _send(
        self,
        method: str,
        path: str,
        *,
        body: Any = UNSET,
        params: Params | None = None,
        extra_read_seconds: float = 0.0,
        retries: int | None = None,
    ) -> Reply:
        """Send one call and return its 2xx response; errors as in :meth:`_request`.
        ``extra_read_seconds`` stretches the read timeout (for long polls)."""
        retries = self.retries if retries is None else retries
        content: bytes | None = None
        headers = _NO_HEADERS
        if body is not UNSET:
            content = orjson.dumps(body)
            headers = _JSON_HEADERS
        repeatable = method in SAFE_METHODS or (
            isinstance(body, Mapping) and body.get("idempotency_key") is not None
        )
        attempt = 0
        while True:
            try:
                response = await self._http.request(
                    method, path, content, params, headers, extra_read_seconds
                )
            except Failure as exc:
                if attempt < retries and (exc.never_sent or repeatable):
                    attempt += 1
                    await asyncio.sleep(_backoff(attempt, None))
                    continue
                if exc.timed_out:
                    raise TransportError(f"{method} {self.base_url}{path}: {exc}") from exc
                raise TransportError(f"cannot reach {self.base_url}: {exc}") from exc
            if response.is_success:
                return response
            error = error_from_response(
                response.status_code, response.reason_phrase, _decoded(response), response.headers
            )
            if isinstance(error, ApiUnavailable | ApiTooManyRequests) and attempt < retries:
                attempt += 1
                await asyncio.sleep(_backoff(attempt, error.retry_after))
                continue
            raise error


def _backoff(attempt: int, retry_after: float | None) -> float:
    """Seconds before try ``attempt + 1``: the server's ``Retry-After`` when it gave one, else
    0.1 s doubling per try; both spread by up to +25 % and capped at 30 s."""
    base = retry_after if retry_after is not None else 0.1 * 2 ** (attempt - 1)
    return float(min(30.0, max(0.0, base) * random.uniform(1.0, 1.25)))


_NO_HEADERS: dict[str, str] = {}
_JSON_HEADERS = {"content-type": "application/json"}


def _decoded(response: Reply) -> Any:
    """A response body as JSON (its text when it is not JSON; None when empty)."""
    if not response.content:
        return None
    try:
        return orjson.loads(response.content)
    except orjson.JSONDecodeError:
        return response.text
