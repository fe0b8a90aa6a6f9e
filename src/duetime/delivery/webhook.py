"""HTTP webhook delivery (SPEC §4): the payload (or, for a task with ``parents_in_body``, the
payload and its parents' outcomes: :mod:`duetime.delivery.parents`), POSTed and signed per
Standard Webhooks.

Every request carries::

    content-type: application/json          (the user's target headers may change it)
    webhook-id: msg_<task id>               (stable across every attempt of the task)
    webhook-timestamp: <unix seconds>
    webhook-signature: v1,<b64> [v1,<b64>]  (one per live secret; absent if the tenant has none)
    duetime-task-id: <task id>
    duetime-attempt: <1-based attempt number>
    duetime-scheduled-for: <RFC 3339 UTC>   (only for schedule-made tasks; absent otherwise)
    duetime-payload-ref: <the task's payload_ref, as given>   (only when it has one)
    duetime-body: parents                   (only when the body carries the task's parents,
                                             see duetime.delivery.parents)
    idempotency-key: <the task's idempotency key, or its id>
    traceparent: <W3C trace context>         (when the task has one; see observe/tracing.py)
    authorization: Bearer <OIDC ID token>    (target "auth": {"oidc": ...}; delivery/identity.py)
    duetime-payload-url: <URL>               (a held payload; delivery/payload_access.py)

A target with ``"auth": {"mtls": "<name>"}`` is dialled presenting the tenant's client certificate
of that name, through a pool of its own (:mod:`duetime.delivery.outbound`).

Target headers never override the signature, ``duetime-*``, ``idempotency-key`` or framing
headers (they are dropped at delivery; :func:`check_http_target` refuses them at create time).

Credentials (:mod:`duetime.delivery.sealing`) are opened right before the request: sealed header
values, the URL's credential query values and its user info, which goes out as HTTP Basic auth
(``Authorization: Basic base64(user:password)``; the URL requested carries none). A target's
``auth: {"credential": name}`` adds the header of that named credential
(:mod:`duetime.delivery.credentials`), replacing a target header of the same name; a credential
that does not exist fails the attempt at once. Every credential sent is scrubbed (``***``) from
the error, answer and result the attempt keeps, should the receiver echo it.

Outcomes: 2xx succeeds and keeps the first 4 KiB of the answer as the result (every attempt with
an answer keeps its body's first 4 KiB as the attempt's ``response``); connection errors,
timeouts, 408, 429 and 5xx are retryable and honour ``Retry-After`` (seconds or HTTP-date); 3xx
(redirects are never followed) and other 4xx fail at once; so does an address refused by
:mod:`duetime.delivery.netguard`.
"""

from __future__ import annotations

import asyncio
import math
import re
import ssl
from collections import OrderedDict
from collections.abc import Mapping
from email.utils import parsedate_to_datetime
from typing import Any

import orjson
from aiohttp.resolver import DefaultResolver
from yarl import URL

from duetime.clock import Clock, SystemClock
from duetime.delivery.base import RESULT_LIMIT_BYTES, Delivery, Outcome
from duetime.delivery.credentials import credential_header, credential_values
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
from duetime.delivery.outbound import IdentityError, OutboundIdentity, Presented, needs_identity
from duetime.delivery.redact import basic_spelling, scrub_outcome, secrets_in
from duetime.delivery.sealing import SealError, TargetSealer
from duetime.errors import StoreUnavailable, ValidationError
from duetime.http1 import ConnectError, HttpClientError, HttpPool, ResolveError
from duetime.text import clean
from duetime.types import AttemptOutcome

__all__ = ["ALLOWED_METHODS", "WebhookDeliverer", "check_http_target", "parse_retry_after"]

ALLOWED_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE", "GET"})

_TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
_ERROR_SNIPPET_CHARS = 200
_MAX_CACHED_URLS = 4096
_MAX_TLS_POOLS = 64  # pools of client-certificate connections kept open (least recent closed)
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
        auth = target.get("auth")
        presents = isinstance(auth, Mapping) and "oidc" in auth  # an ID token is Authorization
        if presents and isinstance(name, str) and name.lower() == "authorization":
            raise ValidationError("target.auth sets Authorization: leave it out here", field)


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


class _Later(Exception):
    """A delivery that must fail now and be retried (a credential this node cannot open
    yet, an identity it cannot present yet): no request was sent."""


