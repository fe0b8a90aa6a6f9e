"""Rows to duetime values, once for both backends: each converter reads its row through the
backend's :class:`~duetime.store.core.plan.Decode`."""

from __future__ import annotations

import functools
from typing import Any

import orjson

from duetime.store.core.plan import Decode, Row
from duetime.store.counters import CountKey
from duetime.store.recorded import stored_retry_policy
from duetime.types import (
    ApiKey,
    Attempt,
    AttemptOutcome,
    Lease,
    Queue,
    QueueSettings,
    RetryPolicy,
    SigningSecret,
    StatusCount,
    Task,
    TaskStatus,
    Tenant,
    TenantQuotas,
    WorkerInfo,
)


def tenant(r: Row, d: type[Decode]) -> Tenant:
    quotas = TenantQuotas(
        max_pending_tasks=r["max_pending_tasks"],
        max_creates_per_second=r["max_creates_per_second"],
        max_concurrency=r["max_concurrency"],
        max_schedules=r["max_schedules"],
        weight=r["weight"],
    )
    return Tenant(id=r["id"], name=r["name"], created_at=d.time(r["created_at"]), quotas=quotas)


def api_key(r: Row, d: type[Decode]) -> ApiKey:
    return ApiKey(
        id=r["id"],
        tenant_id=r["tenant_id"],
        key_hash=r["key_hash"],
        created_at=d.time(r["created_at"]),
    )


def signing_secret(r: Row, d: type[Decode]) -> SigningSecret:
    return SigningSecret(
        id=r["id"],
        tenant_id=r["tenant_id"],
        secret=r["secret"],
        created_at=d.time(r["created_at"]),
        expires_at=d.opt_time(r["expires_at"]),
    )


_STATUS = {s.value: s for s in TaskStatus}  # enum lookups by value are slow-ish (hot path)
_OUTCOME = {o.value: o for o in AttemptOutcome}


@functools.lru_cache(maxsize=1024)
def retry_policy(text: str) -> RetryPolicy:
    """The ``retry`` column as a policy (cached: policies are frozen, and few distinct exist)."""
    return stored_retry_policy(text)


def json_or_text(text: str | None) -> Any:
    """A JSON column that must stay readable even if a writer broke its JSON (``result``)."""
    if text is None:
        return None
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return text


def task(r: Row, d: type[Decode]) -> Task:
    """A ``tasks`` row (every column) as a :class:`Task`."""
    return Task(
        id=d.ident(r["id"]),
        tenant_id=r["tenant_id"],
        name=r["name"],
        queue=r["queue"],
        status=_STATUS[r["status"]],
        version=r["version"],
        target=orjson.loads(r["target"]),
        payload_json=r["payload"],
        idempotency_key=r["idempotency_key"],
        priority=r["priority"],
        retry=retry_policy(r["retry"]),
        timeout_seconds=r["timeout_seconds"],
        depends_on=d.ids(r["depends_on"]),
        concurrency_key=r["concurrency_key"],
        labels=orjson.loads(r["labels"]),
        attempts=r["attempts"],
        series_start=r["series_start"],
        schedule_id=r["schedule_id"],
        scheduled_for=d.opt_time(r["scheduled_for"]),
        run_at=d.time(r["run_at"]),
        due_at=d.time(r["due_at"]),
        created_at=d.time(r["created_at"]),
        updated_at=d.time(r["updated_at"]),
        started_at=d.opt_time(r["started_at"]),
        finished_at=d.opt_time(r["finished_at"]),
        last_error=r["last_error"],
        result=json_or_text(r["result"]),
        lease_id=d.opt_ident(r["lease_id"]),
        lease_expires_at=d.opt_time(r["lease_expires_at"]),
        worker_id=r["worker_id"],
        cancel_requested=d.flag(r["cancel_requested"]),
        traceparent=r["traceparent"],
        request_hash=r["request_hash"],
        payload_ref=r["payload_ref"],
    )


def lease(r: Row, d: type[Decode]) -> Lease:
    """A ``running`` task row as the :class:`Lease` its holder works under."""
    return Lease.of(task(r, d))


def attempt(r: Row, d: type[Decode]) -> Attempt:
    return Attempt(
        task_id=d.ident(r["task_id"]),
        number=r["number"],
        started_at=d.time(r["started_at"]),
        finished_at=d.time(r["finished_at"]),
        outcome=_OUTCOME[r["outcome"]],
        error=r["error"],
        http_status=r["http_status"],
        duration_ms=r["duration_ms"],
        worker=r["worker"],
    )


# -- queues, workers, counts (duetime.store.core.queueing) -----------------------------------


def queue(r: Row, d: type[Decode]) -> Queue:
    return Queue(
        tenant_id=r["tenant_id"],
        name=r["name"],
        settings=QueueSettings(
            rate_limit_per_second=r["rate_limit_per_second"],
            burst=r["burst"],
            max_concurrency=r["max_concurrency"],
            max_concurrency_per_key=r["max_concurrency_per_key"],
            paused=d.flag(r["paused"]),
        ),
        updated_at=d.time(r["updated_at"]),
    )


def worker(r: Row, d: type[Decode]) -> WorkerInfo:
    return WorkerInfo(
        tenant_id=r["tenant_id"],
        worker_id=r["worker_id"],
        queues=d.ids(r["queues"]),  # a list of text, as ids are
        first_seen_at=d.time(r["first_seen_at"]),
        last_seen_at=d.time(r["last_seen_at"]),
        leases=r["leases"],
    )


def status_count(r: Row, d: type[Decode]) -> StatusCount:
    return StatusCount(
        tenant_id=r["tenant_id"], queue=r["queue"], status=_STATUS[r["status"]], count=r["n"]
    )


def queue_figure(r: Row, d: type[Decode]) -> tuple[str, TaskStatus | None, int, float]:
    """A ``queue_stats`` row: ``(queue, status, n, _)`` or ``(queue, None, _, lag seconds)``."""
    status = r["status"]
    return r["queue"], None if status is None else _STATUS[status], r["n"], r["lag"]


def count_key(r: Row, d: type[Decode]) -> CountKey:
    return CountKey(r["tenant_id"], r["queue"])


def recount(r: Row, d: type[Decode]) -> tuple[str, int, int]:
    """A ``counts_recount`` row: ``(status, real count, counted)``."""
    return r["status"], r["real"], r["counted"]
