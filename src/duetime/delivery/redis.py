"""``redis`` targets: ``XADD`` the task to a Redis stream.

Target: ``{"type": "redis", "url": "redis://:pass@host:6379/0", "stream": "tasks", "maxlen":
100000}``.

The messages of a batch go out as one pipeline of ``XADD`` commands (no ``MULTI``: one refused
entry must not take the others with it) and each reply is checked on its own: an entry id means
Redis stored it; an error reply (``WRONGTYPE`` when the key is not a stream, ``OOM`` under
``maxmemory``, a read-only replica...) fails that task's attempt, retryable, with Redis's text.
A success is never reported for a write Redis refused. A connection lost mid-pipeline fails the
whole batch (some entries may have been stored: the retry writes them again with the same
``idempotency-key`` field, which is how a consumer drops repeats).

Each entry's fields are ``payload`` (the task's JSON payload) and the Standard Webhooks-style
headers of SPEC §4 (``webhook-id``, ``webhook-timestamp``, ``webhook-signature``,
``duetime-task-id``, ``duetime-attempt``, ``idempotency-key``, ``duetime-scheduled-for``).
``maxlen`` trims the stream approximately (``MAXLEN ~``), the cheap form Redis recommends.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import redis.asyncio as aioredis
import redis.exceptions
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from yarl import URL

from duetime.delivery.brokers import (
    BrokerDeliverer,
    BrokerError,
    Message,
    Refused,
    any_text,
    check_broker_url,
    small_count,
)
from duetime.errors import ValidationError
from duetime.target_types import TargetType

__all__ = ["RedisDeliverer", "check_redis_target"]

SCHEMES = TargetType.REDIS.spec.schemes
MAX_STREAM_BYTES = 1024
_CONNECT_TIMEOUT = 10.0


URL_PARAMS = {
    "db": small_count,
    "username": any_text,
    "password": any_text,
    "protocol": lambda value: value in ("2", "3"),
    "client_name": any_text,
}
"""The query parameters a ``redis`` URL may carry (docs/api.md "Broker delivery"); a
``password`` is sealed like the URL's own. redis-py reads others too (``ssl_keyfile``,
``ssl_ca_certs``: files on the node; timeouts and pool sizes duetime sets itself), which
duetime refuses."""


def check_redis_target(target: Mapping[str, Any], *, allow_private: bool) -> None:
    """Refuse, at create time, a ``redis`` target that can never be delivered (the URL guard of
    webhooks, a query parameter not in :data:`URL_PARAMS`, a stream name, a positive integer
    ``maxlen``). Raises ``ValidationError``."""
    check_broker_url(
        target.get("url"), schemes=SCHEMES, allow_private=allow_private, params=URL_PARAMS
    )
    _parse(target, field_errors=True)


@dataclass(frozen=True, slots=True)
class _Target:
    stream: str
    maxlen: int | None


def _parse(target: Mapping[str, Any], *, field_errors: bool = False) -> _Target:
    def bad(message: str, name: str) -> Exception:
        if field_errors:
            return ValidationError(message, f"target.{name}")
        return Refused(f"target.{name}: {message}")

    stream = target.get("stream")
    if not isinstance(stream, str) or not stream or len(stream.encode()) > MAX_STREAM_BYTES:
        raise bad("must be a non-empty key of at most 1024 bytes", "stream")
    maxlen = target.get("maxlen")
    bad_int = isinstance(maxlen, bool) or not isinstance(maxlen, int) or maxlen < 1
    if maxlen is not None and bad_int:
        raise bad("must be a positive integer", "maxlen")
    return _Target(stream, maxlen)


class RedisDeliverer(BrokerDeliverer["aioredis.Redis"]):
    """Delivers ``redis`` tasks (needs the ``duetime[redis]`` extra: redis-py's asyncio API)."""

    kind = "redis"
    schemes = SCHEMES
    tls_schemes = ("rediss",)

    def parse_target(self, target: Mapping[str, Any]) -> _Target:
        return _parse(target)

    async def connect(self, url: str, host: str) -> aioredis.Redis:
        # redis-py's own retries are off: a failed batch is retried by the task's policy, once.
        client: aioredis.Redis = aioredis.Redis.from_url(
            str(URL(url).with_host(host)),
            socket_connect_timeout=_CONNECT_TIMEOUT,
            retry=Retry(NoBackoff(), 0),
        )
        await client.ping()
        return client

    def is_open(self, conn: aioredis.Redis) -> bool:
        return True  # its pool dials again after a lost connection; a failed batch resets it

    async def disconnect(self, conn: aioredis.Redis) -> None:
        await conn.aclose()

    async def publish(self, conn: aioredis.Redis, batch: Sequence[Message]) -> None:
        pipe = conn.pipeline(transaction=False)
        for m in batch:
            target: _Target = m.target
            fields: dict[str | bytes, str | bytes] = {"payload": m.body}
            fields.update(m.headers)
            pipe.xadd(
                target.stream,
                fields,  # type: ignore[arg-type]  # redis-py's stub wants a narrower mapping
                maxlen=target.maxlen,
                approximate=True,
            )
        replies = await pipe.execute(raise_on_error=False)
        for m, reply in zip(batch, replies, strict=True):
            if isinstance(reply, redis.exceptions.ConnectionError):
                raise reply  # the link drops the connection; the unsettled messages retry
            if isinstance(reply, (bytes, str)) and reply:
                m.settle(None)  # an entry id: Redis stored it
            elif isinstance(reply, BaseException):
                m.settle(BrokerError(f"redis: {reply}"))
            else:
                m.settle(BrokerError(f"redis: unexpected XADD reply {reply!r}"))
