"""RedisDeliverer against the real Redis on 127.0.0.1: stream entries and their fields, trimming,
refused writes, a connection killed mid-burst (through a proxy and by ``CLIENT KILL``), and the
private-address guard."""

from __future__ import annotations

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

from duetime.delivery.netguard import StaticResolver
from duetime.delivery.redis import RedisDeliverer, check_redis_target
from duetime.errors import ValidationError
from duetime.testing.tcpproxy import TcpProxy


@pytest.fixture
async def deliverer() -> AsyncIterator[RedisDeliverer]:
    d = RedisDeliverer(allow_private=True)
    try:
        yield d
    finally:
        await d.close()


@pytest.fixture
async def stream(redis_client: Any) -> AsyncIterator[str]:
    name = unique("stream")
    try:
        yield name
    finally:
        await redis_client.delete(name)


def fields(entry: Any) -> dict[str, str]:
    return {k.decode(): v.decode() for k, v in entry[1].items()}


async def test_a_burst_is_added_once_each_with_payload_and_signed_fields(
    deliverer: RedisDeliverer, redis_client: Any, stream: str, redis_url: str
) -> None:
    target = {"type": "redis", "url": redis_url, "stream": stream}
    items = deliveries(target, 300)
    outcomes = await deliver_all(deliverer, items)
    assert all(o.succeeded for o in outcomes), [o for o in outcomes if not o.succeeded][:3]
    entries = await redis_client.xrange(stream)
    assert len(entries) == 300
    by_id = {d.task.id: d for d in items}
    verifier = Webhook(SECRET)
    for entry in entries:
        f = fields(entry)
        d = by_id.pop(f["duetime-task-id"])
        assert orjson.loads(f["payload"]) == orjson.loads(d.task.payload_json)
        assert f["idempotency-key"] == d.task.idempotency_key
        assert f["duetime-attempt"] == "1"
        verifier.verify(
            f["payload"],
            {k: f[k] for k in ("webhook-id", "webhook-timestamp", "webhook-signature")},
        )
    assert by_id == {}


async def test_maxlen_trims_the_stream(
    deliverer: RedisDeliverer, redis_client: Any, stream: str, redis_url: str
) -> None:
    target = {"type": "redis", "url": redis_url, "stream": stream, "maxlen": 10}
    for _ in range(5):  # MAXLEN ~ trims whole macro nodes (100 entries by default): go past it
        outcomes = await deliver_all(deliverer, deliveries(target, 100))
        assert all(o.succeeded for o in outcomes)
    length = await redis_client.xlen(stream)
    assert 10 <= length < 500


async def test_a_write_redis_refuses_fails_only_that_task(
    deliverer: RedisDeliverer, redis_client: Any, stream: str, redis_url: str
) -> None:
    not_a_stream = unique("string")
    await redis_client.set(not_a_stream, "x")
    try:
        good = {"type": "redis", "url": redis_url, "stream": stream}
        bad = {**good, "stream": not_a_stream}
        items = deliveries(good, 2) + deliveries(bad, 1) + deliveries(good, 2)
        outcomes = await deliver_all(deliverer, items)
        assert [o.succeeded for o in outcomes] == [True, True, False, True, True]
        assert_failed(outcomes[2], retryable=True, text="redis: WRONGTYPE")
        assert await redis_client.xlen(stream) == 4
        assert await redis_client.get(not_a_stream) == b"x"
    finally:
        await redis_client.delete(not_a_stream)


async def test_a_connection_killed_mid_burst_loses_nothing(
    redis_client: Any, stream: str, redis_url: str
) -> None:
    upstream = URL(redis_url)
    proxy = TcpProxy(upstream.host or "127.0.0.1", upstream.port or 6379).start()
    deliverer = RedisDeliverer(allow_private=True, max_batch=100, parallel=2)
    try:
        via = str(upstream.with_port(proxy.port))
        target = {"type": "redis", "url": via, "stream": stream}
        items = deliveries(target, 6000, timeout_seconds=3.0)

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
    keys = Counter(fields(e)["idempotency-key"] for e in await redis_client.xrange(stream))
    assert set(keys) == {d.task.idempotency_key for d in items}  # nothing lost
    keys_retried = {d.task.idempotency_key for d in items if d.task.id in retried}
    assert {k for k, n in keys.items() if n > 1} <= keys_retried


