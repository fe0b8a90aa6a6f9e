"""Values between Python and the SQLite schema: the one place rows become duetime types.

Timestamps are stored as INTEGER microseconds since the Unix epoch (UTC), JSON columns as text and
booleans as 0/1 (see ``migrations/0001_init.sql``). Every datetime handed out is timezone-aware UTC.
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

from duetime.store.recorded import stored_retry_policy
from duetime.types import (
    ApiKey,
    Attempt,
    AttemptOutcome,
    Lease,
    RetryPolicy,
    SigningSecret,
    Task,
    TaskStatus,
    Tenant,
)

Row = Mapping[str, Any]
"""A result row by column name (``sqlite3.Row``, or a dict with the same keys)."""

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def to_micros(when: datetime) -> int:
    """Microseconds since the epoch. A naive datetime is taken to be UTC."""
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return (when - _EPOCH) // _MICROSECOND


def seconds_to_micros(seconds: float) -> int:
    """A duration in whole microseconds (rounded, like PostgreSQL's interval arithmetic)."""
    return round(seconds * 1_000_000)


@functools.lru_cache(maxsize=16_384)
def from_micros(micros: int) -> datetime:
    """The aware UTC datetime ``micros`` microseconds after the epoch.

    Cached: the rows of one batch share a handful of instants (one "now" per transaction), and
    datetimes are immutable, so sharing them is safe and saves most of the conversion time.
    """
    return _EPOCH + timedelta(microseconds=micros)


def opt_from_micros(micros: int | None) -> datetime | None:
    return None if micros is None else from_micros(micros)


@functools.lru_cache(maxsize=1024)
def retry_from_json(text: str) -> RetryPolicy:
    """The ``retry`` column as a policy (cached: policies are frozen, and few distinct exist)."""
    return stored_retry_policy(text)


@functools.lru_cache(maxsize=1024)
def retry_to_json(policy: RetryPolicy) -> str:
    """The ``retry`` column for a policy (cached like :func:`retry_from_json`)."""
    return dumps(policy.to_json())


_STATUS = {status.value: status for status in TaskStatus}


def dumps(value: Any) -> str:
    """JSON text for a column (compact; orjson keeps key order)."""
    return orjson.dumps(value).decode()


def task_from_row(row: Row) -> Task:
    """Build a :class:`Task` from a ``tasks`` row (``SELECT *`` or ``RETURNING *``, or a dict with
    the same keys)."""
    if isinstance(row, sqlite3.Row):
        # sqlite3.Row finds a key by scanning every column name; one dict is much cheaper.
        row = dict(zip(row.keys(), row, strict=True))
    return Task(
        id=row["id"],
        tenant_id=row["tenant_id"],
        name=row["name"],
        queue=row["queue"],
        status=_STATUS[row["status"]],
        version=row["version"],
        target=orjson.loads(row["target"]),
        payload_json=row["payload"],
        idempotency_key=row["idempotency_key"],
        priority=row["priority"],
        retry=retry_from_json(row["retry"]),
        timeout_seconds=row["timeout_seconds"],
        depends_on=tuple(orjson.loads(row["depends_on"])),
        concurrency_key=row["concurrency_key"],
        labels=orjson.loads(row["labels"]),
        attempts=row["attempts"],
        series_start=row["series_start"],
        schedule_id=row["schedule_id"],
        scheduled_for=opt_from_micros(row["scheduled_for"]),
        run_at=from_micros(row["run_at"]),
        due_at=from_micros(row["due_at"]),
        created_at=from_micros(row["created_at"]),
        updated_at=from_micros(row["updated_at"]),
        started_at=opt_from_micros(row["started_at"]),
        finished_at=opt_from_micros(row["finished_at"]),
        last_error=row["last_error"],
        result=_json_or_text(row["result"]),
        lease_id=row["lease_id"],
        lease_expires_at=opt_from_micros(row["lease_expires_at"]),
        worker_id=row["worker_id"],
        cancel_requested=bool(row["cancel_requested"]),
        traceparent=row["traceparent"],
        request_hash=row.get("request_hash"),
        payload_ref=row.get("payload_ref"),
    )


def _json_or_text(text: str | None) -> Any:
    # ``result`` is JSON text by contract; a writer that broke it must not make the task unreadable.
    if text is None:
        return None
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return text


def lease_from_row(row: Row) -> Lease:
    """A :class:`Lease` on a ``running`` task row (the attempt is the task's attempt count)."""
    return Lease.of(task_from_row(row))


def attempt_from_row(row: Row) -> Attempt:
    return Attempt(
        task_id=row["task_id"],
        number=row["number"],
        started_at=from_micros(row["started_at"]),
        finished_at=from_micros(row["finished_at"]),
        outcome=AttemptOutcome(row["outcome"]),
        error=row["error"],
        http_status=row["http_status"],
        duration_ms=row["duration_ms"],
        worker=row["worker"],
    )


def tenant_from_row(row: Row) -> Tenant:
    return Tenant(id=row["id"], name=row["name"], created_at=from_micros(row["created_at"]))


def api_key_from_row(row: Row) -> ApiKey:
    return ApiKey(
        id=row["id"],
        tenant_id=row["tenant_id"],
        key_hash=row["key_hash"],
        created_at=from_micros(row["created_at"]),
    )


def signing_secret_from_row(row: Row) -> SigningSecret:
    return SigningSecret(
        id=row["id"],
        tenant_id=row["tenant_id"],
        secret=row["secret"],
        created_at=from_micros(row["created_at"]),
        expires_at=opt_from_micros(row["expires_at"]),
    )
