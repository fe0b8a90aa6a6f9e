"""Calls for recurring schedules (SPEC §3 "Schedules").

::

    schedule = await client.create_schedule(
        cron="0 2 * * *", timezone="America/New_York",
        task={"target": http_target("https://example.com/report"), "payload": {"kind": "daily"}},
    )
    for when in await client.list_upcoming(schedule.id, count=5):
        print(when.at, when.note)       # 2026-03-08T03:00:00-04:00  "02:00 does not exist ..."
    await client.pause_schedule(schedule.id, note="migrating the database")
    async for tick in client.iter_ticks(schedule.id):
        print(tick.at, tick.outcome, tick.task_id)

Errors are the typed errors of :mod:`duetime.sdk.errors`; a bad expression, zone or template is
a ``ValidationError`` whose ``field`` names it (``cron``, ``timezone``, ``task.target.url``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

import orjson

from duetime import errors
from duetime.sdk._http import _Api, _segment
from duetime.sdk.models import (
    BackfillResult,
    Page,
    Schedule,
    ScheduleDeleted,
    ScheduleRevision,
    ScheduleTask,
    ScheduleTick,
    Task,
    UpcomingTime,
)

__all__ = ["KEEP", "ScheduleCalls"]


class _Keep:
    def __repr__(self) -> str:
        return "KEEP"


KEEP: Any = _Keep()
"""Marks an :meth:`ScheduleCalls.update_schedule` argument left as it is (``None`` clears
``start_at``/``end_at``)."""

_Params = list[tuple[str, str | int | float | bool | None]]


def _time(value: datetime, name: str) -> str:
    if value.tzinfo is None:
        raise errors.ValidationError(f"{name} must be timezone-aware", field=name)
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _settings(
    fields: Mapping[str, Any], *, keep_none: frozenset[str] = frozenset()
) -> dict[str, Any]:
    body: dict[str, Any] = {}
    for key, value in fields.items():
        if value is KEEP or (value is None and key not in keep_none):
            continue
        if isinstance(value, datetime):
            value = _time(value, key)
        elif key == "task" and value is not None:
            value = dict(value)
        body[key] = value
    return body


class ScheduleCalls(_Api):
    """``/v1/schedules``: create, read, list, change, pause, resume, trigger, backfill, and read
    the upcoming times, the tick ledger and the revisions."""

    async def create_schedule(
        self,
        *,
        task: ScheduleTask,
        cron: str | None = None,
        every: str | None = None,
        rrule: str | None = None,
        timezone: str | None = None,
        start_at: datetime | None = None,
        end_at: datetime | None = None,
        jitter_seconds: int | None = None,
        overlap: str | None = None,
        catchup: str | None = None,
        catchup_window_seconds: int | None = None,
        catchup_max_runs: int | None = None,
        dst: Mapping[str, str] | None = None,
    ) -> Schedule:
        """Create a schedule: exactly one of ``cron``, ``every`` (ISO 8601, e.g. ``PT15M``) or
        ``rrule``; ``task`` is the template each occurrence becomes (``target`` required; also
        ``name``, ``queue``, ``payload``, ``priority``, ``retry``, ``timeout_seconds``,
        ``labels``, ``concurrency_key``). Arguments left None take the server's defaults.
        Raises ``ValidationError`` naming the field."""
        body = _settings(
            {
                "cron": cron, "every": every, "rrule": rrule, "timezone": timezone,
                "start_at": start_at, "end_at": end_at, "jitter_seconds": jitter_seconds,
                "overlap": overlap, "catchup": catchup,
                "catchup_window_seconds": catchup_window_seconds,
                "catchup_max_runs": catchup_max_runs,
                "dst": None if dst is None else dict(dst), "task": task,
            }
        )  # fmt: skip
        return Schedule.model_validate(await self._request("POST", "/v1/schedules", body=body))

    async def ensure_schedule(
        self,
        key: str,
        *,
        task: ScheduleTask,
        cron: str | None = None,
        every: str | None = None,
        rrule: str | None = None,
        timezone: str | None = None,
        start_at: datetime | None = None,
        end_at: datetime | None = None,
        jitter_seconds: int | None = None,
        overlap: str | None = None,
        catchup: str | None = None,
        catchup_window_seconds: int | None = None,
        catchup_max_runs: int | None = None,
        dst: Mapping[str, str] | None = None,
    ) -> Schedule:
        """Declare the schedule named ``key`` (unique in the tenant): create it, or change it to
        match these settings, or leave it as it is when it matches (no revision). Safe to call
        at every start of every process: N processes declaring one key make exactly one
        schedule. The arguments are :meth:`create_schedule`'s, and the declaration is the whole
        schedule (what it leaves out takes the server's defaults); a pause is kept. The result's
        ``created`` says whether this call made it."""
        body = _settings(
            {
                "cron": cron, "every": every, "rrule": rrule, "timezone": timezone,
                "start_at": start_at, "end_at": end_at, "jitter_seconds": jitter_seconds,
                "overlap": overlap, "catchup": catchup,
                "catchup_window_seconds": catchup_window_seconds,
                "catchup_max_runs": catchup_max_runs,
                "dst": None if dst is None else dict(dst), "task": task,
            }
        )  # fmt: skip
        # PUT is idempotent: the client may repeat it after a timeout.
        response = await self._send("PUT", f"/v1/schedules/by-key/{_segment(key)}", body=body)
        data = orjson.loads(response.content)
        data["created"] = response.status_code == 201
        return Schedule.model_validate(data)

    async def get_schedule(self, schedule_id: str) -> Schedule:
        """One schedule. Raises ``NotFound``."""
        path = f"/v1/schedules/{_segment(schedule_id)}"
        return Schedule.model_validate(await self._request("GET", path))

    async def get_schedule_by_key(self, key: str) -> Schedule:
        """The schedule declared with ``key`` (:meth:`ensure_schedule`). Raises ``NotFound``."""
        path = f"/v1/schedules/by-key/{_segment(key)}"
        return Schedule.model_validate(await self._request("GET", path))

    async def list_schedules(
        self,
        *,
        paused: bool | None = None,
        queue: str | None = None,
        name: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> Page[Schedule]:
        """One page of schedules, newest first; ``queue``/``name`` match the task template.
        Pass ``next_cursor`` as ``cursor`` for the next page, or use :meth:`iter_schedules`."""
        params: _Params = []
        if paused is not None:
            params.append(("paused", "true" if paused else "false"))
        for key, value in (("queue", queue), ("name", name), ("cursor", cursor)):
            if value is not None:
                params.append((key, value))
        if limit is not None:
            params.append(("limit", limit))
        data = await self._request("GET", "/v1/schedules", params=params)
        return Page[Schedule].model_validate(data)

    async def iter_schedules(
        self,
        *,
        paused: bool | None = None,
        queue: str | None = None,
        name: str | None = None,
        page_size: int | None = None,
    ) -> AsyncIterator[Schedule]:
        """Every matching schedule, newest first, page by page."""
        cursor: str | None = None
        while True:
            page = await self.list_schedules(
                paused=paused, queue=queue, name=name, limit=page_size, cursor=cursor
            )
            for schedule in page.items:
                yield schedule
            if not page.next_cursor or not page.items:
                return
            cursor = page.next_cursor

    async def update_schedule(
        self,
        schedule_id: str,
        *,
        cron: str = KEEP,
        every: str = KEEP,
        rrule: str = KEEP,
        timezone: str = KEEP,
        start_at: datetime | None = KEEP,
        end_at: datetime | None = KEEP,
        jitter_seconds: int = KEEP,
        overlap: str = KEEP,
        catchup: str = KEEP,
        catchup_window_seconds: int = KEEP,
        catchup_max_runs: int = KEEP,
        dst: Mapping[str, str] = KEEP,
        task: ScheduleTask = KEEP,
    ) -> Schedule:
        """Change the arguments given (``start_at=None``/``end_at=None`` clear them; a new
        expression replaces the old one; ``task`` replaces the whole template). Occurrences not
        started yet are made again under the new settings. Raises ``NotFound``,
        ``ValidationError``."""
        body = _settings(
            {
                "cron": cron, "every": every, "rrule": rrule, "timezone": timezone,
                "start_at": start_at, "end_at": end_at, "jitter_seconds": jitter_seconds,
                "overlap": overlap, "catchup": catchup,
                "catchup_window_seconds": catchup_window_seconds,
                "catchup_max_runs": catchup_max_runs,
                "dst": dst if dst is KEEP else dict(dst), "task": task,
            },
            keep_none=frozenset({"start_at", "end_at"}),
        )  # fmt: skip
        path = f"/v1/schedules/{_segment(schedule_id)}"
        return Schedule.model_validate(await self._request("PATCH", path, body=body))

    async def delete_schedule(self, schedule_id: str) -> ScheduleDeleted:
        """Delete a schedule; its pending occurrences are cancelled. Raises ``NotFound``."""
        path = f"/v1/schedules/{_segment(schedule_id)}"
        return ScheduleDeleted.model_validate(await self._request("DELETE", path))

    async def pause_schedule(self, schedule_id: str, *, note: str | None = None) -> Schedule:
        """Stop making occurrences (the instants that pass are recorded ``skipped_paused``)."""
        path = f"/v1/schedules/{_segment(schedule_id)}/pause"
        body = {} if note is None else {"note": note}
        return Schedule.model_validate(await self._request("POST", path, body=body))

    async def resume_schedule(self, schedule_id: str, *, catchup: str | None = None) -> Schedule:
        """Make occurrences again from now on; ``catchup`` (``latest`` or ``all``) also runs
        occurrences that fell in the pause (default: none of them)."""
        path = f"/v1/schedules/{_segment(schedule_id)}/resume"
        body = {} if catchup is None else {"catchup": catchup}
        return Schedule.model_validate(await self._request("POST", path, body=body))

    async def trigger_schedule(self, schedule_id: str) -> Task:
        """Run one occurrence now (also while paused); returns its task."""
        path = f"/v1/schedules/{_segment(schedule_id)}/trigger"
        return Task.model_validate(await self._request("POST", path))

    async def backfill_schedule(
        self,
        schedule_id: str,
        *,
        start: datetime,
        end: datetime,
        max_runs: int | None = None,
        rate_per_second: float | None = None,
    ) -> BackfillResult:
        """Make the occurrences in ``[start, end]`` (past), at most ``max_runs`` (server default
        1000), released at ``rate_per_second`` (default 10). Occurrences that have their task
        already are left as they are."""
        body: dict[str, Any] = {"start": _time(start, "start"), "end": _time(end, "end")}
        if max_runs is not None:
            body["max_runs"] = max_runs
        if rate_per_second is not None:
            body["rate_per_second"] = rate_per_second
        path = f"/v1/schedules/{_segment(schedule_id)}/backfill"
        return BackfillResult.model_validate(await self._request("POST", path, body=body))

    async def list_upcoming(
        self, schedule_id: str, *, after: datetime | None = None, count: int | None = None
    ) -> Page[UpcomingTime]:
        """The next ``count`` (≤ 1000, default 10) fire times after ``after`` (default now), in
        the schedule's zone offset, with a note when DST moved one; one page."""
        params: _Params = []
        if after is not None:
            params.append(("after", _time(after, "after")))
        if count is not None:
            params.append(("count", count))
        path = f"/v1/schedules/{_segment(schedule_id)}/upcoming"
        data = await self._request("GET", path, params=params)
        return Page[UpcomingTime].model_validate(data)

    async def list_ticks(
        self,
        schedule_id: str,
        *,
        outcome: str | Iterable[str] | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> Page[ScheduleTick]:
        """One page of the tick ledger, newest instant first; ``outcome`` narrows it."""
        params: _Params = []
        if outcome is not None:
            outcomes = [outcome] if isinstance(outcome, str) else list(outcome)
            params += [("outcome", o) for o in outcomes]
        if limit is not None:
            params.append(("limit", limit))
        if cursor is not None:
            params.append(("cursor", cursor))
        path = f"/v1/schedules/{_segment(schedule_id)}/ticks"
        return Page[ScheduleTick].model_validate(await self._request("GET", path, params=params))

    async def iter_ticks(
        self,
        schedule_id: str,
        *,
        outcome: str | Iterable[str] | None = None,
        page_size: int | None = None,
    ) -> AsyncIterator[ScheduleTick]:
        """The whole tick ledger, newest instant first, page by page."""
        if outcome is not None and not isinstance(outcome, str):
            outcome = list(outcome)
        cursor: str | None = None
        while True:
            page = await self.list_ticks(
                schedule_id, outcome=outcome, limit=page_size, cursor=cursor
            )
            for tick in page.items:
                yield tick
            if not page.next_cursor or not page.items:
                return
            cursor = page.next_cursor

    async def list_revisions(
        self, schedule_id: str, *, limit: int | None = None, cursor: str | None = None
    ) -> Page[ScheduleRevision]:
        """One page of the schedule's revisions, newest first."""
        params: _Params = []
        if limit is not None:
            params.append(("limit", limit))
        if cursor is not None:
            params.append(("cursor", cursor))
        path = f"/v1/schedules/{_segment(schedule_id)}/revisions"
        data = await self._request("GET", path, params=params)
        return Page[ScheduleRevision].model_validate(data)
