"""Database rows to duetime values, in one place. asyncpg returns ``timestamptz`` as aware UTC
datetimes, ``uuid`` as UUID objects (made ``str`` here) and ``jsonb`` as JSON text."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from duetime.types import (
    NewTask,
    RetryPolicy,
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
            list(group) if group else None,
            waiting,
            failed,
            t.concurrency_key,
            to_json(t.labels) if t.labels else "{}",
            t.schedule_id,
            t.scheduled_for,
            t.run_at,
            # The attributes migrations added, in the order they ran (0008_task_payload_ref,
            # 0008_task_request_hash, 0009_observe, 0026_keyed_flow): a composite is filled by
            # position.
            t.payload_ref,
            t.request_hash,
            t.traceparent,
            t.flow_key,  # 0026_keyed_flow
        )
        for t, task_id, group, waiting, failed in zip(
            tasks, ids, parents, pending, dep_failed, strict=True
        )
    ]
