"""Request header limits: too many or too large headers are a 431 before any route runs.

The HTTP server reads a request's headers whole before the app sees them, and FastAPI,
authentication and logging then look at them on every call: a 2 MB ``Authorization`` header or
5,000 headers cost memory and CPU for nothing. :class:`HeaderLimits` (an ASGI middleware, added by
:func:`duetime.api.app.create_app`) answers ``431 Request Header Fields Too Large`` as an RFC 9457
problem instead. Real clients send a dozen headers of a few hundred bytes.
"""

from __future__ import annotations

from typing import Any

import orjson
from starlette.types import ASGIApp, Receive, Scope, Send

from duetime.api.problems import PROBLEM_MEDIA_TYPE

MAX_HEADER_COUNT = 100
"""Headers per request."""
MAX_HEADER_BYTES = 16 * 1024
"""Bytes of all header names and values together (one header may use all of it)."""


class HeaderLimits:
    """ASGI middleware refusing requests over :data:`MAX_HEADER_COUNT` headers or
    :data:`MAX_HEADER_BYTES` of them (431)."""

    def __init__(
        self,
        app: ASGIApp,
        max_count: int = MAX_HEADER_COUNT,
        max_bytes: int = MAX_HEADER_BYTES,
    ) -> None:
        self.app = app
        self.max_count = max_count
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            detail = self._over(scope.get("headers") or [])
            if detail is not None:
                await _refuse(scope, send, detail)
                return
        await self.app(scope, receive, send)

    def _over(self, headers: list[tuple[bytes, bytes]]) -> str | None:
        if len(headers) > self.max_count:
            return f"{len(headers)} request headers; at most {self.max_count} are accepted"
        size = sum(len(name) + len(value) for name, value in headers)
        if size > self.max_bytes:
            return f"request headers of {size} bytes; at most {self.max_bytes} are accepted"
        return None


async def _refuse(scope: Scope, send: Send, detail: str) -> None:
    body: dict[str, Any] = {
        "type": "urn:duetime:problem:request-header-fields-too-large",
        "title": "Request header fields too large",
        "status": 431,
        "detail": detail,
        "instance": scope.get("path", ""),
    }
    raw = orjson.dumps(body)
    await send(
        {
            "type": "http.response.start",
            "status": 431,
            "headers": [
                (b"content-type", PROBLEM_MEDIA_TYPE.encode()),
                (b"content-length", str(len(raw)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": raw})
