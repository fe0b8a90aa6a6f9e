"""Dev-mode request checks: without an admin token auth is off, so the only thing between a web
page the developer has open and the dev server's API is the browser. Browsers will send a
cross-site ``text/plain`` POST without asking (a "simple" request), and DNS rebinding can point
an attacker's host name at 127.0.0.1. :class:`DevModeGuard` closes both doors:

- a ``Host`` that is not loopback (``localhost``, ``127.x.y.z``, ``[::1]``, any port) → 421;
- an ``Origin`` that is present and not a loopback origin (``null`` included) → 403;
- a request body whose ``Content-Type`` is not JSON (``application/json`` or
  ``application/*+json``) → 415. A browser cannot send JSON cross-site without a CORS
  preflight, which the server never answers. The dashboard's form posts under ``/ui/`` are the
  exception: each must name this server as its Origin.

With an admin token every call carries a bearer credential a browser does not add by itself,
so the guard is not installed.
"""

from __future__ import annotations

import functools
import ipaddress
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from duetime.api.problems import problem

BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
"""Methods whose body, when they carry one, must be JSON."""

UI_PREFIX = "/ui/"
"""The dashboard's form posts are not JSON; each is refused unless its Origin (or Referer) is
this very server (``duetime.api.ui.session.same_origin``), on top of the Host and Origin checks
here."""


def is_loopback_name(host: str) -> bool:
    """Whether ``host`` (a name or an address, without port or brackets) is loopback."""
    name = host.strip().lower().rstrip(".")
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def host_of(authority: str) -> str:
    """The host part of a ``Host`` header value: ``[::1]:8080`` → ``::1``, ``a:80`` → ``a``."""
    value = authority.strip()
    if value.startswith("["):
        end = value.find("]")
        return value[1:end] if end > 0 else value
    if value.count(":") == 1:
        return value.split(":", 1)[0]
    return value


@functools.lru_cache(maxsize=64)
def _is_loopback_authority(host: bytes) -> bool:
    """:func:`is_loopback_name` of a ``Host`` header's host, remembered for the few values a
    node sees (parsing an address is ~2 % of a create's CPU in the node); bounded, so a stream
    of invented names only churns the cache."""
    return is_loopback_name(host_of(host.decode("latin-1")))


def is_loopback_origin(origin: str) -> bool:
    """Whether an ``Origin`` header names an http(s) origin on a loopback host."""
    try:
        parts = urlsplit(origin.strip())
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and is_loopback_name(parts.hostname or "")


def is_json_media_type(content_type: str) -> bool:
    """``application/json`` or a ``+json`` structured type, parameters ignored."""
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )


def _has_body(headers: dict[bytes, bytes]) -> bool:
    if b"transfer-encoding" in headers:
        return True
    length = headers.get(b"content-length", b"").strip()
    return bool(length) and length != b"0"


class DevModeGuard:
    """ASGI middleware refusing cross-site and rebinding requests in dev mode (see module)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refusal = self._refusal(scope)
        if refusal is None:
            await self.app(scope, receive, send)
            return
        status, slug, title, detail = refusal
        response = problem(Request(scope), status, slug, title, detail)
        await response(scope, receive, send)

    @staticmethod
    def _refusal(scope: Scope) -> tuple[int, str, str, str] | None:
        headers: dict[bytes, bytes] = {}
        for key, value in scope["headers"]:
            headers.setdefault(key.lower(), value)
        host = headers.get(b"host")
        if host is not None and not _is_loopback_authority(host):
            return (
                421,
                "misdirected-request",
                "Misdirected request",
                "dev mode answers only requests addressed to a loopback host "
                "(localhost, 127.0.0.1, [::1]); set DUETIME_ADMIN_TOKEN to serve other names",
            )
        origin = headers.get(b"origin")
        if origin is not None and not is_loopback_origin(origin.decode("latin-1")):
            return (
                403,
                "forbidden-origin",
                "Forbidden origin",
                "dev mode refuses requests from web pages of other origins",
            )
        if (
            scope["method"] in BODY_METHODS
            and _has_body(headers)
            and not scope["path"].startswith(UI_PREFIX)
        ):
            content_type = headers.get(b"content-type", b"").decode("latin-1")
            if not is_json_media_type(content_type):
                return (
                    415,
                    "unsupported-media-type",
                    "Unsupported media type",
                    "request bodies must be sent as Content-Type: application/json",
                )
        return None
