"""Bulk calls (SPEC §3): replay or cancel every task matching a filter, throttled on the server
(``POST /v1/tasks/replay``, ``POST /v1/tasks/cancel``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict

from duetime.sdk._http import _Api
from duetime.types import TaskStatus

__all__ = ["BulkCalls", "BulkResult"]


class BulkResult(BaseModel):
    """What a bulk call did: tasks that matched (at most ``max_tasks``) and tasks changed."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    matched: int
    changed: int


def _rfc3339(value: datetime) -> str:
    if value.tzinfo is None:
        raise ValueError("run_after/run_before must be timezone-aware")
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _bulk_body(
    status: TaskStatus | str | Iterable[TaskStatus | str] | None,
    queue: str | None,
    name: str | None,
    schedule_id: str | None,
    labels: Mapping[str, str] | None,
    run_after: datetime | None,
    run_before: datetime | None,
    max_tasks: int,
    rate_per_second: float,
) -> dict[str, Any]:
    body: dict[str, Any] = {"max_tasks": max_tasks, "rate_per_second": rate_per_second}
    if status is not None:
        words = [status] if isinstance(status, str) else list(status)
        body["status"] = [str(s) for s in words]
    optional = {"queue": queue, "name": name, "schedule_id": schedule_id}
    body.update({k: v for k, v in optional.items() if v is not None})
    if labels:
        body["labels"] = dict(labels)
    if run_after is not None:
        body["run_after"] = _rfc3339(run_after)
    if run_before is not None:
        body["run_before"] = _rfc3339(run_before)
    return body


class BulkCalls(_Api):
    """Replay and cancel by filter. The server throttles the changes to ``rate_per_second`` and
    answers when done, so the read timeout of these calls is stretched by
    ``max_tasks / rate_per_second`` seconds."""

    async def _bulk(self, path: str, body: dict[str, Any]) -> BulkResult:
        longest = body["max_tasks"] / body["rate_per_second"]
        response = await self._send("POST", path, body=body, extra_read_seconds=longest)
        return BulkResult.model_validate_json(response.content)

    async def replay_tasks(
        self,
        *,
        status: TaskStatus | str | Iterable[TaskStatus | str] | None = None,
        queue: str | None = None,
        name: str | None = None,
        schedule_id: str | None = None,
        labels: Mapping[str, str] | None = None,
        run_after: datetime | None = None,
        run_before: datetime | None = None,
        max_tasks: int = 1000,
        rate_per_second: float = 100.0,
    ) -> BulkResult:
        """Replay (as :meth:`retry_task`) up to ``max_tasks`` tasks matching every filter given,
        newest first, at most ``rate_per_second`` per second. ``status`` defaults to ``failed``
        (the dead-letter set); only ``failed``/``cancelled`` are allowed (else
        ``ValidationError``)."""
        body = _bulk_body(
            status, queue, name, schedule_id, labels, run_after, run_before,
            max_tasks, rate_per_second,
        )  # fmt: skip
        return await self._bulk("/v1/tasks/replay", body)

    async def cancel_tasks(
        self,
        *,
        status: TaskStatus | str | Iterable[TaskStatus | str] | None = None,
        queue: str | None = None,
        name: str | None = None,
        schedule_id: str | None = None,
        labels: Mapping[str, str] | None = None,
        run_after: datetime | None = None,
        run_before: datetime | None = None,
        max_tasks: int = 1000,
        rate_per_second: float = 100.0,
    ) -> BulkResult:
        """Cancel (as :meth:`cancel_task`) up to ``max_tasks`` unfinished tasks matching every
        filter given, newest first, at most ``rate_per_second`` per second. ``status`` defaults
        to every unfinished status; a finished one is a ``ValidationError``."""
        body = _bulk_body(
            status, queue, name, schedule_id, labels, run_after, run_before,
            max_tasks, rate_per_second,
        )  # fmt: skip
        return await self._bulk("/v1/tasks/cancel", body)
