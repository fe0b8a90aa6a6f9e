"""``nats`` targets: publish to NATS, through JetStream (with its ack) unless told otherwise.

Target: ``{"type": "nats", "url": "nats://user:pass@host:4222", "subject": "tasks.due",
"jetstream": true}`` (``nats://token@host`` for token auth).

With ``jetstream`` (the default) every message is a JetStream publish and the task succeeds only
on the stream's ack. ``Nats-Msg-Id`` is the task's idempotency key (or its id), so the stream's
duplicate window drops the repeat a retry after a lost ack would otherwise store twice. A subject
no stream captures has no responder: that is a failed, retryable attempt ("no stream for
subject"), never a silent success; so is a stream's refusal (over ``max_msg_size`` or
``max_msgs`` with ``discard: new``...), with the server's text. ``jetstream: false`` is a core
NATS publish followed by a flush (a PING the server answers after reading the batch): the server
got it, but nothing says anyone was listening.

Headers are the Standard Webhooks-style headers of SPEC §4. The connection is duetime's own
(:mod:`duetime.delivery.brokers`): nats-py's reconnect loop is off, so a dropped connection is
dialled again, through the private-address guard, by the next batch; servers a cluster
advertises are never dialled.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import nats.errors
import nats.js.errors
from nats.aio.client import Client
from nats.js import JetStreamContext
from yarl import URL

from duetime.delivery.brokers import (
    BrokerDeliverer,
    BrokerError,
    Message,
    Refused,
    check_broker_url,
    send_error,
)
from duetime.errors import ValidationError
from duetime.target_types import TargetType

__all__ = ["NatsDeliverer", "check_nats_target"]

SCHEMES = TargetType.NATS.spec.schemes
HEADER_MSG_ID = "Nats-Msg-Id"
_CONNECT_TIMEOUT = 10
_RETRY_WAIT = 0.1


URL_PARAMS: dict[str, Callable[[str], bool]] = {}
"""The query parameters a ``nats`` URL may carry: none (credentials go in its user info)."""


def check_nats_target(target: Mapping[str, Any], *, allow_private: bool) -> None:
    """Refuse, at create time, a ``nats`` target that can never be delivered (the URL guard of
    webhooks, any query parameter, a literal subject, a boolean ``jetstream``). Raises
    ``ValidationError``."""
    check_broker_url(
        target.get("url"), schemes=SCHEMES, allow_private=allow_private, params=URL_PARAMS
    )
    _parse(target, field_errors=True)


@dataclass(frozen=True, slots=True)
class _Target:
    subject: str
    jetstream: bool


def _parse(target: Mapping[str, Any], *, field_errors: bool = False) -> _Target:
    def bad(message: str, name: str) -> Exception:
        if field_errors:
            return ValidationError(message, f"target.{name}")
        return Refused(f"target.{name}: {message}")

    subject = target.get("subject")
    if (
        not isinstance(subject, str)
        or not subject
        or any(c.isspace() for c in subject)
        or any(token in ("", "*", ">") for token in subject.split("."))
    ):
        raise bad("must be a literal subject (no spaces, wildcards or empty tokens)", "subject")
    jetstream = target.get("jetstream", True)
    if not isinstance(jetstream, bool):
        raise bad("must be true or false", "jetstream")
    return _Target(subject, jetstream)


@dataclass(slots=True)
class _Connection:
    client: Client
    js: JetStreamContext


class NatsDeliverer(BrokerDeliverer[_Connection]):
    """Delivers ``nats`` tasks (needs the ``duetime[nats]`` extra: nats-py)."""

    kind = "nats"
    schemes = SCHEMES
    tls_schemes = ("tls",)

    def parse_target(self, target: Mapping[str, Any]) -> _Target:
        return _parse(target)

    async def connect(self, url: str, host: str) -> _Connection:
        parsed = URL(url)
        server = str(parsed.with_host(host).with_user(None))
        client = Client()
        try:
            await client.connect(
                servers=[server],
                # nats://user:password@host, or nats://token@host for token auth.
                user=parsed.user if parsed.password else None,
                password=parsed.password or None,
                token=parsed.user if parsed.user and not parsed.password else None,
                # duetime redials (through the guard) itself; nats-py only tries this server
                # twice, briefly, instead of its minutes-long reconnect loop.
                allow_reconnect=False,
                max_reconnect_attempts=1,
                reconnect_time_wait=_RETRY_WAIT,  # type: ignore[arg-type]  # seconds, any float
                connect_timeout=_CONNECT_TIMEOUT,
                name="duetime",
                error_cb=_quiet,
                closed_cb=_quiet_closed,
                disconnected_cb=_quiet_closed,
            )
        except nats.errors.NoServersError:
            reason = client.last_error or "no answer"
            raise BrokerError(f"nats: cannot connect to {host}: {reason}") from None
        return _Connection(client, client.jetstream())

    def is_open(self, conn: _Connection) -> bool:
        return conn.client.is_connected

    async def disconnect(self, conn: _Connection) -> None:
        if not conn.client.is_closed:
            await conn.client.close()

    async def publish(self, conn: _Connection, batch: Sequence[Message]) -> None:
        core = [m for m in batch if not m.target.jetstream]
        if core:
            sent = []
            for m in core:
                try:
                    await conn.client.publish(m.target.subject, m.body, headers=m.headers)
                except nats.errors.MaxPayloadError:
                    limit = conn.client.max_payload
                    m.settle(BrokerError(f"nats: message is over the server's {limit}-byte limit"))
                    continue
                sent.append(m)
            # The server answers the flush's PING after it has read every publish before it.
            await conn.client.flush(timeout=max(1, int(core[0].delivery.task.timeout_seconds)))
            for m in sent:
                m.settle(None)
        sends: list[asyncio.Future[Any]] = []
        for m in batch:
            if not m.target.jetstream:
                continue
            send = asyncio.ensure_future(
                conn.js.publish(
                    m.target.subject,
                    m.body,
                    timeout=m.delivery.task.timeout_seconds,
                    headers={**m.headers, HEADER_MSG_ID: m.key},
                )
            )
            send.add_done_callback(functools.partial(_acked, m))
            sends.append(send)
        if sends:
            await asyncio.wait(sends)


def _acked(message: Message, send: asyncio.Future[Any]) -> None:
    """Settle ``message`` from its JetStream publish: the stream's ack confirms it."""
    exc = send_error(send)
    if isinstance(exc, nats.js.errors.NoStreamResponseError):
        exc = BrokerError(f"nats: no stream for subject {message.target.subject!r}")
    elif isinstance(exc, nats.js.errors.APIError):
        exc = BrokerError(f"nats: stream refused the message: {exc.description}")
    elif exc is not None and not isinstance(exc, BrokerError):
        exc = BrokerError(f"nats: {type(exc).__name__}: {exc}")  # connection lost, no ack in time
    message.settle(exc)


async def _quiet(exc: Exception) -> None:
    """nats-py logs every error by default; failures reach the task's attempt instead."""


async def _quiet_closed() -> None:
    return None
