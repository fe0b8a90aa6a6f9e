"""WebhookDeliverer against a real receiver on 127.0.0.1.

Network rule: nothing here may dial a non-loopback address. The ``dials`` fixture wraps every
socket connect of the test; a non-loopback one is blocked and fails the test. Private-address
refusals are proven with a fake resolver and literal addresses that are never dialled.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from email.utils import formatdate
from typing import Any

import orjson
import pytest
from aiohttp import web
from multidict import CIMultiDict
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from duetime.auth import new_signing_secret
from duetime.delivery.base import Delivery
from duetime.delivery.netguard import StaticResolver
from duetime.delivery.webhook import WebhookDeliverer, check_http_target, parse_retry_after
from duetime.errors import ValidationError
from duetime.testing.fakes import running_task
from duetime.types import AttemptOutcome, Task

SECRET_A = new_signing_secret()
SECRET_B = new_signing_secret()
ALLOW_HINT = "set DUETIME_ALLOW_PRIVATE_TARGETS=true to allow"


@dataclass
class Receiver:
    port: int
    requests: list[tuple[str, str, CIMultiDict[str], bytes]] = field(default_factory=list)
    release: asyncio.Event = field(default_factory=asyncio.Event)

    def url(self, path: str = "/ok", host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"

    def hits(self, path: str) -> list[tuple[str, str, CIMultiDict[str], bytes]]:
        return [r for r in self.requests if r[1] == path]


@pytest.fixture
async def receiver(dials: list[Any]) -> AsyncIterator[Receiver]:
    rec = Receiver(port=0)

    async def record(request: web.Request) -> bytes:
        body = await request.read()
        rec.requests.append((request.method, request.path, CIMultiDict(request.headers), body))
        return body

    async def ok(request: web.Request) -> web.Response:
        body = await record(request)
        return web.json_response({"ok": True, "size": len(body)})

    async def big(request: web.Request) -> web.Response:
        await record(request)
        return web.Response(body=orjson.dumps("x" * 10_000), content_type="application/json")

    async def text(request: web.Request) -> web.Response:
        await record(request)
        return web.Response(text="hello, not json")

    async def empty(request: web.Request) -> web.Response:
        await record(request)
        return web.Response(status=204)

    async def status(request: web.Request) -> web.Response:
        await record(request)
        headers = {}
        if "retry_after" in request.query:
            headers["Retry-After"] = request.query["retry_after"]
        code = int(request.match_info["code"])
        return web.Response(status=code, text=f"status {code}\nplease\tretry", headers=headers)

    async def redirect(request: web.Request) -> web.Response:
        await record(request)
        return web.Response(status=302, headers={"Location": "/ok"})

    async def slow(request: web.Request) -> web.Response:
        await record(request)
        await asyncio.wait_for(rec.release.wait(), 10)
        return web.Response(text="late")

    app = web.Application()
    app.router.add_route("*", "/ok", ok)
    app.router.add_post("/big", big)
    app.router.add_post("/text", text)
    app.router.add_post("/empty", empty)
    app.router.add_post("/status/{code}", status)
    app.router.add_post("/redirect", redirect)
    app.router.add_post("/slow", slow)
    runner = web.AppRunner(app, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    server = site._server
    assert server is not None
    rec.port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
    yield rec
    rec.release.set()
    await runner.cleanup()


@pytest.fixture
async def deliverer() -> AsyncIterator[WebhookDeliverer]:
    d = WebhookDeliverer(allow_private=True)
    yield d
    await d.close()


@pytest.fixture
async def guarded() -> AsyncIterator[WebhookDeliverer]:
    """A production-like deliverer: private targets refused, DNS answered by a fake table."""
    table = StaticResolver({"internal.example": ["10.0.0.5"], "loop.example": ["127.0.0.1"]})
    d = WebhookDeliverer(allow_private=False, resolver=table)
    yield d
    await d.close()


def make_task(url: str, **changes: Any) -> Task:
    target = {"type": "http", "url": url, **changes.pop("target", {})}
    changes.setdefault("version", 3)
    changes.setdefault("timeout_seconds", 5.0)
    changes.setdefault("payload_json", '{"report": "2030-01", "rows": [1, 2, 3], "name": "Zoë"}')
    return running_task(target, **changes)


def delivery(
    url: str, attempt: int = 1, secrets: tuple[str, ...] = (SECRET_A,), **kw: Any
) -> Delivery:
    return Delivery(task=make_task(url, **kw), attempt=attempt, secrets=secrets)


async def test_success_sends_signed_payload_and_keeps_json_result(
    receiver: Receiver, deliverer: WebhookDeliverer, dials: list[Any]
) -> None:
    d = delivery(receiver.url(), idempotency_key="report-2030-01")
    outcome = await deliverer.deliver(d)
    assert outcome.outcome is AttemptOutcome.SUCCEEDED
    assert outcome.http_status == 200
    assert outcome.retryable is False
    assert outcome.error is None
    body = d.task.payload_json.encode()
    assert orjson.loads(outcome.result_json or "") == {"ok": True, "size": len(body)}

    [(method, _, headers, received)] = receiver.requests
    assert method == "POST"
    assert received == body
    assert headers["Content-Type"] == "application/json"
    assert headers["webhook-id"] == f"msg_{d.task.id}"
    assert abs(int(headers["webhook-timestamp"]) - time.time()) < 5
    assert headers["duetime-task-id"] == d.task.id
    assert headers["duetime-attempt"] == "1"
    assert headers["idempotency-key"] == "report-2030-01"
    assert "duetime-scheduled-for" not in headers
    assert headers["User-Agent"] == "duetime/0.1"
    assert Webhook(SECRET_A).verify(received, dict(headers)) == d.task.payload
    # The dial observer sees the deliverer's connections (so "no dial" below means something).
    assert ("127.0.0.1", receiver.port) in dials


async def test_two_secrets_each_verify_with_standardwebhooks(
    receiver: Receiver, deliverer: WebhookDeliverer
) -> None:
    outcome = await deliverer.deliver(delivery(receiver.url(), secrets=(SECRET_A, SECRET_B)))
    assert outcome.outcome is AttemptOutcome.SUCCEEDED
    [(_, _, headers, body)] = receiver.requests
    assert len(headers["webhook-signature"].split(" ")) == 2
    Webhook(SECRET_A).verify(body, dict(headers))
    Webhook(SECRET_B).verify(body, dict(headers))
    with pytest.raises(WebhookVerificationError):
        Webhook(new_signing_secret()).verify(body, dict(headers))


async def test_webhook_id_and_idempotency_key_are_stable_across_attempts(
    receiver: Receiver, deliverer: WebhookDeliverer
) -> None:
    scheduled = datetime(2030, 1, 1, 2, 0, tzinfo=UTC)
    for attempt in (1, 2, 3):
        d = delivery(receiver.url(), attempt=attempt, scheduled_for=scheduled)
        assert (await deliverer.deliver(d)).outcome is AttemptOutcome.SUCCEEDED
    headers = [r[2] for r in receiver.requests]
    assert {h["webhook-id"] for h in headers} == {"msg_0190f000-0000-7000-8000-000000000001"}
    assert {h["idempotency-key"] for h in headers} == {"0190f000-0000-7000-8000-000000000001"}
    assert [h["duetime-attempt"] for h in headers] == ["1", "2", "3"]
    assert {h["duetime-scheduled-for"] for h in headers} == {"2030-01-01T02:00:00Z"}


async def test_target_method_and_headers_never_override_signing(
    receiver: Receiver, deliverer: WebhookDeliverer
) -> None:
    user_headers = {
        "X-Thing": "1",
        "Webhook-Signature": "v1,forged",
        "WEBHOOK-ID": "msg_forged",
        "Idempotency-Key": "forged",
        "Duetime-Attempt": "99",
        "Content-Type": "application/cloudevents+json",
        "content-type": "application/cloudevents+json",
    }
    d = delivery(receiver.url(), target={"method": "put", "headers": user_headers})
    assert (await deliverer.deliver(d)).outcome is AttemptOutcome.SUCCEEDED
    [(method, _, headers, body)] = receiver.requests
    assert method == "PUT"
    assert headers["X-Thing"] == "1"
    assert headers.getall("Content-Type") == ["application/cloudevents+json"]
    assert len(headers.getall("webhook-signature")) == 1
    assert len(headers.getall("idempotency-key")) == 1
    assert headers["webhook-id"] == f"msg_{d.task.id}"
    assert headers["idempotency-key"] == d.task.id
    assert headers["duetime-attempt"] == "1"
    assert "forged" not in headers["webhook-signature"]
    Webhook(SECRET_A).verify(body, dict(headers))


async def test_result_is_truncated_to_4_kib(
    receiver: Receiver, deliverer: WebhookDeliverer
) -> None:
    outcome = await deliverer.deliver(delivery(receiver.url("/big")))
    assert outcome.outcome is AttemptOutcome.SUCCEEDED
    result = orjson.loads(outcome.result_json or "")
    assert isinstance(result, str)
    assert result == '"' + "x" * 4095  # the first 4096 bytes of the JSON text, as a string
    assert outcome.response == '"' + "x" * 4095  # the attempt keeps the same 4 KiB as text


async def test_non_json_and_empty_answers(receiver: Receiver, deliverer: WebhookDeliverer) -> None:
    text = await deliverer.deliver(delivery(receiver.url("/text")))
    assert text.result_json == '"hello, not json"'
    assert text.response == "hello, not json"
    empty = await deliverer.deliver(delivery(receiver.url("/empty")))
    assert (empty.outcome, empty.http_status, empty.result_json) == (
        AttemptOutcome.SUCCEEDED,
        204,
        None,
    )
    assert empty.response is None


@pytest.mark.parametrize(
    ("code", "retry_after", "expected_wait"),
    [(500, "7", 7.0), (503, None, None), (429, "1.5", 1.5), (408, "soon", None)],
)
async def test_retryable_statuses_honour_retry_after(
    receiver: Receiver,
    deliverer: WebhookDeliverer,
    code: int,
    retry_after: str | None,
    expected_wait: float | None,
) -> None:
    query = f"?retry_after={retry_after}" if retry_after is not None else ""
    outcome = await deliverer.deliver(delivery(receiver.url(f"/status/{code}{query}")))
    assert outcome.outcome is AttemptOutcome.FAILED
    assert outcome.retryable is True
    assert outcome.http_status == code
    assert outcome.retry_after_seconds == expected_wait
    assert outcome.error == f"HTTP {code}: status {code} please retry"
    assert outcome.result_json is None
    assert outcome.response == f"status {code}\nplease\tretry"  # the body as it came


async def test_retry_after_as_http_date(receiver: Receiver, deliverer: WebhookDeliverer) -> None:
    when = formatdate(time.time() + 120, usegmt=True).replace(" ", "%20").replace(",", "%2C")
    outcome = await deliverer.deliver(delivery(receiver.url(f"/status/429?retry_after={when}")))
    assert outcome.retryable is True
    assert outcome.retry_after_seconds is not None
    assert 110 <= outcome.retry_after_seconds <= 121


def test_parse_retry_after() -> None:
    now = 1_700_000_000.0
    assert parse_retry_after("120", now) == 120.0
    assert parse_retry_after(" 0 ", now) == 0.0
    assert parse_retry_after(formatdate(now + 60, usegmt=True), now) == 60.0
    assert parse_retry_after(formatdate(now - 60, usegmt=True), now) == 0.0
    for junk in ("", "-5", "nan", "inf", "tomorrow", "Wed, 99 Foo 2020"):
        assert parse_retry_after(junk, now) is None


@pytest.mark.parametrize("code", [400, 401, 404, 409, 410, 422])
async def test_other_4xx_fail_at_once(
    receiver: Receiver, deliverer: WebhookDeliverer, code: int
) -> None:
    outcome = await deliverer.deliver(delivery(receiver.url(f"/status/{code}?retry_after=5")))
    assert (outcome.outcome, outcome.retryable, outcome.http_status) == (
        AttemptOutcome.FAILED,
        False,
        code,
    )
    assert outcome.retry_after_seconds is None
    assert outcome.response == f"status {code}\nplease\tretry"


async def test_redirects_are_not_followed(receiver: Receiver, deliverer: WebhookDeliverer) -> None:
    outcome = await deliverer.deliver(delivery(receiver.url("/redirect")))
    assert (outcome.outcome, outcome.retryable, outcome.http_status) == (
        AttemptOutcome.FAILED,
        False,
        302,
    )
    assert outcome.error == "HTTP 302: redirect to /ok not followed"
    assert receiver.hits("/ok") == []


async def test_timeout_is_retryable_timed_out(
    receiver: Receiver, deliverer: WebhookDeliverer
) -> None:
    started = time.monotonic()
    outcome = await deliverer.deliver(delivery(receiver.url("/slow"), timeout_seconds=0.3))
    # /slow holds its answer 10 s: done well before, the timeout ended it (generous bound).
    assert time.monotonic() - started < 8
    assert (outcome.outcome, outcome.retryable) == (AttemptOutcome.TIMED_OUT, True)
    assert outcome.error == "timed out after 0.3s"
    assert outcome.response is None  # no answer
    assert len(receiver.hits("/slow")) == 1


async def test_connection_refused_is_retryable(
    deliverer: WebhookDeliverer, dials: list[Any]
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    outcome = await deliverer.deliver(delivery(f"http://127.0.0.1:{port}/hook"))
    assert (outcome.outcome, outcome.retryable, outcome.http_status) == (
        AttemptOutcome.FAILED,
        True,
        None,
    )
    assert outcome.error is not None
    assert outcome.error.startswith(f"cannot connect to 127.0.0.1:{port}")
    assert ("127.0.0.1", port) in dials


async def test_unknown_name_is_a_retryable_dns_failure(guarded: WebhookDeliverer) -> None:
    outcome = await guarded.deliver(delivery("https://nowhere.example/hook"))
    assert (outcome.outcome, outcome.retryable) == (AttemptOutcome.FAILED, True)
    assert outcome.error is not None
    assert outcome.error.startswith("cannot resolve nowhere.example:443")


async def test_resolved_private_address_is_refused_before_any_socket(
    guarded: WebhookDeliverer, dials: list[Any]
) -> None:
    outcome = await guarded.deliver(delivery("http://internal.example/hook"))
    assert (outcome.outcome, outcome.retryable) == (AttemptOutcome.FAILED, False)
    assert outcome.error == f"target address 10.0.0.5 is private; {ALLOW_HINT}"
    assert dials == []


@pytest.mark.parametrize(
    ("url", "error"),
    [
        ("http://10.0.0.5/hook", "target address 10.0.0.5 is private"),
        ("http://169.254.169.254/latest/meta-data/", "is a cloud metadata address"),
        ("http://[::ffff:10.0.0.1]/", "is private (IPv4-mapped)"),
        ("http://[64:ff9b::a00:5]/", "is private (NAT64)"),
        ("http://[2002:a00:5::1]/", "is private (6to4)"),
        ("http://[fd00:ec2::254]/", "is a cloud metadata address"),
        ("http://167772165/", "target address 10.0.0.5 is private"),
        ("http://0xa.5/", "target address 10.0.0.5 is private"),
        ("http://012.0.0.5/", "target address 10.0.0.5 is private"),
    ],
)
async def test_literal_private_addresses_are_refused_without_dialling(
    guarded: WebhookDeliverer, dials: list[Any], url: str, error: str
) -> None:
    outcome = await guarded.deliver(delivery(url))
    assert (outcome.outcome, outcome.retryable) == (AttemptOutcome.FAILED, False)
    assert outcome.error is not None
    assert error in outcome.error
    assert outcome.error.endswith(ALLOW_HINT)
    assert dials == []


async def test_loopback_is_refused_unless_private_targets_are_allowed(
    receiver: Receiver, guarded: WebhookDeliverer, deliverer: WebhookDeliverer, dials: list[Any]
) -> None:
    port = receiver.port
    for url in (
        receiver.url(),
        receiver.url(host="loop.example"),  # the fake DNS says 127.0.0.1
        receiver.url(host="2130706433"),
        receiver.url(host="0177.0.0.1"),
        receiver.url(host="0x7f.1"),
        receiver.url(host="127.1"),
        receiver.url(host="[::ffff:127.0.0.1]"),
    ):
        outcome = await guarded.deliver(delivery(url))
        assert (outcome.outcome, outcome.retryable) == (AttemptOutcome.FAILED, False), url
        assert outcome.error is not None
        assert "127.0.0.1 is loopback" in outcome.error or "is loopback (IPv4-mapped)" in (
            outcome.error
        )
    assert receiver.requests == []
    assert dials == []

    # The same spellings reach the receiver once private targets are allowed.
    for host in ("2130706433", "0x7f.1", "127.1"):
        outcome = await deliverer.deliver(delivery(receiver.url(host=host)))
        assert outcome.outcome is AttemptOutcome.SUCCEEDED, outcome.error
    assert len(receiver.requests) == 3
    assert all(address == ("127.0.0.1", port) for address in dials)


async def test_a_name_is_dialled_at_the_address_the_resolver_gave(
    receiver: Receiver, dials: list[Any]
) -> None:
    table = StaticResolver({"hooks.example": ["127.0.0.1"]})
    d = WebhookDeliverer(allow_private=True, resolver=table)
    try:
        outcome = await d.deliver(delivery(receiver.url(host="hooks.example")))
    finally:
        await d.close()
    assert outcome.outcome is AttemptOutcome.SUCCEEDED
    assert table.lookups == ["hooks.example"]
    assert receiver.requests[0][2]["Host"] == f"hooks.example:{receiver.port}"
    assert dials == [("127.0.0.1", receiver.port)]


@pytest.mark.parametrize(
    ("target", "error"),
    [
        ({"url": "ftp://example.com/"}, "invalid target url: url scheme must be http or https"),
        ({"url": None}, "target.url is missing"),
        ({"url": "http://08/"}, "invalid target url: url host 08 is not a valid IP address"),
        ({"url": "http://1.2.3.4.5/"}, "1.2.3.4.5 is not a valid IP address"),
        ({"url": "http://example.com/", "method": "TRACE"}, "target method TRACE is not allowed"),
        ({"url": "http://example.com/", "headers": {"X": "a\r\nB: c"}}, "is not a valid HTTP"),
    ],
)
async def test_undeliverable_targets_fail_at_once(
    deliverer: WebhookDeliverer, dials: list[Any], target: dict[str, Any], error: str
) -> None:
    task = replace(make_task("x"), target={"type": "http", **target})
    outcome = await deliverer.deliver(Delivery(task=task, attempt=1, secrets=(SECRET_A,)))
    assert (outcome.outcome, outcome.retryable) == (AttemptOutcome.FAILED, False)
    assert outcome.error is not None
    assert error in outcome.error
    assert dials == []


async def test_a_bad_secret_fails_without_sending(
    receiver: Receiver, deliverer: WebhookDeliverer
) -> None:
    outcome = await deliverer.deliver(delivery(receiver.url(), secrets=("whsec_a",)))
    assert (outcome.outcome, outcome.retryable) == (AttemptOutcome.FAILED, False)
    assert outcome.error == "cannot sign: signing secret is not valid base64"
    assert receiver.requests == []


async def test_many_concurrent_deliveries_share_the_pool(receiver: Receiver) -> None:
    d = WebhookDeliverer(allow_private=True, max_connections=8)
    try:
        outcomes = await asyncio.gather(*(d.deliver(delivery(receiver.url())) for _ in range(200)))
    finally:
        await d.close()
    assert all(o.outcome is AttemptOutcome.SUCCEEDED for o in outcomes)
    assert len(receiver.requests) == 200
    after = await d.deliver(delivery(receiver.url()))
    assert (after.outcome, after.retryable, after.error) == (
        AttemptOutcome.FAILED,
        True,
        "deliverer is closed",
    )


def test_check_http_target() -> None:
    check_http_target(
        {"type": "http", "url": "https://example.com/", "method": "put", "headers": {"X-A": "1"}},
        allow_private=False,
    )
    bad: list[tuple[dict[str, Any], str]] = [
        ({"url": 5}, "target.url"),
        ({"url": "http://10.0.0.1/"}, "target.url"),
        ({"url": "https://example.com/", "method": "TRACE"}, "target.method"),
        ({"url": "https://example.com/", "headers": ["x"]}, "target.headers"),
        (
            {"url": "https://example.com/", "headers": {"Webhook-Id": "x"}},
            "target.headers.Webhook-Id",
        ),
        ({"url": "https://example.com/", "headers": {"X": "a\nb"}}, "target.headers.X"),
        ({"url": "https://example.com/", "headers": {"X Y": "1"}}, "target.headers.X Y"),
        ({"url": "https://example.com/", "headers": {"X": 1}}, "target.headers.X"),
    ]
    for target, field_name in bad:
        with pytest.raises(ValidationError) as info:
            check_http_target({"type": "http", **target}, allow_private=False)
        assert info.value.field == field_name, target
    check_http_target({"type": "http", "url": "http://10.0.0.1/"}, allow_private=True)


async def test_payload_ref_is_handed_on_in_a_header(
    receiver: Receiver, deliverer: WebhookDeliverer
) -> None:
    ref = "s3://bucket/reports/2030-01.json?versionId=3"
    d = delivery(receiver.url(), payload_json="null", payload_ref=ref)
    assert (await deliverer.deliver(d)).outcome is AttemptOutcome.SUCCEEDED
    [(_, _, headers, body)] = receiver.requests
    assert headers["duetime-payload-ref"] == ref and body == b"null"
    Webhook(SECRET_A).verify(body, dict(headers))
