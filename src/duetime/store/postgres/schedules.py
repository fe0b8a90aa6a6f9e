"""Schedules on PostgreSQL (SPEC §3 "Schedules"); contracts in :mod:`duetime.store.protocols`.

How this backend keeps them:

* One task per occurrence is the unique index ``(schedule_id, scheduled_for)``: every occurrence
  insert says ``ON CONFLICT ... DO NOTHING``, so two nodes, a retried round or a fail-over can
  never make a second task.
* A materializer round's plans apply in one transaction: the schedules whose plan still holds
  (same version, cursor and buffer) are locked first (``schedule_lock_guarded``); a racing node
  blocks on those locks, then finds the cursor moved and writes nothing for them. Tasks, ticks and
  cursors go in as one statement each (arrays through ``unnest``).
* User changes lock the schedule row (``FOR UPDATE``), check the version, and write the new state
  computed by :func:`~duetime.store.schedule_change.apply_change` with a revision.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from importlib import resources
from typing import TYPE_CHECKING, Any

import asyncpg
import orjson

from duetime.errors import Conflict, NotFound
from duetime.ids import new_id
from duetime.store.isolation import readable
from duetime.store.postgres import rows
from duetime.store.postgres.sql import QUERIES, parse_queries
from duetime.store.schedule_change import BUFFERED_DROPPED_BY_PAUSE, apply_change
from duetime.types import (
    CatchupPolicy,
    NewSchedule,
    NewTask,
    OverlapPolicy,
    Schedule,
    ScheduleAdvance,
    ScheduleChange,
    ScheduleConfig,
    ScheduleDue,
    ScheduleFilter,
    ScheduleRevision,
    Task,
    TaskCreated,
    TaskStatus,
    Tick,
    TickFilter,
    TickOutcome,
)

if TYPE_CHECKING:
    from asyncpg.pool import PoolConnectionProxy

    Conn = PoolConnectionProxy[asyncpg.Record]

SQ: dict[str, str] = parse_queries(
    resources.files(__package__).joinpath("schedules.sql").read_text(encoding="utf-8")
)
"""The named queries of ``schedules.sql``."""

_Key = tuple[str, datetime]


def schedule_from_row(r: asyncpg.Record) -> Schedule:
    config = ScheduleConfig(
        cron=r["cron"],
        every=r["every"],
        rrule=r["rrule"],
        timezone=r["timezone"],
        start_at=r["start_at"],
        end_at=r["end_at"],
        jitter_seconds=r["jitter_seconds"],
        dst_nonexistent=r["dst_nonexistent"],
        dst_ambiguous=r["dst_ambiguous"],
        overlap=OverlapPolicy(r["overlap"]),
        catchup=CatchupPolicy(r["catchup"]),
        catchup_window_seconds=r["catchup_window_seconds"],
        catchup_max_runs=r["catchup_max_runs"],
        task=orjson.loads(r["task"]),
    )
    last = r["last_task_id"]
    return Schedule(
        id=r["id"],
        tenant_id=r["tenant_id"],
        config=config,
        anchor_at=r["anchor_at"],
        paused=r["paused"],
        pause_note=r["pause_note"],
        paused_at=r["paused_at"],
        resumed_at=r["resumed_at"],
        resume_catchup=None if r["resume_catchup"] is None else CatchupPolicy(r["resume_catchup"]),
        next_run_at=r["next_run_at"],
        materialized_until=r["materialized_until"],
        buffered_at=r["buffered_at"],
        last_task_id=None if last is None else str(last),
        version=r["version"],
        created_at=r["created_at"],
        updated_at=r["updated_at"],
        deleted=r["deleted"],
        key=r.get("key"),
    )


def _config_args(c: ScheduleConfig) -> list[Any]:
    return [
        c.cron, c.every, c.rrule, c.timezone, c.start_at, c.end_at, c.jitter_seconds,
        c.dst_nonexistent, c.dst_ambiguous, rows.to_json(c.task), c.overlap.value,
        c.catchup.value, c.catchup_window_seconds, c.catchup_max_runs,
    ]  # fmt: skip


def _tick_from_row(r: asyncpg.Record) -> Tick:
    task_id = r["task_id"]
    return Tick(
        schedule_id=r["schedule_id"],
        nominal=r["nominal"],
        outcome=TickOutcome(r["outcome"]),
        task_id=None if task_id is None else str(task_id),
        detail=r["detail"],
        recorded_at=r["recorded_at"],
    )


def _revision_from_row(r: asyncpg.Record) -> ScheduleRevision:
    return ScheduleRevision(
        id=r["id"],
        schedule_id=r["schedule_id"],
        at=r["at"],
        actor=r["actor"],
        action=r["action"],
        before=orjson.loads(r["before"]),
        after=orjson.loads(r["after"]),
    )


class ScheduleOps:
    """Schedule methods of :class:`~duetime.store.postgres.backend.PostgresStore` (a mixin: the
    store provides connections, the pinned time and ``_announce`` for wake-ups)."""

    if TYPE_CHECKING:

        def _pinned(self) -> datetime | None: ...

        def _connection(self) -> AbstractAsyncContextManager[Conn]: ...

        def _transaction(self) -> AbstractAsyncContextManager[Conn]: ...

        def _announce(self, statuses: Iterable[str]) -> None: ...

    # -- the API's side ------------------------------------------------------------------------

    async def schedule_create(self, new: NewSchedule) -> Schedule:
        pinned = self._pinned()
        schedule_id = new_id()
        try:
            async with self._transaction() as conn:
                row = await conn.fetchrow(
                    SQ["schedule_insert"], pinned, schedule_id, new.tenant_id,
                    *_config_args(new.config), new.anchor_at, new.materialized_until,
                    new.next_run_at, new.actor, rows.to_json(new.revision),
                )  # fmt: skip
                if new.key is not None:
                    row = await conn.fetchrow(SQ["schedule_set_key"], schedule_id, new.key)
        except asyncpg.UniqueViolationError as exc:  # rolled back: nothing is made
            raise Conflict(f"a schedule with key {new.key!r} exists already") from exc
        assert row is not None
        return schedule_from_row(row)

    async def schedule_get_by_key(self, tenant_id: str, key: str) -> Schedule | None:
        async with self._connection() as conn:
            row = await conn.fetchrow(SQ["schedule_get_by_key"], tenant_id, key)
        return None if row is None else schedule_from_row(row)

    async def schedule_get(self, tenant_id: str, schedule_id: str) -> Schedule | None:
        async with self._connection() as conn:
            row = await conn.fetchrow(SQ["schedule_get"], schedule_id, tenant_id)
        return None if row is None else schedule_from_row(row)

    async def _get_or_404(self, conn: Conn, tenant_id: str, schedule_id: str) -> None:
        if await conn.fetchrow(SQ["schedule_get"], schedule_id, tenant_id) is None:
            raise NotFound(f"no schedule {schedule_id!r}")

    async def schedule_list(self, query: ScheduleFilter) -> list[Schedule]:
        async with self._connection() as conn:
            found = await conn.fetch(
                SQ["schedule_list"], query.tenant_id, query.cursor, query.paused, query.queue,
                query.name, max(0, query.limit),
            )  # fmt: skip
        return [schedule_from_row(r) for r in found]

    async def schedule_update(
        self, tenant_id: str, schedule_id: str, change: ScheduleChange
    ) -> Schedule:
        pinned = self._pinned()
        async with self._transaction() as conn:
            row = await conn.fetchrow(SQ["schedule_get_for_update"], schedule_id, tenant_id)
            if row is None:
                raise NotFound(f"no schedule {schedule_id!r}")
            current = schedule_from_row(row)
            if current.version != change.expected_version:
                raise Conflict(
                    f"schedule {schedule_id} changed since version {change.expected_version} "
                    f"(now {current.version}); read it again and retry"
                )
            now: datetime = await conn.fetchval(SQ["schedule_now"], pinned)
            s = apply_change(current, change, now)
            if current.buffered_at is not None and s.buffered_at is None:
                await conn.execute(
                    SQ["schedule_tick_insert_many"], pinned, [schedule_id],
                    [current.buffered_at], [TickOutcome.SKIPPED_PAUSED.value], [None],
                    [BUFFERED_DROPPED_BY_PAUSE],
                )  # fmt: skip
            if change.rewind_to is not None:
                dropped = await conn.fetch(
                    SQ["schedule_tasks_drop_future"], schedule_id, change.rewind_to
                )
                await conn.execute(
                    SQ["schedule_ticks_drop_future"], schedule_id, change.rewind_to,
                    [r["id"] for r in dropped],
                )  # fmt: skip
            written = await conn.fetchrow(
                SQ["schedule_write"], pinned, schedule_id, *_config_args(s.config), s.paused,
                s.pause_note, s.paused_at, s.resumed_at,
                None if s.resume_catchup is None else s.resume_catchup.value, s.next_run_at,
                s.materialized_until, s.buffered_at,
            )  # fmt: skip
            await conn.execute(
                SQ["schedule_revision_insert"], pinned, schedule_id, change.actor, change.action,
                rows.to_json(change.before), rows.to_json(change.after),
            )  # fmt: skip
        assert written is not None
        return schedule_from_row(written)

    async def schedule_delete(
        self, tenant_id: str, schedule_id: str, actor: str | None, before: Mapping[str, Any]
    ) -> int:
        pinned = self._pinned()
        async with self._transaction() as conn:
            if (
                await conn.fetchval(SQ["schedule_mark_deleted"], pinned, schedule_id, tenant_id)
                is None
            ):
                raise NotFound(f"no schedule {schedule_id!r}")
            cancelled = await conn.fetch(SQ["schedule_tasks_cancel_pending"], pinned, schedule_id)
            parents = [r["id"] for r in cancelled if r["has_dependents"]]
            if parents:
                await conn.execute(QUERIES["task_deps_fail"], pinned, parents)
            await conn.execute(
                SQ["schedule_revision_insert"], pinned, schedule_id, actor, "delete",
                rows.to_json(before), '{"deleted": true}',
            )  # fmt: skip
        return len(cancelled)

    async def schedule_occurrences_create(
        self, tenant_id: str, schedule_id: str, tasks: Sequence[NewTask], outcome: TickOutcome,
        detail: str | None = None,
    ) -> list[TaskCreated]:  # fmt: skip
        pinned = self._pinned()
        async with self._transaction() as conn:
            await self._get_or_404(conn, tenant_id, schedule_id)
            made = await self._make_tasks(conn, pinned, tasks)
            fresh = [(t, created) for t, created in made if created]
            await self._ticks(
                conn, pinned,
                [(schedule_id, t.scheduled_for, outcome.value, t.id, detail)
                 for t, _ in fresh if t.scheduled_for is not None],
            )  # fmt: skip
        self._announce(t.status for t, _ in fresh)
        return [TaskCreated(task=t, created=created) for t, created in made]

    async def schedule_tick_list(self, query: TickFilter) -> list[Tick]:
        outcomes = [o.value for o in query.outcomes] or None
        at, outcome = query.cursor if query.cursor is not None else (None, None)
        async with self._connection() as conn:
            await self._get_or_404(conn, query.tenant_id, query.schedule_id)
            found = await conn.fetch(
                SQ["schedule_tick_list"], query.schedule_id, outcomes, at, outcome,
                max(0, query.limit),
            )  # fmt: skip
        return [_tick_from_row(r) for r in found]

    async def schedule_revision_list(
        self, tenant_id: str, schedule_id: str, *, limit: int = 100, cursor: int | None = None
    ) -> list[ScheduleRevision]:
        async with self._connection() as conn:
            await self._get_or_404(conn, tenant_id, schedule_id)
            found = await conn.fetch(
                SQ["schedule_revision_list"], schedule_id, cursor, max(0, limit)
            )
        return [_revision_from_row(r) for r in found]

    # -- the materializer's side ---------------------------------------------------------------

    async def schedule_due(self, now: datetime, horizon: datetime, limit: int) -> list[ScheduleDue]:
        async with self._connection() as conn:
            found = await conn.fetch(SQ["schedule_due"], now, horizon, limit)
        return readable(
            found,
            lambda r: ScheduleDue(
                schedule_from_row(r),
                None if r["last_task_status"] is None else TaskStatus(r["last_task_status"]),
                r["waiting"],
            ),
            "schedule",
        )

    async def schedule_advance(self, advances: Sequence[ScheduleAdvance]) -> list[bool]:
        if not advances:
            return []
        pinned = self._pinned()
        made: list[tuple[Task, bool]] = []
        async with self._transaction() as conn:
            locked = {
                r["id"]
                for r in await conn.fetch(
                    SQ["schedule_lock_guarded"],
                    [a.schedule_id for a in advances],
                    [a.expected_version for a in advances],
                    [a.expected_cursor for a in advances],
                    [a.expected_buffered_at for a in advances],
                )
            }
            todo = [a for a in advances if a.schedule_id in locked]
            if todo:
                made = await self._make_tasks(conn, pinned, [t for a in todo for t in a.tasks])
                await self._apply(conn, pinned, todo, made)
        self._announce(t.status for t, created in made if created)
        return [a.schedule_id in locked for a in advances]

    async def _apply(
        self, conn: Conn, pinned: datetime | None, todo: list[ScheduleAdvance],
        made: list[tuple[Task, bool]],
    ) -> None:  # fmt: skip
        """Write the ticks and the new cursors of the locked advances."""
        task_of: dict[_Key, str] = {
            (t.schedule_id, t.scheduled_for): t.id
            for t, _ in made
            if t.schedule_id is not None and t.scheduled_for is not None
        }
        ticks = [
            (
                a.schedule_id, k.nominal, k.outcome.value,
                task_of.get((a.schedule_id, k.nominal)) if k.with_task else None, k.detail,
            )
            for a in todo
            for k in a.ticks
        ]  # fmt: skip
        await self._ticks(conn, pinned, ticks)
        await conn.execute(
            SQ["schedule_advance_many"],
            [a.schedule_id for a in todo],
            [a.materialized_until for a in todo],
            [a.next_run_at for a in todo],
            [a.buffered_at for a in todo],
            [
                None if a.last_task_for is None else task_of.get((a.schedule_id, a.last_task_for))
                for a in todo
            ],
            [a.clear_resume for a in todo],
        )

    async def _ticks(
        self, conn: Conn, pinned: datetime | None,
        ticks: Sequence[tuple[str, datetime | None, str, str | None, str | None]],
    ) -> None:  # fmt: skip
        if not ticks:
            return
        columns = list(zip(*ticks, strict=True))
        await conn.execute(SQ["schedule_tick_insert_many"], pinned, *(list(c) for c in columns))

    async def _make_tasks(
        self, conn: Conn, pinned: datetime | None, tasks: Sequence[NewTask]
    ) -> list[tuple[Task, bool]]:
        """Insert occurrence tasks (conflicts on ``(schedule_id, scheduled_for)`` do nothing);
        every input gets its task, with True when this call made it."""
        if not tasks:
            return []
        keys: list[_Key] = []
        for t in tasks:
            if t.schedule_id is None or t.scheduled_for is None:
                raise ValueError("an occurrence's task needs schedule_id and scheduled_for")
            keys.append((t.schedule_id, t.scheduled_for))
        fresh: dict[_Key, NewTask] = {}
        for key, t in zip(keys, tasks, strict=True):
            fresh.setdefault(key, t)
        batch = list(fresh.values())
        ids = [new_id() for _ in batch]
        records = rows.task_input_records(
            batch, ids, [()] * len(batch), [0] * len(batch), [False] * len(batch)
        )
        inserted = {
            (r["schedule_id"], r["scheduled_for"]): rows.task_from_row(r)
            for r in await conn.fetch(SQ["schedule_task_insert"], pinned, records)
        }
        known: dict[_Key, Task] = {}
        missing = [k for k in fresh if k not in inserted]
        if missing:
            found = await conn.fetch(
                SQ["schedule_tasks_at"], [k[0] for k in missing], [k[1] for k in missing]
            )
            known = {(r["schedule_id"], r["scheduled_for"]): rows.task_from_row(r) for r in found}
        result: list[tuple[Task, bool]] = []
        for key in keys:
            if key in inserted:
                result.append((inserted.pop(key), True))
                known[key] = result[-1][0]
            else:
                result.append((known[key], False))
        return result
