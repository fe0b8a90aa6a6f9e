"""AmqpDeliverer against the real RabbitMQ on 127.0.0.1: what a consumer receives, confirms,
unroutable and refused messages, a connection killed mid-burst, and the private-address guard."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
from broker_helpers import (
    ALLOW_HINT,
    SECRET,
    assert_failed,
    burst_with_cut,
    deliver_all,
    deliveries,
    failed,
    unique,
    until_delivered,
)
from standardwebhooks.webhooks import Webhook
from yarl import URL

from duetime.delivery.amqp import AmqpDeliverer, check_amqp_target
from duetime.delivery.netguard import StaticResolver
from duetime.errors import ValidationError
from duetime.testing.tcpproxy import TcpProxy


@pytest.fixture
async def deliverer() -> AsyncIterator[AmqpDeliverer]:
    d = AmqpDeliverer(allow_private=True)
    try:
        yield d
    finally:
        await d.close()


@pytest.fixture
async def queue(rabbit: Any) -> AsyncIterator[str]:
    name = unique("q")
    await rabbit.queue_declare(name, durable=False, auto_delete=False)
    try:
        yield name
    finally:
        await rabbit.queue_delete(name)


async def drain_all(channel: Any, queue: str) -> list[Any]:
    out = []
    while True:
        msg = await channel.basic_get(queue, no_ack=True)
        if type(msg.delivery).__name__ == "GetEmpty":
            return out
        out.append(msg)


async def test_a_burst_arrives_once_each_with_payload_and_signed_headers(
    deliverer: AmqpDeliverer, rabbit: Any, queue: str, amqp_url: str
) -> None:
    target = {
        "type": "amqp",
        "url": amqp_url,
        "exchange": "",
        "routing_key": queue,
        "headers": {"x-team": "billing"},
    }
    items = deliveries(target, 300)
    outcomes = await deliver_all(deliverer, items)
    assert all(o.succeeded for o in outcomes), [o for o in outcomes if not o.succeeded][:3]
    got = await drain_all(rabbit, queue)
    assert len(got) == 300
    by_key = {d.task.idempotency_key: d for d in items}
    verifier = Webhook(SECRET)
    for msg in got:
        props = msg.header.properties
        d = by_key.pop(props.message_id)
        headers = {k: v.decode() if isinstance(v, bytes) else v for k, v in props.headers.items()}
        assert orjson.loads(msg.body) == orjson.loads(d.task.payload_json)
        assert props.content_type == "application/json"
        assert props.delivery_mode == 2  # persistent by default
        assert headers["duetime-task-id"] == d.task.id
        assert headers["duetime-attempt"] == "1"
        assert headers["idempotency-key"] == d.task.idempotency_key
        assert headers["x-team"] == "billing"
        assert headers["webhook-id"] == f"msg_{d.task.id}"
        verifier.verify(
            msg.body,
            {k: headers[k] for k in ("webhook-id", "webhook-timestamp", "webhook-signature")},
        )
    assert by_key == {}


async def test_routed_through_a_named_exchange_and_transient_when_asked(
    deliverer: AmqpDeliverer, rabbit: Any, queue: str, amqp_url: str
) -> None:
    exchange = unique("x")
    await rabbit.exchange_declare(exchange, exchange_type="direct", auto_delete=False)
    try:
        await rabbit.queue_bind(queue, exchange, routing_key="due")
        target = {
            "type": "amqp",
            "url": amqp_url,
            "exchange": exchange,
            "routing_key": "due",
            "persistent": False,
        }
        outcomes = await deliver_all(deliverer, deliveries(target, 5))
        assert all(o.succeeded for o in outcomes)
        got = await drain_all(rabbit, queue)
        assert len(got) == 5
        assert {m.header.properties.delivery_mode for m in got} == {1}
    finally:
        await rabbit.exchange_delete(exchange)


async def test_unroutable_is_a_failed_attempt_not_a_silent_success(
    deliverer: AmqpDeliverer, rabbit: Any, queue: str, amqp_url: str
) -> None:
    good = {"type": "amqp", "url": amqp_url, "exchange": "", "routing_key": queue}
    lost = {**good, "routing_key": unique("nowhere")}
    items = deliveries(good, 3) + deliveries(lost, 2) + deliveries(good, 3)
    outcomes = await deliver_all(deliverer, items)
    assert [o.succeeded for o in outcomes] == [True] * 3 + [False] * 2 + [True] * 3
    assert_failed(outcomes[3], retryable=True, text="returned unroutable: NO_ROUTE")
    assert len(await drain_all(rabbit, queue)) == 6


async def test_a_missing_exchange_fails_only_its_own_tasks(
    deliverer: AmqpDeliverer, rabbit: Any, queue: str, amqp_url: str
) -> None:
    good = {"type": "amqp", "url": amqp_url, "exchange": "", "routing_key": queue}
    bad = {**good, "exchange": unique("missing")}
    items = deliveries(good, 2) + deliveries(bad, 2) + deliveries(good, 2)
    outcomes = await deliver_all(deliverer, items)
    assert [o.succeeded for o in outcomes] == [True, True, False, False, True, True]
    assert_failed(outcomes[2], retryable=True, text="NOT_FOUND - no exchange")
    assert len(await drain_all(rabbit, queue)) == 4


async def test_a_queue_over_its_limit_refuses_and_the_attempt_fails(
    deliverer: AmqpDeliverer, rabbit: Any, amqp_url: str
) -> None:
    name = unique("full")
    await rabbit.queue_declare(name, arguments={"x-max-length": 2, "x-overflow": "reject-publish"})
    try:
        target = {"type": "amqp", "url": amqp_url, "exchange": "", "routing_key": name}
        first = await deliver_all(deliverer, deliveries(target, 2))
        assert all(o.succeeded for o in first)
        over = await deliverer.deliver(deliveries(target, 1)[0])
        assert_failed(over, retryable=True, text="broker refused the message (basic.nack)")
        assert len(await drain_all(rabbit, name)) == 2
    finally:
        await rabbit.queue_delete(name)


async def test_a_connection_killed_mid_burst_loses_nothing(
    rabbit: Any, queue: str, amqp_url: str
) -> None:
    upstream = URL(amqp_url)
    proxy = TcpProxy(upstream.host or "127.0.0.1", upstream.port or 5672).start()
    deliverer = AmqpDeliverer(
        allow_private=True, max_batch=100, parallel=2
    )  # spread over round trips
    try:
        via = str(upstream.with_port(proxy.port))
        target = {"type": "amqp", "url": via, "exchange": "", "routing_key": queue}
        items = deliveries(target, 4000, timeout_seconds=5.0)

        def cut() -> None:
            proxy.cut()
            proxy.restore()

        outcomes = await burst_with_cut(deliverer, items, cut, after=300)
        first_failed = failed(items, outcomes)
        assert first_failed, "the connection was cut after the burst: nothing was in flight"
        assert all(o.retryable for o in outcomes if not o.succeeded)
        retried = await until_delivered(deliverer, first_failed)
    finally:
        await deliverer.close()
        proxy.close()
    got = await drain_all(rabbit, queue)
    ids = Counter(m.header.properties.message_id for m in got)
    assert set(ids) == {d.task.idempotency_key for d in items}  # nothing lost
    keys_retried = {d.task.idempotency_key for d in items if d.task.id in retried}
    assert {k for k, n in ids.items() if n > 1} <= keys_retried  # repeats only of retried ones


async def test_a_broker_that_is_down_is_a_retryable_attempt(deliverer: AmqpDeliverer) -> None:
    proxy = TcpProxy("127.0.0.1", 1).start()  # nothing listens on port 1 behind it
    try:
        target = {
            "type": "amqp",
            "url": f"amqp://guest:topsecret@127.0.0.1:{proxy.port}/",
            "routing_key": "q",
        }
        proxy.cut()  # and now nothing listens in front either
        outcome = await deliverer.deliver(deliveries(target, 1)[0])
    finally:
        proxy.close()
    assert_failed(outcome, retryable=True, text="amqp:")
    assert outcome.error is not None and "topsecret" not in outcome.error


async def test_wrong_credentials_fail_without_showing_the_password(
    deliverer: AmqpDeliverer, amqp_url: str
) -> None:
    url = str(URL(amqp_url).with_user("guest").with_password("n0t-the-pass"))
    outcome = await deliverer.deliver(
        deliveries({"type": "amqp", "url": url, "routing_key": "q"}, 1)[0]
    )
    assert_failed(outcome, retryable=True, text="ACCESS_REFUSED")
    assert outcome.error is not None and "n0t-the-pass" not in outcome.error


async def test_a_name_resolving_to_a_private_address_is_refused_before_any_socket(
    dials: list[Any],
) -> None:
    resolver = StaticResolver({"mq.internal": ["10.0.0.5"]})
    guarded = AmqpDeliverer(allow_private=False, resolver=resolver)
    try:
        target = {"type": "amqp", "url": "amqp://u:p@mq.internal:5672/", "routing_key": "q"}
        outcome = await guarded.deliver(deliveries(target, 1)[0])
        literal = {**target, "url": "amqp://u:p@10.0.0.7/"}
        outcome_literal = await guarded.deliver(deliveries(literal, 1)[0])
    finally:
        await guarded.close()
    assert_failed(
        outcome, retryable=False, text=f"target address 10.0.0.5 is private; {ALLOW_HINT}"
    )
    assert_failed(outcome_literal, retryable=False, text="target address 10.0.0.7 is private")
    assert resolver.lookups == ["mq.internal"]
    assert dials == []


async def test_a_name_is_dialled_at_the_checked_address(
    rabbit: Any, queue: str, amqp_url: str, dials: list[Any]
) -> None:
    port = URL(amqp_url).port or 5672
    resolver = StaticResolver({"rabbit.test": ["127.0.0.1"]})
    d = AmqpDeliverer(allow_private=True, resolver=resolver)
    try:
        url = str(URL(amqp_url).with_host("rabbit.test"))
        target = {"type": "amqp", "url": url, "routing_key": queue}
        outcome = await d.deliver(deliveries(target, 1)[0])
    finally:
        await d.close()
    assert outcome.succeeded, outcome
    assert ("127.0.0.1", port) in dials
    assert len(await drain_all(rabbit, queue)) == 1


async def test_a_timeout_is_a_retryable_timed_out_attempt(deliverer: AmqpDeliverer) -> None:
    # A listener that accepts and never speaks AMQP: the connect handshake never finishes.
    silent = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = silent.sockets[0].getsockname()[1]
    try:
        target = {"type": "amqp", "url": f"amqp://127.0.0.1:{port}/", "routing_key": "q"}
        outcome = await deliverer.deliver(deliveries(target, 1, timeout_seconds=0.3)[0])
    finally:
        silent.close()
    assert outcome.outcome.value == "timed_out" and outcome.retryable, outcome


def test_check_amqp_target() -> None:
    check_amqp_target(
        {"type": "amqp", "url": "amqp://mq.example/", "routing_key": "q"}, allow_private=False
    )
    for target, field in [
        ({"type": "amqp", "url": "amqp://10.0.0.1/", "routing_key": "q"}, "target.url"),
        ({"type": "amqp", "url": "amqp://localhost/", "routing_key": "q"}, "target.url"),
        ({"type": "amqp", "url": "http://mq.example/", "routing_key": "q"}, "target.url"),
        ({"type": "amqp", "url": "amqp://mq.example/"}, "target.routing_key"),
        ({"type": "amqp", "url": "amqp://mq.example/", "exchange": 5}, "target.exchange"),
        (
            {"type": "amqp", "url": "amqp://mq.example/", "exchange": "x", "persistent": "y"},
            "target.persistent",
        ),
    ]:
        with pytest.raises(ValidationError) as err:
            check_amqp_target(target, allow_private=False)
        assert err.value.field == field, target
    check_amqp_target(
        {"type": "amqp", "url": "amqp://127.0.0.1/", "routing_key": "q"}, allow_private=True
    )


async def test_tasks_due_together_go_out_as_one_batch_of_confirms(
    deliverer: AmqpDeliverer, rabbit: Any, queue: str, amqp_url: str
) -> None:
    batches: list[int] = []
    publish = deliverer.publish

    async def counted(conn: Any, batch: Any) -> None:
        batches.append(len(batch))
        await publish(conn, batch)

    deliverer.publish = counted  # type: ignore[method-assign]
    target = {"type": "amqp", "url": amqp_url, "routing_key": queue}
    outcomes = await deliver_all(deliverer, deliveries(target, 300))
    assert all(o.succeeded for o in outcomes)
    assert batches == [300]  # published together, confirms awaited together
    assert len(await drain_all(rabbit, queue)) == 300
