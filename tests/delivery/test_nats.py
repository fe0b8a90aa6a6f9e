"""NatsDeliverer against the real NATS server (JetStream) on 127.0.0.1: stored messages and
their headers, the duplicate window, a subject no stream captures, a stream's refusal, core
publish, a connection killed mid-burst, and the private-address guard."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import replace
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
from nats.js.api import StreamConfig
from standardwebhooks.webhooks import Webhook
from yarl import URL

from duetime.delivery.nats import NatsDeliverer, check_nats_target
from duetime.delivery.netguard import StaticResolver
from duetime.errors import ValidationError
from duetime.testing.tcpproxy import TcpProxy


@pytest.fixture
async def deliverer() -> AsyncIterator[NatsDeliverer]:
    d = NatsDeliverer(allow_private=True)
    try:
        yield d
    finally:
        await d.close()


@pytest.fixture
async def stream(jetstream: Any) -> AsyncIterator[str]:
    """A fresh stream capturing ``<name>.>``; its name."""
    name = unique("s").replace("-", "_")
    await jetstream.add_stream(StreamConfig(name=name, subjects=[f"{name}.>"]))
    try:
        yield name
    finally:
        await jetstream.delete_stream(name)


async def stored(jetstream: Any, stream: str) -> list[Any]:
    """Every message the stream holds, oldest first."""
    info = await jetstream.stream_info(stream)
    return [
        await jetstream.get_msg(stream, seq)
        for seq in range(info.state.first_seq, info.state.last_seq + 1)
        if info.state.messages
    ]


async def test_a_burst_is_stored_once_each_with_payload_and_signed_headers(
    deliverer: NatsDeliverer, jetstream: Any, stream: str, nats_url: str
) -> None:
    target = {"type": "nats", "url": nats_url, "subject": f"{stream}.due"}
    items = deliveries(target, 300)
    outcomes = await deliver_all(deliverer, items)
    assert all(o.succeeded for o in outcomes), [o for o in outcomes if not o.succeeded][:3]
    msgs = await stored(jetstream, stream)
    assert len(msgs) == 300
    by_key = {d.task.idempotency_key: d for d in items}
    verifier = Webhook(SECRET)
    for msg in msgs:
        headers = msg.headers
        d = by_key.pop(headers["Nats-Msg-Id"])
        assert msg.subject == f"{stream}.due"
        assert orjson.loads(msg.data) == orjson.loads(d.task.payload_json)
        assert headers["duetime-task-id"] == d.task.id
        assert headers["idempotency-key"] == d.task.idempotency_key
        assert headers["duetime-attempt"] == "1"
        verifier.verify(
            msg.data,
            {k: headers[k] for k in ("webhook-id", "webhook-timestamp", "webhook-signature")},
        )
    assert by_key == {}


async def test_a_repeat_within_the_duplicate_window_is_stored_once(
    deliverer: NatsDeliverer, jetstream: Any, stream: str, nats_url: str
) -> None:
    target = {"type": "nats", "url": nats_url, "subject": f"{stream}.due"}
    one = deliveries(target, 1)[0]
    assert (await deliverer.deliver(one)).succeeded
    again = type(one)(one.task, 2, one.secrets)  # the retry of a lost ack
    assert (await deliverer.deliver(again)).succeeded
    assert len(await stored(jetstream, stream)) == 1


async def test_a_subject_no_stream_captures_is_a_failed_attempt(
    deliverer: NatsDeliverer, nats_url: str
) -> None:
    target = {"type": "nats", "url": nats_url, "subject": unique("nostream")}
    outcome = await deliverer.deliver(deliveries(target, 1)[0])
    assert_failed(outcome, retryable=True, text="nats: no stream for subject")


async def test_a_message_over_the_stream_limit_is_refused(
    deliverer: NatsDeliverer, jetstream: Any, nats_url: str
) -> None:
    name = unique("small").replace("-", "_")
    await jetstream.add_stream(StreamConfig(name=name, subjects=[f"{name}.>"], max_msg_size=1024))
    try:
        target = {"type": "nats", "url": nats_url, "subject": f"{name}.due"}
        small, big = deliveries(target, 2)
        big = replace(big, task=replace(big.task, payload_json='{"pad":"' + "x" * 2000 + '"}'))
        outcomes = await deliver_all(deliverer, [small, big])
        assert outcomes[0].succeeded, outcomes[0]
        assert_failed(outcomes[1], retryable=True, text="stream refused the message")
        assert (await jetstream.stream_info(name)).state.messages == 1
    finally:
        await jetstream.delete_stream(name)


async def test_core_publish_when_jetstream_is_off(deliverer: NatsDeliverer, nats_url: str) -> None:
    import nats

    subject = unique("core")
    nc = await nats.connect(nats_url)
    try:
        sub = await nc.subscribe(subject)
        await nc.flush()
        target = {"type": "nats", "url": nats_url, "subject": subject, "jetstream": False}
        items = deliveries(target, 20)
        outcomes = await deliver_all(deliverer, items)
        assert all(o.succeeded for o in outcomes)
        got = [await sub.next_msg(timeout=5) for _ in items]
        assert sorted(m.headers["duetime-task-id"] for m in got) == sorted(d.task.id for d in items)
    finally:
        await nc.close()


async def test_a_connection_killed_mid_burst_loses_nothing(
    jetstream: Any, stream: str, nats_url: str
) -> None:
    upstream = URL(nats_url)
    proxy = TcpProxy(upstream.host or "127.0.0.1", upstream.port or 4222).start()
    deliverer = NatsDeliverer(
        allow_private=True, max_batch=100, parallel=2
    )  # spread over round trips
    try:
        via = str(upstream.with_port(proxy.port))
        target = {"type": "nats", "url": via, "subject": f"{stream}.due"}
        items = deliveries(target, 4000, timeout_seconds=3.0)

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
    msgs = await stored(jetstream, stream)
    ids = Counter(m.headers["Nats-Msg-Id"] for m in msgs)
    assert set(ids) == {d.task.idempotency_key for d in items}  # nothing lost
    keys_retried = {d.task.idempotency_key for d in items if d.task.id in retried}
    assert {k for k, n in ids.items() if n > 1} <= keys_retried


async def test_a_name_resolving_to_a_private_address_is_refused_before_any_socket(
    dials: list[Any],
) -> None:
    resolver = StaticResolver({"nats.internal": ["192.168.1.20"]})
    guarded = NatsDeliverer(allow_private=False, resolver=resolver)
    try:
        target = {"type": "nats", "url": "nats://u:pw@nats.internal:4222", "subject": "a"}
        outcome = await guarded.deliver(deliveries(target, 1)[0])
        loopback = {**target, "url": "nats://127.0.0.1:4222"}
        outcome_loopback = await guarded.deliver(deliveries(loopback, 1)[0])
    finally:
        await guarded.close()
    assert_failed(outcome, retryable=False, text=f"192.168.1.20 is private; {ALLOW_HINT}")
    assert_failed(outcome_loopback, retryable=False, text="127.0.0.1 is loopback")
    assert resolver.lookups == ["nats.internal"]
    assert dials == []


async def test_a_broker_that_is_down_is_a_retryable_attempt(deliverer: NatsDeliverer) -> None:
    proxy = TcpProxy("127.0.0.1", 1).start()
    port = proxy.port
    proxy.close()  # the port is free again: nothing listens there
    target = {"type": "nats", "url": f"nats://u:hunter22@127.0.0.1:{port}", "subject": "a"}
    outcome = await deliverer.deliver(deliveries(target, 1)[0])
    assert_failed(outcome, retryable=True, text="nats")
    assert outcome.error is not None and "hunter22" not in outcome.error


def test_check_nats_target() -> None:
    check_nats_target(
        {"type": "nats", "url": "nats://n.example", "subject": "a.b"}, allow_private=False
    )
    for target, field in [
        ({"type": "nats", "url": "nats://10.1.1.1", "subject": "a"}, "target.url"),
        ({"type": "nats", "url": "redis://n.example", "subject": "a"}, "target.url"),
        ({"type": "nats", "url": "nats://n.example", "subject": "a.*"}, "target.subject"),
        ({"type": "nats", "url": "nats://n.example", "subject": "a..b"}, "target.subject"),
        (
            {"type": "nats", "url": "nats://n.example", "subject": "a", "jetstream": 1},
            "target.jetstream",
        ),
    ]:
        with pytest.raises(ValidationError) as err:
            check_nats_target(target, allow_private=False)
        assert err.value.field == field, target


async def test_a_core_message_over_the_server_limit_fails_alone(
    deliverer: NatsDeliverer, nats_url: str
) -> None:
    subject = unique("big")
    target = {"type": "nats", "url": nats_url, "subject": subject, "jetstream": False}
    small, big = deliveries(target, 2)
    pad = "x" * (2 * 1024 * 1024)  # over the default 1 MiB max_payload
    big = replace(big, task=replace(big.task, payload_json=f'{{"pad":"{pad}"}}'))
    outcomes = await deliver_all(deliverer, [small, big])
    assert outcomes[0].succeeded, outcomes[0]
    assert_failed(outcomes[1], retryable=True, text="over the server's")
