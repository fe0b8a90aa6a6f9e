"""``amqp`` targets: publish to RabbitMQ (or any AMQP 0-9-1 broker) with publisher confirms.

Target: ``{"type": "amqp", "url": "amqp://user:pass@host:5672/vhost", "exchange": "tasks",
"routing_key": "due", "headers": {...}, "persistent": true}``. ``exchange`` ``""`` is the default
exchange (the routing key is then a queue name).

Every message is published ``mandatory`` on a channel in confirm mode, so a task succeeds only on
the broker's ``basic.ack``: a message no queue is bound to receive (``basic.return``) and a
``basic.nack`` (a queue over its ``x-max-length`` with ``reject-publish``, say) are failed,
retryable attempts carrying the broker's reply text. Properties: ``message_id`` = the task's
idempotency key (or its id), ``content_type`` ``application/json``, ``delivery_mode`` 2 when
``persistent`` (the default) and the Standard Webhooks-style headers of SPEC §4 plus the target's
own ``headers`` as the message's header table.

One connection per (tenant, broker URL) on this node (:mod:`duetime.delivery.brokers`), with a
small pool of confirm-mode channels that batches share. An exchange is checked once per
connection with a passive declare on a throwaway channel, so a task naming a missing exchange
fails on its own instead of closing the channel the other messages of its batch are on.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import aiormq
from aiormq.abc import AbstractChannel, AbstractConnection
from pamqp import commands as spec
from yarl import URL

from duetime.delivery.brokers import (
    BrokerDeliverer,
    BrokerError,
    Message,
    Refused,
    any_text,
    check_broker_url,
    send_error,
    small_count,
)
from duetime.errors import ValidationError
from duetime.target_types import TargetType

__all__ = ["AmqpDeliverer", "check_amqp_target"]

SCHEMES = TargetType.AMQP.spec.schemes
CHANNELS_PER_CONNECTION = 4
_MAX_NAME = 255
_CONNECT_TIMEOUT = 10.0


URL_PARAMS = {"heartbeat": small_count, "name": any_text}
"""The query parameters an ``amqp`` URL may carry (docs/api.md "Broker delivery"): the heartbeat
interval in seconds and the connection's name. aiormq reads others too (``cafile``,
``keyfile``, ``certfile``: files on the node), which duetime refuses."""


def check_amqp_target(target: Mapping[str, Any], *, allow_private: bool) -> None:
    """Refuse, at create time, an ``amqp`` target that can never be delivered (the URL guard of
    webhooks, a query parameter not in :data:`URL_PARAMS`, an exchange or routing key, string
    header values). Raises ``ValidationError``."""
    check_broker_url(
        target.get("url"), schemes=SCHEMES, allow_private=allow_private, params=URL_PARAMS
    )
    _parse(target, field_errors=True)


@dataclass(frozen=True, slots=True)
class _Target:
    exchange: str
    routing_key: str
    persistent: bool
    headers: Mapping[str, str]


def _parse(target: Mapping[str, Any], *, field_errors: bool = False) -> _Target:
    def bad(message: str, name: str) -> Exception:
        if field_errors:
            return ValidationError(message, f"target.{name}")
        return Refused(f"target.{name}: {message}")

    exchange = target.get("exchange") or ""
    routing_key = target.get("routing_key") or ""
    if not isinstance(exchange, str) or len(exchange.encode()) > _MAX_NAME:
        raise bad("must be a string of at most 255 bytes", "exchange")
    if not isinstance(routing_key, str) or len(routing_key.encode()) > _MAX_NAME:
        raise bad("must be a string of at most 255 bytes", "routing_key")
    if not exchange and not routing_key:
        raise bad("give an exchange or a routing_key", "routing_key")
    persistent = target.get("persistent", True)
    if not isinstance(persistent, bool):
        raise bad("must be true or false", "persistent")
    headers = target.get("headers") or {}
    if not isinstance(headers, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in headers.items()
    ):
        raise bad("must be an object of strings", "headers")
    return _Target(exchange, routing_key, persistent, dict(headers))


@dataclass(slots=True)
class _Connection:
    conn: AbstractConnection
    channels: list[AbstractChannel]
    turn: itertools.count[int] = field(default_factory=itertools.count)
    exchanges: set[str] = field(default_factory=lambda: {""})


class AmqpDeliverer(BrokerDeliverer[_Connection]):
    """Delivers ``amqp`` tasks with publisher confirms and mandatory routing (needs the
    ``duetime[amqp]`` extra: aiormq, the AMQP client aio-pika is built on)."""

    kind = "amqp"
    schemes = SCHEMES
    tls_schemes = ("amqps",)

    def parse_target(self, target: Mapping[str, Any]) -> _Target:
        return _parse(target)

    async def connect(self, url: str, host: str) -> _Connection:
        dial = URL(url).with_host(host)
        conn = await asyncio.wait_for(aiormq.connect(dial), _CONNECT_TIMEOUT)
        try:
            channels = [
                await conn.channel(publisher_confirms=True, on_return_raises=True)
                for _ in range(CHANNELS_PER_CONNECTION)
            ]
        except BaseException:
            await conn.close()
            raise
        return _Connection(conn, channels)

    def is_open(self, conn: _Connection) -> bool:
        return not conn.conn.is_closed

    async def disconnect(self, conn: _Connection) -> None:
        await conn.conn.close()

    async def _channel(self, conn: _Connection) -> AbstractChannel:
        """The next pooled channel; one the broker closed is replaced."""
        index = next(conn.turn) % len(conn.channels)
        channel = conn.channels[index]
        if channel.is_closed:
            channel = await conn.conn.channel(publisher_confirms=True, on_return_raises=True)
            conn.channels[index] = channel
        return channel

    async def _missing_exchanges(self, conn: _Connection, names: set[str]) -> dict[str, str]:
        """Passive-declare each unknown exchange on a throwaway channel: name -> broker error."""
        missing: dict[str, str] = {}
        for name in names - conn.exchanges:
            probe = await conn.conn.channel(publisher_confirms=False)
            try:
                await probe.exchange_declare(exchange=name, passive=True)
            except aiormq.exceptions.ChannelClosed as exc:
                missing[name] = _reply_text(exc)
                continue
            conn.exchanges.add(name)
            await probe.close()
        return missing

    async def publish(self, conn: _Connection, batch: Sequence[Message]) -> None:
        missing = await self._missing_exchanges(conn, {m.target.exchange for m in batch})
        # Spread the batch over the pooled channels: each channel serialises its publishes.
        channels = [await self._channel(conn) for _ in conn.channels]
        sends: list[asyncio.Future[Any]] = []
        for i, m in enumerate(batch):
            channel = channels[i % len(channels)]
            target: _Target = m.target
            if target.exchange in missing:
                m.settle(BrokerError(f"amqp: {missing[target.exchange]}"))
                continue
            headers: dict[str, Any] = dict(target.headers)
            headers.update(m.headers)
            properties = spec.Basic.Properties(
                content_type="application/json",
                delivery_mode=2 if target.persistent else 1,
                message_id=m.key,
                app_id="duetime",
                headers=headers,
            )
            send = asyncio.ensure_future(
                channel.basic_publish(
                    m.body,
                    exchange=target.exchange,
                    routing_key=target.routing_key,
                    properties=properties,
                    mandatory=True,
                )
            )
            send.add_done_callback(functools.partial(_confirmed, m))
            sends.append(send)
        if sends:
            await asyncio.wait(sends)


def _confirmed(message: Message, send: asyncio.Future[Any]) -> None:
    """Settle ``message`` from its publish: ``basic.ack`` confirms it; a return, a nack, a
    closed channel or a lost connection fail it (retryable) with the broker's words."""
    exc = send_error(send)
    if exc is None:
        frame = send.result()
        if not isinstance(frame, spec.Basic.Ack):
            exc = BrokerError(f"amqp: broker did not confirm the message ({frame!r})")
    elif isinstance(exc, aiormq.exceptions.PublishError):
        exc = BrokerError(f"amqp: message returned unroutable: {_returned(exc)}")
    elif isinstance(exc, aiormq.exceptions.DeliveryError):
        exc = BrokerError("amqp: broker refused the message (basic.nack)")
    elif isinstance(exc, aiormq.exceptions.ChannelClosed):
        exc = BrokerError(f"amqp: {_reply_text(exc)}")
    elif not isinstance(exc, BrokerError):  # the connection failed: the link redials
        exc = BrokerError(f"amqp: {type(exc).__name__}: {exc}")
    message.settle(exc)


def _reply_text(exc: BaseException) -> str:
    """The broker's reply text (``NOT_FOUND - no exchange 'x' in vhost '/'``)."""
    return str(exc) or type(exc).__name__


def _returned(exc: aiormq.exceptions.PublishError) -> str:
    frame = getattr(exc, "frame", None)
    text = getattr(frame, "reply_text", None)
    exchange = getattr(frame, "exchange", "")
    key = getattr(frame, "routing_key", "")
    return f"{text or 'NO_ROUTE'} (exchange {exchange!r}, routing key {key!r})"
