"""What the broker deliverers share: passwords hidden from responses and errors, the message
headers, the bound on open connections per node, and recovery after a broker restart."""

from __future__ import annotations

from typing import Any

import pytest
from broker_helpers import deliver_all, deliveries, unique
from nats.js.api import StreamConfig
from yarl import URL

from duetime.delivery.amqp import AmqpDeliverer
from duetime.delivery.base import Delivery
from duetime.delivery.headers import message_headers
from duetime.delivery.nats import NatsDeliverer
from duetime.delivery.redact import public_target, redact_url, scrub
from duetime.delivery.redis import RedisDeliverer
from duetime.testing.fakes import running_task
from duetime.testing.tcpproxy import TcpProxy


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("amqp://guest:guest@127.0.0.1:5672/", "amqp://guest:***@127.0.0.1:5672/"),
        ("redis://:s3cret@cache:6379/0", "redis://:***@cache:6379/0"),
        ("nats://s3cr3t-token@n:4222", "nats://***@n:4222"),  # NATS reads a lone user as a token
        ("amqp://guest@mq/", "amqp://guest@mq/"),  # elsewhere a user name alone is no secret
        ("redis://cache:6379/0", "redis://cache:6379/0"),
        ("redis://cache:6379/0?password=s3cret&db=1", "redis://cache:6379/0?password=***&db=1"),
        ("amqps://u:p%40ss@mq/vh", "amqps://u:***@mq/vh"),
    ],
)
def test_redact_url(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_public_target_hides_credentials_and_leaves_the_stored_target_alone() -> None:
    amqp = {"type": "amqp", "url": "amqp://u:pw@mq/", "routing_key": "q"}
    assert public_target(amqp) == {**amqp, "url": "amqp://u:***@mq/"}
    assert amqp["url"] == "amqp://u:pw@mq/"  # the stored target is untouched
    http = {"type": "http", "url": "https://u:pw@hook.example/"}
    assert public_target(http) == {**http, "url": "https://u:***@hook.example/"}
    plain = {"type": "http", "url": "https://hook.example/"}
    assert public_target(plain) is plain


def test_scrub_removes_every_spelling_of_the_password_as_a_token() -> None:
    url = "amqp://u:p%40ss@mq/"
    assert scrub("login p@ss refused (p%40ss)", url) == "login *** refused (***)"
    assert scrub("target is private", "amqp://u:p@mq/") == "target is private"
    assert scrub("password p refused", "amqp://u:p@mq/") == "password *** refused"


def test_message_headers_match_the_webhook_set() -> None:
    task = running_task({"type": "redis"}, idempotency_key="k-1")
    headers = message_headers(Delivery(task, 3, ()), b"{}", 1_700_000_000)
    assert headers == {
        "webhook-id": f"msg_{task.id}",
        "webhook-timestamp": "1700000000",
        "duetime-task-id": task.id,
        "duetime-attempt": "3",
        "idempotency-key": "k-1",
    }


async def test_idle_connections_beyond_the_bound_are_closed(redis_url: str) -> None:
    import redis.asyncio as aioredis

    d = RedisDeliverer(allow_private=True, max_links=2)
    stream = unique("s")
    urls = [redis_url.rsplit("/", 1)[0] + f"/{db}" for db in range(3)]
    try:
        for url in urls:
            target = {"type": "redis", "url": url, "stream": stream}
            assert all(o.succeeded for o in await deliver_all(d, deliveries(target, 2)))
        # The least recently used connection (db 0) was closed to stay within two.
        assert [url for _, url in d._links] == urls[1:]
    finally:
        await d.close()
        for url in urls:
            client = aioredis.Redis.from_url(url)
            await client.delete(stream)
            await client.aclose()


async def test_a_broker_that_goes_away_and_comes_back_is_used_again(
    amqp_url: str, nats_url: str, redis_url: str, rabbit: Any, jetstream: Any, redis_client: Any
) -> None:
    """A broker restart, played by a proxy that stops listening and drops its connections:
    attempts during the outage fail retryable; after it, the same deliverer publishes again."""
    queue, key = unique("q"), unique("s")
    stream = unique("st").replace("-", "_")
    await rabbit.queue_declare(queue, auto_delete=False)
    await jetstream.add_stream(StreamConfig(name=stream, subjects=[f"{stream}.>"]))
    cases: list[tuple[Any, Any, dict[str, Any]]] = []
    try:
        for cls, url, target in (
            (AmqpDeliverer, amqp_url, {"type": "amqp", "routing_key": queue}),
            (NatsDeliverer, nats_url, {"type": "nats", "subject": f"{stream}.due"}),
            (RedisDeliverer, redis_url, {"type": "redis", "stream": key}),
        ):
            upstream = URL(url)
            proxy = TcpProxy(upstream.host or "127.0.0.1", upstream.port or 0).start()
            target["url"] = str(upstream.with_port(proxy.port))
            cases.append((cls(allow_private=True), proxy, target))
        for deliverer, proxy, target in cases:
            before = await deliver_all(deliverer, deliveries(target, 5))
            assert all(o.succeeded for o in before), before
            proxy.cut()  # down: the live connection drops, new ones are refused
            during = await deliver_all(deliverer, deliveries(target, 5, timeout_seconds=3.0))
            assert all(not o.succeeded and o.retryable for o in during), during
            proxy.restore()  # back up
            after = await deliver_all(deliverer, deliveries(target, 5))
            assert all(o.succeeded for o in after), after
        declared = await rabbit.queue_declare(queue, passive=True)
        assert declared.message_count == 10
        assert (await jetstream.stream_info(stream)).state.messages == 10
        assert await redis_client.xlen(key) == 10
    finally:
        for deliverer, proxy, _ in cases:
            await deliverer.close()
            proxy.close()
        await rabbit.queue_delete(queue)
        await jetstream.delete_stream(stream)
        await redis_client.delete(key)
