"""The headers every pushed message carries (SPEC §4), for webhooks and broker messages alike."""

from __future__ import annotations

from datetime import UTC, datetime

from duetime.delivery.base import Delivery
from duetime.delivery.parents import BODY_PARENTS, HEADER_BODY
from duetime.delivery.signing import HEADER_ID, HEADER_SIGNATURE, HEADER_TIMESTAMP, sign

__all__ = [
    "HEADER_ATTEMPT",
    "HEADER_IDEMPOTENCY_KEY",
    "HEADER_PAYLOAD_REF",
    "HEADER_SCHEDULED_FOR",
    "HEADER_TASK_ID",
    "RESERVED_HEADERS",
    "RESERVED_PREFIXES",
    "SigningError",
    "is_reserved_header",
    "message_headers",
]

HEADER_TASK_ID = "duetime-task-id"
HEADER_ATTEMPT = "duetime-attempt"
HEADER_SCHEDULED_FOR = "duetime-scheduled-for"
HEADER_IDEMPOTENCY_KEY = "idempotency-key"
HEADER_PAYLOAD_REF = "duetime-payload-ref"

RESERVED_HEADERS = frozenset(
    {
        HEADER_ID,
        HEADER_TIMESTAMP,
        HEADER_SIGNATURE,
        HEADER_IDEMPOTENCY_KEY,
        "content-length",
        "transfer-encoding",
        "host",
        "connection",
        "keep-alive",
        "te",
        "trailer",
        "upgrade",
        "expect",
    }
)
"""Header names a target's ``headers`` may not set (lower-cased): duetime's own, which every
pushed message carries, and those HTTP itself owns (framing, hop by hop)."""

RESERVED_PREFIXES = ("webhook-", "duetime-", "proxy-")
"""Nor any name starting with one of these (Standard Webhooks', duetime's, proxies')."""


def is_reserved_header(name: str) -> bool:
    """Whether a target may not set header ``name`` (any case): the one rule the API checks at
    create time and the deliverers apply when they send."""
    lower = name.lower()
    return lower in RESERVED_HEADERS or lower.startswith(RESERVED_PREFIXES)


class SigningError(ValueError):
    """A live signing secret cannot sign (the delivery fails without a retry)."""


def _rfc3339_utc(value: datetime) -> str:
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def message_headers(delivery: Delivery, body: bytes, timestamp: int) -> dict[str, str]:
    """The Standard Webhooks-style headers of SPEC §4 for one delivery (webhooks and brokers).

    ``webhook-id`` (``msg_<task id>``), ``webhook-timestamp``, ``webhook-signature`` (one per
    live secret; absent when the tenant has none), ``duetime-task-id``, ``duetime-attempt``,
    ``idempotency-key`` (the task's key, or its id), for schedule-made tasks
    ``duetime-scheduled-for``, ``duetime-payload-ref`` for a task that carries one, the
    task's W3C ``traceparent`` when it has one, and ``duetime-body: parents`` when the body
    carries the task's parents (:mod:`duetime.delivery.parents`). Raises
    :class:`SigningError` when a secret cannot sign.
    """
    task = delivery.task
    msg_id = "msg_" + task.id
    headers = {
        HEADER_ID: msg_id,
        HEADER_TIMESTAMP: str(timestamp),
        HEADER_TASK_ID: task.id,
        HEADER_ATTEMPT: str(delivery.attempt),
        HEADER_IDEMPOTENCY_KEY: task.idempotency_key or task.id,
    }
    if delivery.secrets:
        try:
            headers[HEADER_SIGNATURE] = sign(msg_id, timestamp, body, delivery.secrets)
        except ValueError as exc:
            raise SigningError(f"cannot sign: {exc}") from exc
    if task.scheduled_for is not None:
        headers[HEADER_SCHEDULED_FOR] = _rfc3339_utc(task.scheduled_for)
    if task.payload_ref is not None:  # handed on as-is: duetime never reads what it names
        headers[HEADER_PAYLOAD_REF] = task.payload_ref
    traceparent = delivery.traceparent or task.traceparent
    if traceparent is not None:  # W3C Trace Context: the receiver joins the task's trace
        headers["traceparent"] = traceparent
    if delivery.enveloped:  # the body is {"payload", "parents"}, not the payload itself
        headers[HEADER_BODY] = BODY_PARENTS
    return headers
