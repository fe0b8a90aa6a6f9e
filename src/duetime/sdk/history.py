"""History calls (SPEC §8): the tenant's audit trail over the hot and cold tiers
(``GET /v1/history``)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from duetime.sdk._http import _Api
from duetime.sdk.models import Page, _Response

__all__ = ["HistoryCalls", "HistoryEvent"]


class HistoryEvent(_Response):
    """One audit record: a task's state change (``kind="task"``), an attempt (``"attempt"``) or
    a schedule change (``"schedule"``; the revision's action in ``to_status``)."""

    id: int
    at: datetime
    kind: str
    task_id: str | None = None
    schedule_id: str | None = None
    name: str | None = None
    queue: str | None = None
    labels: dict[str, str] = {}
    from_status: str | None = None
    to_status: str | None = None
    actor: str | None = None
    fields: dict[str, Any] | None = None
    attempt: int | None = None
    outcome: str | None = None
    error: str | None = None
    http_status: int | None = None
    duration_ms: float | None = None
    worker: str | None = None
    logs: str | None = None
    response: str | None = None


def _words(value: str | Iterable[str] | None) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


def _when(value: datetime, name: str) -> str:
    if value.tzinfo is None:
        raise ValueError(f"{name} must be timezone-aware")
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


class HistoryCalls(_Api):
    """``GET /v1/history``: one page, or every page."""

    async def list_history(
        self,
        *,
        task_id: str | None = None,
        schedule_id: str | None = None,
        name: str | None = None,
        queue: str | None = None,
        kind: str | Iterable[str] | None = None,
        outcome: str | Iterable[str] | None = None,
        labels: Mapping[str, str] | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> Page[HistoryEvent]:
        """One page of the tenant's records matching every filter, newest first, over the hot
        store and the archive; ``since`` (inclusive) and ``until`` (exclusive) bound the time."""
        params: list[tuple[str, str | int | float | bool | None]] = []
        for key, value in (
            ("task_id", task_id),
            ("schedule_id", schedule_id),
            ("name", name),
            ("queue", queue),
        ):
            if value is not None:
                params.append((key, value))
        params += [("kind", k) for k in _words(kind)]
        params += [("outcome", o) for o in _words(outcome)]
        params += [("label", f"{k}:{v}") for k, v in (labels or {}).items()]
        if since is not None:
            params.append(("since", _when(since, "since")))
        if until is not None:
            params.append(("until", _when(until, "until")))
        if limit is not None:
            params.append(("limit", str(limit)))
        if cursor is not None:
            params.append(("cursor", cursor))
        data = await self._request("GET", "/v1/history", params=params)
        return Page[HistoryEvent].model_validate(data)

    async def iter_history(
        self,
        *,
        task_id: str | None = None,
        schedule_id: str | None = None,
        name: str | None = None,
        queue: str | None = None,
        kind: str | Iterable[str] | None = None,
        outcome: str | Iterable[str] | None = None,
        labels: Mapping[str, str] | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        page_size: int | None = None,
    ) -> AsyncIterator[HistoryEvent]:
        """Every matching record, newest first, following cursors (filters as in
        :meth:`list_history`)."""
        kinds, outcomes = _words(kind), _words(outcome)
        cursor: str | None = None
        while True:
            page = await self.list_history(
                task_id=task_id, schedule_id=schedule_id, name=name, queue=queue, kind=kinds,
                outcome=outcomes, labels=labels, since=since, until=until, limit=page_size,
                cursor=cursor,
            )  # fmt: skip
            for event in page.items:
                yield event
            if not page.next_cursor or not page.items:
                return
            cursor = page.next_cursor
