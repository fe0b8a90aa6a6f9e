"""One list of reserved target headers: what the API refuses at create time is exactly what the
webhook deliverer refuses, and both are :func:`duetime.delivery.headers.is_reserved_header`."""

from __future__ import annotations

import pydantic
import pytest

from duetime.api.schemas import AmqpTarget, HttpTarget
from duetime.delivery.headers import RESERVED_HEADERS, RESERVED_PREFIXES, is_reserved_header
from duetime.delivery.webhook import check_http_target
from duetime.errors import ValidationError

NAMES = sorted(
    {
        *RESERVED_HEADERS,
        *(name.upper() for name in RESERVED_HEADERS),
        *(prefix + "anything" for prefix in RESERVED_PREFIXES),
        "Proxy-Authorization",
        "Webhook-Signature",
        "Duetime-Attempt",
        "X-Thing",
        "Content-Type",
        "User-Agent",
        "Authorization",
        "traceparent",
        "Hostname",
        "TE-X",
        "webhooks",
        "duetime",
    }
)


def _api_refuses(model: type[pydantic.BaseModel], target: dict[str, object]) -> bool:
    try:
        model.model_validate(target)
    except pydantic.ValidationError as exc:
        assert [e["type"] for e in exc.errors()] == ["header_reserved"]
        return True
    return False


def _deliverer_refuses(name: str) -> bool:
    target = {"url": "https://hooks.example.com/in", "headers": {name: "1"}}
    try:
        check_http_target(target, allow_private=False)
    except ValidationError as exc:
        assert exc.field == f"target.headers.{name}"
        return True
    return False


@pytest.mark.parametrize("name", NAMES)
def test_the_api_and_the_deliverer_reserve_the_same_headers(name: str) -> None:
    http = {"type": "http", "url": "https://hooks.example.com/in", "headers": {name: "1"}}
    amqp = {
        "type": "amqp",
        "url": "amqp://mq.example.com",
        "routing_key": "due",
        "headers": {name: "1"},
    }
    reserved = is_reserved_header(name)
    assert _api_refuses(HttpTarget, http) is reserved
    assert _api_refuses(AmqpTarget, amqp) is reserved
    assert _deliverer_refuses(name) is reserved


def test_the_list_holds_the_signed_headers_and_what_http_owns() -> None:
    for name in ("webhook-id", "webhook-timestamp", "webhook-signature", "idempotency-key"):
        assert is_reserved_header(name)
    for name in ("host", "content-length", "transfer-encoding", "connection", "upgrade"):
        assert is_reserved_header(name)
    for name in ("x-thing", "content-type", "user-agent", "authorization"):
        assert not is_reserved_header(name)
