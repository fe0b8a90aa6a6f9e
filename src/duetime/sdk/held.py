"""A payload duetime holds for a leased task (``payload_held``), as a worker's handler reads it:
fetched on first use with the URL its lease carries (``payload_url``, valid during this attempt
only), then kept for the rest of the attempt."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

if TYPE_CHECKING:
    from duetime.sdk.client import AsyncClient


class HeldPayload:
    """Reads the held payload at ``url`` through ``client`` (the worker's: its server), once."""

    __slots__ = ("_client", "_lock", "_path", "_read", "_token", "_value")

    def __init__(self, url: str, client: AsyncClient) -> None:
        parts = urlsplit(url)
        self._path = parts.path
        self._token = (parse_qs(parts.query).get("token") or [""])[0]
        self._client = client
        self._lock = asyncio.Lock()
        self._value: Any = None
        self._read = False

    async def get(self) -> Any:
        """The payload (any JSON value). Raises the SDK's ``ApiError`` when the server refuses
        (403: this attempt is over)."""
        async with self._lock:
            if not self._read:
                self._value = await self._client._request(
                    "GET", self._path, params=[("token", self._token)]
                )
                self._read = True
        return self._value
