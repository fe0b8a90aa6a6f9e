"""What the broker deliverers share: passwords hidden from responses and errors, the message
headers, and the bound on open connections per node."""

from __future__ import annotations

import pytest
from broker_helpers import deliver_all, deliveries, unique

from duetime.delivery.base import Delivery
from duetime.delivery.headers import message_headers
from duetime.delivery.redact import public_target, redact_url, scrub
from duetime.delivery.redis import RedisDeliverer
from duetime.testing.fakes import running_task


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("amqp://guest:guest@127.0.0.1:5672/", "amqp://guest:***@127.0.0.1:5672/"),
        ("redis://:s3cret@cache:6379/0", "redis://:***@cache:6379/0"),
        ("nats://s3cr3t-token@n:4222", "nats://***@n:4222"),  # NATS reads a lone user as a token
        ("amqp://guest@mq/", "amqp://guest@mq/"),  # elsewhere a user name alone is no secret
        ("redis://cache:6379/0", "redis://cache:6379/0"),
        ("amqps://u:p%40ss@mq/vh", "amqps://u:***@mq/vh"),
    ],
)
def test_redact_url(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_public_target_hides_only_broker_passwords() -> None:
    amqp = {"type": "amqp", "url": "amqp://u:pw@mq/", "routing_key": "q"}
    assert public_target(amqp) == {**amqp, "url": "amqp://u:***@mq/"}
    assert amqp["url"] == "amqp://u:pw@mq/"  # the stored target is untouched
    http = {"type": "http", "url": "https://u:pw@hook.example/"}
    assert public_target(http) is http


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
