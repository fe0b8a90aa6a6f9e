"""Domain values → JSON response bytes, by hand and with orjson.

Creating a task is the API's hot path, so responses skip pydantic and FastAPI's encoder: a task
becomes a plain dict (its stored payload text is spliced in unparsed with ``orjson.Fragment``) and
orjson writes it, with datetimes as RFC 3339 in UTC ``Z``. The shapes are documented by the
``*Out`` models of :mod:`duetime.api.schemas`; ``tests/api`` checks the two agree.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson
from starlette.responses import Response

from duetime.delivery.redact import public_target
from duetime.types import Attempt, SigningSecret, Task, Tenant

_OPTIONS = orjson.OPT_UTC_Z


def _default(value: Any) -> Any:
    # Stores may hand back read-only mappings (e.g. MappingProxyType) for JSON columns.
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"cannot encode {type(value).__name__} as JSON")


def dumps(content: Any) -> bytes:
    """JSON bytes; aware datetimes become RFC 3339 with ``Z`` for UTC."""
    return orjson.dumps(content, default=_default, option=_OPTIONS)


def json_response(
    content: Any, status: int = 200, headers: Mapping[str, str] | None = None
) -> Response:
    """A ready-made ``application/json`` response (FastAPI passes it through untouched)."""
    return Response(
        dumps(content), status_code=status, headers=headers, media_type="application/json"
    )


def task(t: Task) -> dict[str, Any]:
    """A task's public fields (SPEC §3): the create fields, then its state."""
    return {
        "id": t.id,
        "name": t.name,
        "queue": t.queue,
        "status": t.status.value,
        "run_at": t.run_at,
        "target": public_target(t.target),  # a broker URL's password is never shown
        "payload": orjson.Fragment(t.payload_json),
        "idempotency_key": t.idempotency_key,
        "priority": t.priority,
        "retry": t.retry.to_json(),
        "timeout_seconds": t.timeout_seconds,
        "depends_on": t.depends_on,
        "concurrency_key": t.concurrency_key,
        "labels": t.labels,
        "attempts": t.attempts,
        "schedule_id": t.schedule_id,
        "scheduled_for": t.scheduled_for,
        "created_at": t.created_at,
        "updated_at": t.updated_at,
        "started_at": t.started_at,
        "finished_at": t.finished_at,
        "last_error": t.last_error,
        "result": t.result,
        "next_attempt_at": t.next_attempt_at,
        "cancel_requested": t.cancel_requested,
        "payload_ref": t.payload_ref,
        "flow_key": t.flow_key,
        "absorbed": t.absorbed,
        "absorbed_at": t.absorbed_at,
    }


def tasks(items: Sequence[Task]) -> list[dict[str, Any]]:
    return [task(t) for t in items]


def attempt(a: Attempt) -> dict[str, Any]:
    return {
        "task_id": a.task_id,
        "number": a.number,
        "started_at": a.started_at,
        "finished_at": a.finished_at,
        "outcome": a.outcome.value,
        "error": a.error,
        "http_status": a.http_status,
        "duration_ms": a.duration_ms,
        "worker": a.worker,
        "logs": a.logs,
        "response": a.response,
    }


def signing_secret(s: SigningSecret) -> dict[str, Any]:
    return {
        "id": s.id,
        "secret": s.secret,
        "created_at": s.created_at,
        "expires_at": s.expires_at,
    }


def tenant(t: Tenant, secrets: Sequence[SigningSecret]) -> dict[str, Any]:
    return {
        "id": t.id,
        "name": t.name,
        "created_at": t.created_at,
        "signing_secrets": [signing_secret(s) for s in secrets],
    }
