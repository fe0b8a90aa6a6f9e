"""HTTP webhook delivery (SPEC §4): the payload, POSTed and signed per Standard Webhooks.

Every request carries::

    content-type: application/json          (the user's target headers may change it)
    webhook-id: msg_<task id>               (stable across every attempt of the task)
    webhook-timestamp: <unix seconds>
    webhook-signature: v1,<b64> [v1,<b64>]  (one per live secret; absent if the tenant has none)
    duetime-task-id: <task id>
    duetime-attempt: <1-based attempt number>
    duetime-scheduled-for: <RFC 3339 UTC>   (only for schedule-made tasks; absent otherwise)
    duetime-payload-ref: <the task's payload_ref, as given>   (only when it has one)
    idempotency-key: <the task's idempotency key, or its id>
    traceparent: <W3C trace context>         (when the task has one; see observe/tracing.py)

Target headers never override the signature, ``duetime-*``, ``idempotency-key`` or framing
headers (they are dropped at delivery; :func:`check_http_target` refuses them at create time).

Outcomes: 2xx succeeds and keeps the first 4 KiB of the answer as the result (every attempt with
an answer keeps its body's first 4 KiB as the attempt's ``response``); connection errors,
timeouts, 408, 429 and 5xx are retryable and honour ``Retry-After`` (seconds or HTTP-date); 3xx
(redirects are never followed) and other 4xx fail at once; so does an address refused by
:mod:`duetime.delivery.netguard`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from email.utils import parsedate_to_datetime
from typing import Any

import orjson
from aiohttp.resolver import DefaultResolver
from yarl import URL

from duetime.clock import Clock, SystemClock
from duetime.delivery.base import RESULT_LIMIT_BYTES, Delivery, Outcome
from duetime.delivery.headers import SigningError, is_reserved_header, message_headers
from duetime.delivery.netguard import (
    ALLOW_HINT,
    ForbiddenAddressError,
    GuardedResolver,
    Resolver,
    check_url,
    is_forbidden_address,
    literal_address,
)
from duetime.errors import ValidationError
from duetime.http1 import ConnectError, HttpClientError, HttpPool, ResolveError
from duetime.text import clean
from duetime.types import AttemptOutcome

__all__ = ["ALLOWED_METHODS", "WebhookDeliverer", "check_http_target", "parse_retry_after"]

ALLOWED_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE", "GET"})

_TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
_ERROR_SNIPPET_CHARS = 200
_MAX_CACHED_URLS = 4096
_JSON = "application/json"


def check_http_target(target: Mapping[str, Any], *, allow_private: bool) -> None:
    """Refuse an ``http`` target that can never be delivered, at task-create time.

    Checks ``url`` (see :func:`duetime.delivery.netguard.check_url`), ``method`` (one of
    :data:`ALLOWED_METHODS`, default POST) and ``headers`` (string names and values, no line
    breaks, none that duetime sets itself). Raises :class:`~duetime.errors.ValidationError`.
    """
    url = target.get("url")
    if not isinstance(url, str):
        raise ValidationError("url is required and must be a string", "target.url")
    check_url(url, allow_private=allow_private, field="target.url")
    method = target.get("method", "POST")
    if not isinstance(method, str) or method.upper() not in ALLOWED_METHODS:
        allowed = ", ".join(sorted(ALLOWED_METHODS))
        raise ValidationError(f"method must be one of {allowed}", "target.method")
    headers = target.get("headers") or {}
    if not isinstance(headers, Mapping):
        raise ValidationError("headers must be an object of strings", "target.headers")
    for name, value in headers.items():
        field = f"target.headers.{name}"
        if not isinstance(name, str) or not _TOKEN.match(name):
            raise ValidationError("header name is not a valid HTTP token", field)
        if not isinstance(value, str) or "\r" in value or "\n" in value or "\0" in value:
            raise ValidationError("header value must be a string without line breaks", field)
        if is_reserved_header(name):
            raise ValidationError(
                f"header {name} is set by duetime and cannot be overridden", field
            )


def parse_retry_after(value: str, now: float) -> float | None:
    """Seconds to wait from a ``Retry-After`` value (delta seconds or an HTTP-date), or ``None``.

    ``now`` is the current unix time, used for HTTP-dates; a date in the past means 0.
    """
    text = value.strip()
    if not text:
        return None
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = parsedate_to_datetime(text)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:  # RFC 9110 dates are GMT; a naive parse means "-0000"
            return None
        return max(0.0, when.timestamp() - now)
    if not math.isfinite(seconds) or seconds < 0:
        return None
    return seconds


def _result_json(body: bytes) -> str | None:
    if not body:
        return None
    chunk = body[:RESULT_LIMIT_BYTES]
    try:
        return orjson.dumps(orjson.loads(chunk)).decode()
    except orjson.JSONDecodeError:
        # Not JSON: the reply's text, cleaned like every recorded outside text.
        return orjson.dumps(clean(chunk.decode("utf-8", "replace"), RESULT_LIMIT_BYTES)).decode()


def _response(body: bytes) -> str | None:
    """The start of an answer's body for the attempt's ``response``: the first
    :data:`RESULT_LIMIT_BYTES` as text, cleaned like every recorded outside text."""
    if not body:
        return None
    return clean(body[:RESULT_LIMIT_BYTES].decode("utf-8", "replace"), RESULT_LIMIT_BYTES)


def _snippet(body: bytes) -> str:
    """The start of a failed reply for the attempt's error: one line, cleaned (a NUL or other
    control character in a reply must not reach the store, see :func:`duetime.text.clean`)."""
    text = " ".join(body[: _ERROR_SNIPPET_CHARS * 4].decode("utf-8", "replace").split())
    if len(text) > _ERROR_SNIPPET_CHARS:
        text = text[: _ERROR_SNIPPET_CHARS - 1] + "…"
    return clean(text, _ERROR_SNIPPET_CHARS * 4)


class _Refused(Exception):
    """A delivery that must fail at once without a retry."""


class WebhookDeliverer:
    """Delivers ``http`` tasks through one shared keep-alive pool (:mod:`duetime.http1`).

    ``allow_private`` lifts the private-address guard (``DUETIME_ALLOW_PRIVATE_TARGETS`` or dev
    mode). ``resolver`` replaces DNS (tests inject a fake one); whatever it answers is checked by
    the guard before anything is dialled. ``max_connections`` bounds open connections across all
    receivers, ``max_per_origin`` those to one receiver. ``clock`` supplies
    ``webhook-timestamp`` and "now" for ``Retry-After`` dates; it must be a real clock for
    receivers to accept the signatures.
    """

    def __init__(
        self,
        *,
        allow_private: bool,
        resolver: Resolver | None = None,
        max_connections: int = 512,
        max_per_origin: int = 64,
        user_agent: str = "duetime/0.1",
        clock: Clock | None = None,
    ) -> None:
        self._allow_private = allow_private
        self._resolver = resolver
        self._max_connections = max_connections
        self._max_per_origin = max_per_origin
        self._user_agent = user_agent
        self._clock: Clock = clock or SystemClock()
        self._pool: HttpPool | None = None
        self._closed = False
        # url text -> the URL to request, or the reason it is refused (parsed once per target).
        self._urls: dict[str, URL | str] = {}

    def _get_pool(self) -> HttpPool:
        # No cookies, no proxy from the environment, no redirects: we dial what we checked.
        pool = self._pool
        if pool is None:
            inner = self._resolver if self._resolver is not None else DefaultResolver()
            pool = self._pool = HttpPool(
                GuardedResolver(inner, allow_private=self._allow_private),
                max_connections=self._max_connections,
                max_per_origin=self._max_per_origin,
                body_limit=RESULT_LIMIT_BYTES + 1,
            )
        return pool

    def _url(self, text: object) -> URL:
        cached = self._urls.get(text) if isinstance(text, str) else None
        if cached is None:
            cached = self._parse_url(text)
            if len(self._urls) >= _MAX_CACHED_URLS:
                self._urls.clear()
            if isinstance(text, str):
                self._urls[text] = cached
        if isinstance(cached, str):
            raise _Refused(cached)
        return cached

    def _parse_url(self, text: object) -> URL | str:
        if not isinstance(text, str):
            return "target.url is missing"
        try:
            check_url(text, allow_private=True)
            url = URL(text)
        except (ValidationError, ValueError) as exc:
            return f"invalid target url: {getattr(exc, 'detail', exc)}"
        host = url.raw_host or ""
        ip = literal_address(host)
        if ip is None:
            return url  # a name: the guarded resolver checks what it resolves to
        if not self._allow_private:
            reason = is_forbidden_address(ip)
            if reason is not None:
                return f"target address {ip} is {reason}; {ALLOW_HINT}"
        if ip.version == 4 and host != str(ip):
            # 2130706433, 0x7f.1, 127.1...: dial the address we checked, spelled canonically.
            url = url.with_host(str(ip))
        return url

    def _headers(self, delivery: Delivery, body: bytes, extra: object) -> dict[str, str]:
        timestamp = int(self._clock.now().timestamp())
        try:
            signed = message_headers(delivery, body, timestamp)
        except SigningError as exc:
            raise _Refused(str(exc)) from exc
        headers = {"user-agent": self._user_agent, "content-type": _JSON, **signed}
        if not extra:
            return headers
        if not isinstance(extra, Mapping):
            raise _Refused("target.headers must be an object")
        merged: dict[str, str] = {}
        spelled: dict[str, str] = {}  # lower-cased name -> the spelling kept (last one wins)
        for name, value in extra.items():
            name = str(name)
            lower = name.lower()
            if is_reserved_header(lower):
                continue
            text = value if isinstance(value, str) else str(value)
            if "\r" in text or "\n" in text or "\0" in text or not _TOKEN.match(name):
                raise _Refused(f"target header {name!r} is not a valid HTTP header")
            if lower == "content-type":
                headers.pop("content-type", None)
            previous = spelled.get(lower)
            if previous is not None:
                del merged[previous]
            spelled[lower] = name
            merged[name] = text
        merged.update(headers)
        return merged

    async def deliver(self, delivery: Delivery) -> Outcome:
        """POST the task's payload to its target once and say how it went. Never raises."""
        try:
            return await self._deliver(delivery)
        except _Refused as exc:
            return Outcome(AttemptOutcome.FAILED, retryable=False, error=str(exc))
        except Exception as exc:  # a bug here must become an attempt, not kill the dispatcher
            return Outcome(
                AttemptOutcome.FAILED,
                retryable=True,
                error=f"internal delivery error: {type(exc).__name__}: {exc}"[:300],
            )

    async def _deliver(self, delivery: Delivery) -> Outcome:
        if self._closed:
            return Outcome(AttemptOutcome.FAILED, retryable=True, error="deliverer is closed")
        task = delivery.task
        target = task.target
        url = self._url(target.get("url"))
        method = target.get("method") or "POST"
        if method not in ALLOWED_METHODS:
            method = str(method).upper()
            if method not in ALLOWED_METHODS:
                raise _Refused(f"target method {method} is not allowed")
        body = task.payload_json.encode()
        headers = self._headers(delivery, body, target.get("headers"))
        pool = self._get_pool()
        try:
            response = await pool.request(
                method, url, headers.items(), body, timeout=task.timeout_seconds
            )
        except TimeoutError:
            return Outcome(
                AttemptOutcome.TIMED_OUT,
                retryable=True,
                error=f"timed out after {task.timeout_seconds:g}s",
            )
        except ConnectError as exc:
            if isinstance(exc.os_error, ForbiddenAddressError):
                return Outcome(AttemptOutcome.FAILED, retryable=False, error=str(exc.os_error))
            what = "cannot resolve" if isinstance(exc, ResolveError) else "cannot connect to"
            return Outcome(
                AttemptOutcome.FAILED,
                retryable=True,
                error=f"{what} {exc.host}:{exc.port}: {exc.reason}"[:300],
            )
        except HttpClientError as exc:
            detail = str(exc) or type(exc).__name__
            return Outcome(AttemptOutcome.FAILED, retryable=True, error=detail[:300])
        status = response.status
        if 200 <= status < 300:
            return Outcome(
                AttemptOutcome.SUCCEEDED,
                retryable=False,
                http_status=status,
                result_json=_result_json(response.body),
                response=_response(response.body),
            )
        return self._failure(status, response.headers, response.body)

    def _failure(self, status: int, headers: Mapping[str, str], answer: bytes) -> Outcome:
        """``headers`` have lower-cased names."""
        snippet = _snippet(answer)
        kept = _response(answer)
        if 300 <= status < 400:
            location = headers.get("location", "?")
            error = f"HTTP {status}: redirect to {location[:200]} not followed"
            return Outcome(
                AttemptOutcome.FAILED,
                retryable=False,
                http_status=status,
                error=error,
                response=kept,
            )
        error = f"HTTP {status}: {snippet}" if snippet else f"HTTP {status}"
        if status in (408, 429) or 500 <= status < 600:
            raw = headers.get("retry-after")
            retry_after = (
                parse_retry_after(raw, self._clock.now().timestamp()) if raw is not None else None
            )
            return Outcome(
                AttemptOutcome.FAILED,
                retryable=True,
                http_status=status,
                error=error,
                retry_after_seconds=retry_after,
                response=kept,
            )
        return Outcome(
            AttemptOutcome.FAILED, retryable=False, http_status=status, error=error, response=kept
        )

    async def close(self) -> None:
        """Close the pool. Idempotent; later deliveries fail (retryable) without a request."""
        self._closed = True
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()