_Parsed = tuple[URL, str | None]
"""A URL to request, without user info, and the ``Authorization`` value its user info makes."""


class WebhookDeliverer:
    """Delivers ``http`` tasks through one shared keep-alive pool (:mod:`duetime.http1`).

    ``allow_private`` lifts the private-address guard (``DUETIME_ALLOW_PRIVATE_TARGETS`` or dev
    mode). ``resolver`` replaces DNS (tests inject a fake one); whatever it answers is checked by
    the guard before anything is dialled. ``max_connections`` bounds open connections across all
    receivers, ``max_per_origin`` those to one receiver. ``clock`` supplies
    ``webhook-timestamp`` and "now" for ``Retry-After`` dates; it must be a real clock for
    receivers to accept the signatures. ``identity`` presents what a target's ``auth`` asks
    for and held payloads' URLs (without it such tasks fail); ``ssl_context`` verifies
    ``https`` receivers (the system's trust store by default); ``sealer`` opens sealed
    credentials (None: targets are sent as stored, and a sealed value fails the attempt).
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
        identity: OutboundIdentity | None = None,
        ssl_context: ssl.SSLContext | None = None,
        sealer: TargetSealer | None = None,
    ) -> None:
        self._allow_private = allow_private
        self._resolver = resolver
        self._max_connections = max_connections
        self._max_per_origin = max_per_origin
        self._user_agent = user_agent
        self._clock: Clock = clock or SystemClock()
        self._pool: HttpPool | None = None
        self._identity = identity
        self._ssl_context = ssl_context
        self._tls_pools: OrderedDict[str, HttpPool] = OrderedDict()  # by Presented.tls_key
        self._closed = False
        self._sealer = sealer
        # url text (opened) -> the URL to request and its Basic auth, or the reason it is
        # refused (parsed once per target).
        self._urls: dict[str, _Parsed | str] = {}

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
                ssl_context=self._ssl_context,
            )
        return pool

    def _pool_for(self, presented: Presented | None) -> HttpPool:
        """The shared pool, or for a client certificate the pool of that certificate alone."""
        if presented is None or presented.tls is None or presented.tls_key is None:
            return self._get_pool()
        pool = self._tls_pools.get(presented.tls_key)
        if pool is not None:
            self._tls_pools.move_to_end(presented.tls_key)
            return pool
        inner = self._resolver if self._resolver is not None else DefaultResolver()
        pool = self._tls_pools[presented.tls_key] = HttpPool(
            GuardedResolver(inner, allow_private=self._allow_private),
            max_connections=self._max_per_origin,
            max_per_origin=self._max_per_origin,
            body_limit=RESULT_LIMIT_BYTES + 1,
            ssl_context=presented.tls,
        )
        while len(self._tls_pools) > _MAX_TLS_POOLS:
            _, old = self._tls_pools.popitem(last=False)
            asyncio.get_running_loop().create_task(old.close())
        return pool

    async def _present(self, delivery: Delivery) -> Presented | None:
        """What the target's ``auth`` (and a held payload) add; None when nothing."""
        task = delivery.task
        if not needs_identity(task.target, task.payload_ref):
            return None
        if self._identity is None:
            raise _Refused("this deliverer presents no identity (target.auth, held payload)")
        try:
            return await self._identity.present(delivery)
        except IdentityError as exc:
            if exc.retryable:
                raise _Later(str(exc)) from None
            raise _Refused(str(exc)) from None

    def _url(self, text: object) -> _Parsed:
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

    def _parse_url(self, text: object) -> _Parsed | str:
        if not isinstance(text, str):
            return "target.url is missing"
        try:
            check_url(text, allow_private=True)
            url = URL(text)
        except (ValidationError, ValueError) as exc:
            return f"invalid target url: {getattr(exc, 'detail', exc)}"
        basic = None
        if url.user is not None or url.password is not None:
            # User info goes out as Basic auth, never in the request line.
            basic = basic_spelling(url.user or "", url.password or "")
            url = url.with_user(None)
        host = url.raw_host or ""
        ip = literal_address(host)
        if ip is None:
            return url, basic  # a name: the guarded resolver checks what it resolves to
        if not self._allow_private:
            reason = is_forbidden_address(ip)
            if reason is not None:
                return f"target address {ip} is {reason}; {ALLOW_HINT}"
        if ip.version == 4 and host != str(ip):
            # 2130706433, 0x7f.1, 127.1...: dial the address we checked, spelled canonically.
            url = url.with_host(str(ip))
        return url, basic

    def _headers(
        self, delivery: Delivery, body: bytes, extra: object, presented: Presented | None = None
    ) -> dict[str, str]:
        timestamp = int(self._clock.now().timestamp())
        try:
            signed = message_headers(delivery, body, timestamp)
        except SigningError as exc:
            raise _Refused(str(exc)) from exc
        headers = {"user-agent": self._user_agent, "content-type": _JSON, **signed}
        if presented is not None:
            headers.update(presented.headers)
        if not extra:
            return headers
        if not isinstance(extra, Mapping):
            raise _Refused("target.headers must be an object")
        merged: dict[str, str] = {}
        spelled: dict[str, str] = {}  # lower-cased name -> the spelling kept (last one wins)
        for name, value in extra.items():
            name = str(name)
            lower = name.lower()
            if is_reserved_header(lower) or (presented is not None and lower in presented.headers):
                continue  # duetime's own, and what auth presents, are never overridden
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
        secrets: list[str] = []
        try:
            outcome = await self._deliver(delivery, secrets)
        except _Refused as exc:
            outcome = Outcome(AttemptOutcome.FAILED, retryable=False, error=str(exc))
        except _Later as exc:
            outcome = Outcome(AttemptOutcome.FAILED, retryable=True, error=str(exc))
        except Exception as exc:  # a bug here must become an attempt, not kill the dispatcher
            outcome = Outcome(
                AttemptOutcome.FAILED,
                retryable=True,
                error=f"internal delivery error: {type(exc).__name__}: {exc}"[:300],
            )
        return scrub_outcome(outcome, secrets)

    def _opened(self, delivery: Delivery) -> Mapping[str, Any]:
        """The task's target with its sealed credentials opened."""
        target = delivery.task.target
        if self._sealer is None:
            return target
        try:
            return self._sealer.open(target, delivery.task.tenant_id)
        except SealError as exc:  # another node's key: try again there
            raise _Later(str(exc)) from None

    async def _credential(self, delivery: Delivery, auth: object) -> tuple[str, str]:
        """The header of the named credential ``auth`` asks for."""
        name = auth.get("credential") if isinstance(auth, Mapping) else None
        if not isinstance(name, str):
            kinds = ", ".join(sorted(map(str, auth))) if isinstance(auth, Mapping) else "none"
            raise _Refused(f"target.auth is of a kind this node does not know ({kinds})")
        if delivery.credentials is None or self._sealer is None:
            raise _Refused("named credentials cannot be read by this deliverer")
        try:
            found = await delivery.credentials.get(delivery.task.tenant_id, name)
        except StoreUnavailable as exc:
            raise _Later(f"cannot read credential {name!r}: {exc}") from None
        if found is None:
            raise _Refused(
                f"credential {name!r} does not exist: put it (PUT /v1/credentials/{name}), "
                "then replay the task"
            )
        try:
            return credential_header(credential_values(self._sealer.ring, found))
        except SealError as exc:
            raise _Later(f"credential {name!r}: {exc}") from None

    async def _deliver(self, delivery: Delivery, secrets: list[str]) -> Outcome:
        if self._closed:
            return Outcome(AttemptOutcome.FAILED, retryable=True, error="deliverer is closed")
        task = delivery.task
        target = self._opened(delivery)
        secrets.extend(secrets_in(target))
        url, basic = self._url(target.get("url"))
        extra = target.get("headers")
        if basic is not None:
            secrets.append(basic)
            extra = {"Authorization": basic, **(extra or {})}  # an explicit header wins
        auth = target.get("auth")
        if isinstance(auth, Mapping) and "credential" in auth:
            name, value = await self._credential(delivery, auth)
            secrets.append(value)
            kept = {k: v for k, v in (extra or {}).items() if str(k).lower() != name.lower()}
            extra = {**kept, name: value}
        method = target.get("method") or "POST"
        if method not in ALLOWED_METHODS:
            method = str(method).upper()
            if method not in ALLOWED_METHODS:
                raise _Refused(f"target method {method} is not allowed")
        body = delivery.body()
        presented = await self._present(delivery)
        if presented is not None:
            secrets.extend(v for k, v in presented.headers.items() if k == "authorization")
        headers = self._headers(delivery, body, extra, presented)
        pool = self._pool_for(presented)
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
        while self._tls_pools:
            await self._tls_pools.popitem()[1].close()
