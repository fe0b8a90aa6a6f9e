"""Database rows to duetime values, in one place. asyncpg returns ``timestamptz`` as aware UTC
datetimes, ``uuid`` as UUID objects (made ``str`` here) and ``jsonb`` as JSON text."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson
from asyncpg import Record

from duetime.store.recorded import stored_retry_policy
from duetime.types import (
    ApiKey,
    Attempt,
    AttemptOutcome,
    Lease,
    NewTask,
    RetryPolicy,
    SigningSecret,
    Task,
    TaskStatus,
    Tenant,
)

Row = Record

# Enum lookups by value are slow-ish; these run once per row on the hot path.
_STATUS = {s.value: s for s in TaskStatus}
_OUTCOME = {o.value: o for o in AttemptOutcome}


_retry_policies: dict[str, RetryPolicy] = {}


def _retry_policy(text: str) -> RetryPolicy:
    # Most tasks share a handful of policies; RetryPolicy is frozen, so one value can be shared.
    policy = _retry_policies.get(text)
    if policy is None:
        if len(_retry_policies) >= 1024:
            _retry_policies.clear()
        policy = _retry_policies[text] = stored_retry_policy(text)
    return policy


def task_from_row(r: Row) -> Task:
    """A ``tasks`` row (every column) as a :class:`Task`."""
    result = r["result"]
    lease_id = r["lease_id"]
    parents = r["depends_on"]
    return Task(
        id=str(r["id"]),
        tenant_id=r["tenant_id"],
        name=r["name"],
        queue=r["queue"],
        status=_STATUS[r["status"]],
        version=r["version"],
        target=orjson.loads(r["target"]),
        payload_json=r["payload"],
        idempotency_key=r["idempotency_key"],
        priority=r["priority"],
        retry=_retry_policy(r["retry"]),
        timeout_seconds=r["timeout_seconds"],
        depends_on=tuple(str(p) for p in parents) if parents else (),
        concurrency_key=r["concurrency_key"],
        labels=orjson.loads(r["labels"]),
        attempts=r["attempts"],
        series_start=r["series_start"],
        schedule_id=r["schedule_id"],
        scheduled_for=r["scheduled_for"],
        run_at=r["run_at"],
        due_at=r["due_at"],
        created_at=r["created_at"],
        updated_at=r["updated_at"],
        started_at=r["started_at"],
        finished_at=r["finished_at"],
        last_error=r["last_error"],
        result=None if result is None else orjson.loads(result),
        lease_id=None if lease_id is None else str(lease_id),
        lease_expires_at=r["lease_expires_at"],
        worker_id=r["worker_id"],
        cancel_requested=r["cancel_requested"],
        traceparent=r["traceparent"],
        request_hash=r.get("request_hash"),
        payload_ref=r.get("payload_ref"),
    )


def lease_from_row(r: Row) -> Lease:
    """A ``running`` task row as the :class:`Lease` its holder works under."""
    return Lease.of(task_from_row(r))


def attempt_from_row(r: Row) -> Attempt:
    return Attempt(
        task_id=str(r["task_id"]),
        number=r["number"],
        started_at=r["started_at"],
        finished_at=r["finished_at"],
        outcome=_OUTCOME[r["outcome"]],
        error=r["error"],
        http_status=r["http_status"],
        duration_ms=r["duration_ms"],
        worker=r["worker"],
    )


def tenant_from_row(r: Row) -> Tenant:
    return Tenant(id=r["id"], name=r["name"], created_at=r["created_at"])


def api_key_from_row(r: Row) -> ApiKey:
    return ApiKey(
        id=r["id"], tenant_id=r["tenant_id"], key_hash=r["key_hash"], created_at=r["created_at"]
    )


def signing_secret_from_row(r: Row) -> SigningSecret:
    return SigningSecret(
        id=r["id"],
        tenant_id=r["tenant_id"],
        secret=r["secret"],
        created_at=r["created_at"],
        expires_at=r["expires_at"],
    )


def _plain(value: Any) -> Any:
    # orjson serializes dicts only; callers may hand us any Mapping (e.g. MappingProxyType).
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def to_json(value: Any) -> str:
    """JSON text of ``value`` (any Mapping counts as an object)."""
    return orjson.dumps(value, default=_plain).decode()


def task_input_records(
    tasks: list[NewTask],
    ids: list[str],
    parents: list[tuple[str, ...]],
    pending: list[int],
    dep_failed: list[bool],
) -> list[tuple[Any, ...]]:
    """One ``task_input`` composite (see the migration) per task, for ``task_insert``."""
    retry_cache: dict[RetryPolicy, str] = {}

    def retry_json(policy: RetryPolicy) -> str:
        text = retry_cache.get(policy)
        if text is None:
            text = retry_cache[policy] = to_json(policy.to_json())
        return text

    return [
        (
            task_id,
            t.tenant_id,
            t.name,
            t.queue,
            str(t.target["type"]),
            to_json(t.target),
            t.payload_json,
            t.idempotency_key,
            t.priority,
            retry_json(t.retry),
            float(t.timeout_seconds),
            list(group),
            waiting,
            failed,
            t.concurrency_key,
            to_json(t.labels),
            t.schedule_id,
            t.scheduled_for,
            t.run_at,
            # The attributes migrations added, in the order they ran (0008_task_payload_ref,
            # 0008_task_request_hash, 0009_observe): a composite is filled by position.
            t.payload_ref,
            t.request_hash,
            t.traceparent,
        )
        for t, task_id, group, waiting, failed in zip(
            tasks, ids, parents, pending, dep_failed, strict=True
        )
    ]