async def test_client_kill_between_bursts_recovers_by_itself(
    deliverer: RedisDeliverer, redis_client: Any, stream: str, redis_url: str
) -> None:
    # Kill only the deliverer's own connection, found by the client name its URL gives it.
    name = unique("client")
    url = str(URL(redis_url).update_query(client_name=name))
    target = {"type": "redis", "url": url, "stream": stream}
    assert all(o.succeeded for o in await deliver_all(deliverer, deliveries(target, 10)))
    ours = [c for c in await redis_client.client_list() if c["name"] == name]
    assert ours, "the deliverer's connection is not in CLIENT LIST"
    for c in ours:
        await redis_client.client_kill_filter(_id=c["id"])
    items = deliveries(target, 10)
    outcomes = await deliver_all(deliverer, items)
    retried = await until_delivered(deliverer, failed(items, outcomes))
    assert len(retried) <= 10
    assert await redis_client.xlen(stream) == 20


async def test_a_name_resolving_to_a_private_address_is_refused_before_any_socket(
    dials: list[Any],
) -> None:
    resolver = StaticResolver({"cache.internal": ["172.16.0.9"]})
    guarded = RedisDeliverer(allow_private=False, resolver=resolver)
    try:
        target = {"type": "redis", "url": "redis://:pw@cache.internal:6379/0", "stream": "s"}
        outcome = await guarded.deliver(deliveries(target, 1)[0])
        metadata = {**target, "url": "redis://169.254.169.254/"}
        outcome_metadata = await guarded.deliver(deliveries(metadata, 1)[0])
    finally:
        await guarded.close()
    assert_failed(outcome, retryable=False, text=f"172.16.0.9 is private; {ALLOW_HINT}")
    assert_failed(outcome_metadata, retryable=False, text="is a cloud metadata address")
    assert resolver.lookups == ["cache.internal"]
    assert dials == []


async def test_a_broker_that_is_down_is_a_retryable_attempt(deliverer: RedisDeliverer) -> None:
    proxy = TcpProxy("127.0.0.1", 1).start()
    port = proxy.port
    proxy.close()
    target = {"type": "redis", "url": f"redis://:s3cr3t-pw@127.0.0.1:{port}/0", "stream": "s"}
    outcome = await deliverer.deliver(deliveries(target, 1)[0])
    assert_failed(outcome, retryable=True, text="redis")
    assert outcome.error is not None and "s3cr3t-pw" not in outcome.error


def test_check_redis_target() -> None:
    ok = {"type": "redis", "url": "redis://r.example/0", "stream": "s"}
    check_redis_target(ok, allow_private=False)
    for target, field in [
        ({**ok, "url": "redis://192.168.0.1/0"}, "target.url"),
        ({**ok, "url": "nats://r.example"}, "target.url"),
        ({**ok, "stream": ""}, "target.stream"),
        ({**ok, "maxlen": 0}, "target.maxlen"),
        ({**ok, "maxlen": True}, "target.maxlen"),
    ]:
        with pytest.raises(ValidationError) as err:
            check_redis_target(target, allow_private=False)
        assert err.value.field == field, target


async def test_tasks_due_together_go_out_in_one_pipeline(
    deliverer: RedisDeliverer, redis_client: Any, stream: str, redis_url: str
) -> None:
    batches: list[int] = []
    publish = deliverer.publish

    async def counted(conn: Any, batch: Any) -> None:
        batches.append(len(batch))
        await publish(conn, batch)

    deliverer.publish = counted  # type: ignore[method-assign]
    target = {"type": "redis", "url": redis_url, "stream": stream}
    outcomes = await deliver_all(deliverer, deliveries(target, 300))
    assert all(o.succeeded for o in outcomes)
    assert batches == [300]  # one pipeline, one round trip, for the 300 tasks
    assert await redis_client.xlen(stream) == 300
