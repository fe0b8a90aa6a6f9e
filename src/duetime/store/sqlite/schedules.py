"""Schedule transactions of the SQLite store (SPEC §3 "Schedules"); contracts in
:mod:`duetime.store.protocols`.

Every function runs on the store's database thread inside the caller's transaction (a write
transaction for changes: ``BEGIN IMMEDIATE`` serializes every writer, so a guard read followed by
a write cannot interleave with another node's). :class:`ScheduleMethods` is the async face the
store class inherits.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from importlib import resources
from typing import TYPE_CHECKING, Any, TypeVar

from duetime.errors import Conflict, NotFound
from duetime.ids import new_id
from duetime.store.isolation import readable
from duetime.store.schedule_change import BUFFERED_DROPPED_BY_PAUSE, apply_change
from duetime.store.sqlite import hot
from duetime.store.sqlite.dependencies import fail_dependents
from duetime.store.sqlite.queries import parse_queries
from duetime.store.sqlite.rows import dumps, from_micros, task_from_row, to_micros
from duetime.store.sqlite.schedule_rows import (
    config_columns,
    last_task_status,
    revision_from_row,
    schedule_from_row,
    state_columns,
    tick_from_row,
)
from duetime.store.sqlite.signals import Wakeups
from duetime.types import (
    NewSchedule,
    NewTask,
    Schedule,
    ScheduleAdvance,
    ScheduleChange,
    ScheduleDue,
    ScheduleFilter,
    ScheduleRevision,
    Task,
    TaskCreated,
    Tick,
    TickFilter,
    TickOutcome,
)

T = TypeVar("T")

Q: Mapping[str, str] = parse_queries(
    resources.files(__package__).joinpath("schedules.sql").read_text(encoding="utf-8")
)
"""The schedule queries, by name (``schedules.sql``)."""

_ABOVE_EVERY_ID = "\U0010ffff"
_ABOVE_EVERY_REVISION = 2**63 - 1


def _revision(
    conn: sqlite3.Connection, now: int, schedule_id: str, action: str, actor: str | None,
    before: Mapping[str, Any], after: Mapping[str, Any],
) -> None:  # fmt: skip
    conn.execute(
        Q["schedule_revision_insert"],
        {
            "schedule_id": schedule_id,
            "now": now,
            "actor": actor,
            "action": action,
            "before": dumps(dict(before)),
            "after": dumps(dict(after)),
        },
    )


def schedule_create(conn: sqlite3.Connection, now: int, new: NewSchedule) -> Schedule:
    params = {
        "id": new_id(),
        "tenant_id": new.tenant_id,
        **config_columns(new.config),
        "anchor_at": to_micros(new.anchor_at),
        "materialized_until": to_micros(new.materialized_until),
        "next_run_at": None if new.next_run_at is None else to_micros(new.next_run_at),
        "now": now,
    }
    row = conn.execute(Q["schedule_insert"], params).fetchone()
    _revision(conn, now, params["id"], "create", new.actor, {}, new.revision)
    if new.key is not None:
        try:
            key = {"id": params["id"], "key": new.key}
            row = conn.execute(Q["schedule_set_key"], key).fetchone()
        except sqlite3.IntegrityError as exc:  # the transaction rolls back: nothing is made
            raise Conflict(f"a schedule with key {new.key!r} exists already") from exc
    return schedule_from_row(row)


def schedule_get_by_key(
    conn: sqlite3.Connection, now: int, tenant_id: str, key: str
) -> Schedule | None:
    row = conn.execute(Q["schedule_get_by_key"], {"tenant_id": tenant_id, "key": key}).fetchone()
    return None if row is None else schedule_from_row(row)


def schedule_get(
    conn: sqlite3.Connection, now: int, tenant_id: str, schedule_id: str
) -> Schedule | None:
    row = conn.execute(Q["schedule_get"], {"id": schedule_id, "tenant_id": tenant_id}).fetchone()
    return None if row is None else schedule_from_row(row)


def _get_or_404(conn: sqlite3.Connection, tenant_id: str, schedule_id: str) -> Schedule:
    found = schedule_get(conn, 0, tenant_id, schedule_id)
    if found is None:
        raise NotFound(f"no schedule {schedule_id!r}")
    return found


def schedule_list(conn: sqlite3.Connection, now: int, query: ScheduleFilter) -> list[Schedule]:
    if query.limit <= 0:
        return []
    params = {
        "tenant_id": query.tenant_id,
        "cursor": query.cursor if query.cursor is not None else _ABOVE_EVERY_ID,
        "paused": None if query.paused is None else int(query.paused),
        "queue": query.queue,
        "name": query.name,
        "limit": query.limit,
    }
    return [schedule_from_row(r) for r in conn.execute(Q["schedule_list"], params)]


def schedule_update(
    conn: sqlite3.Connection, now: int, tenant_id: str, schedule_id: str, change: ScheduleChange
) -> Schedule:
    current = _get_or_404(conn, tenant_id, schedule_id)
    if current.version != change.expected_version:
        raise Conflict(
            f"schedule {schedule_id} changed since version {change.expected_version} "
            f"(now {current.version}); read it again and retry"
        )
    updated = apply_change(current, change, from_micros(now))
    if current.buffered_at is not None and updated.buffered_at is None:
        _tick(conn, now, schedule_id, current.buffered_at, TickOutcome.SKIPPED_PAUSED,
              BUFFERED_DROPPED_BY_PAUSE, None)  # fmt: skip
    if change.rewind_to is not None:
        after = to_micros(change.rewind_to)
        dropped = [
            r["id"]
            for r in conn.execute(
                Q["schedule_tasks_drop_future"], {"schedule_id": schedule_id, "after": after}
            )
        ]
        conn.execute(
            Q["schedule_ticks_drop_future"],
            {"schedule_id": schedule_id, "after": after, "task_ids": dumps(dropped)},
        )
    params = {
        "id": schedule_id,
        "version": current.version,
        "now": now,
        **config_columns(updated.config),
        **state_columns(updated),
    }
    row = conn.execute(Q["schedule_write"], params).fetchone()
    if row is None:  # unreachable under the write lock; keeps the contract explicit
        raise Conflict(f"schedule {schedule_id} changed concurrently; nothing was changed")
    _revision(conn, now, schedule_id, change.action, change.actor, change.before, change.after)
    return schedule_from_row(row)


def schedule_delete(
    conn: sqlite3.Connection, now: int, tenant_id: str, schedule_id: str, actor: str | None,
    before: Mapping[str, Any],
) -> int:  # fmt: skip
    row = conn.execute(
        Q["schedule_mark_deleted"], {"id": schedule_id, "tenant_id": tenant_id, "now": now}
    ).fetchone()
    if row is None:
        raise NotFound(f"no schedule {schedule_id!r}")
    cancelled = conn.execute(
        Q["schedule_tasks_cancel_pending"], {"schedule_id": schedule_id, "now": now}
    ).fetchall()
    fail_dependents(conn, now, [r["id"] for r in cancelled if r["has_dependents"]])
    _revision(conn, now, schedule_id, "delete", actor, before, {"deleted": True})
    return len(cancelled)


def _tick(
    conn: sqlite3.Connection, now: int, schedule_id: str, nominal: datetime,
    outcome: TickOutcome, detail: str | None, task_id: str | None,
) -> None:  # fmt: skip
    conn.execute(
        Q["schedule_tick_insert"],
        {
            "schedule_id": schedule_id,
            "nominal": to_micros(nominal),
            "outcome": outcome.value,
            "task_id": task_id,
            "detail": detail,
            "now": now,
        },
    )


def _make_tasks(
    conn: sqlite3.Connection, now: int, schedule_id: str, tasks: Sequence[NewTask], wake: Wakeups
) -> list[TaskCreated]:
    """Create the occurrences' tasks, in input order; an occurrence that has its task already
    (or repeats an earlier item) comes back as it is, with ``created=False``."""
    if not tasks:
        return []
    keys = [to_micros(_nominal(t)) for t in tasks]
    known: dict[int, Task] = {
        r["scheduled_for"]: task_from_row(r)
        for r in conn.execute(
            Q["schedule_tasks_at"], {"schedule_id": schedule_id, "instants": dumps(keys)}
        )
    }
    fresh: dict[int, NewTask] = {}
    for key, task in zip(keys, tasks, strict=True):
        if key not in known:
            fresh.setdefault(key, task)
    made = hot.task_create_many(conn, now, list(fresh.values()), wake)
    new = {key: m.task for key, m in zip(fresh, made, strict=True)}
    results: list[TaskCreated] = []
    for key in keys:
        if key in new:
            results.append(TaskCreated(task=new.pop(key), created=True))
            known[key] = results[-1].task
        else:
            results.append(TaskCreated(task=known[key], created=False))
    return results


def _nominal(task: NewTask) -> datetime:
    if task.scheduled_for is None:
        raise ValueError("an occurrence's task needs scheduled_for")
    return task.scheduled_for


def schedule_occurrences_create(
    conn: sqlite3.Connection, now: int, tenant_id: str, schedule_id: str,
    tasks: Sequence[NewTask], outcome: TickOutcome, detail: str | None, wake: Wakeups,
) -> list[TaskCreated]:  # fmt: skip
    _get_or_404(conn, tenant_id, schedule_id)
    results = _make_tasks(conn, now, schedule_id, tasks, wake)
    for r in results:
        if r.created and r.task.scheduled_for is not None:
            _tick(conn, now, schedule_id, r.task.scheduled_for, outcome, detail, r.task.id)
    return results


def schedule_due(
    conn: sqlite3.Connection, now: int, at: datetime, horizon: datetime, limit: int
) -> list[ScheduleDue]:
    params = {"now": to_micros(at), "horizon": to_micros(horizon), "limit": limit}
    return readable(
        conn.execute(Q["schedule_due"], params),
        lambda r: ScheduleDue(schedule_from_row(r), last_task_status(r), bool(r["waiting"])),
        "schedule",
    )


def _guard_holds(conn: sqlite3.Connection, adv: ScheduleAdvance) -> bool:
    row = conn.execute(Q["schedule_guard"], {"id": adv.schedule_id}).fetchone()
    expected_buffered = (
        None if adv.expected_buffered_at is None else to_micros(adv.expected_buffered_at)
    )
    return (
        row is not None
        and row["version"] == adv.expected_version
        and row["materialized_until"] == to_micros(adv.expected_cursor)
        and row["buffered_at"] == expected_buffered
        and not row["paused"]
        and not row["deleted"]
    )


def schedule_advance(
    conn: sqlite3.Connection, now: int, advances: Sequence[ScheduleAdvance], wake: Wakeups
) -> list[bool]:
    applied: list[bool] = []
    for adv in advances:
        if not _guard_holds(conn, adv):
            applied.append(False)
            continue
        made = _make_tasks(conn, now, adv.schedule_id, adv.tasks, wake)
        by_instant = {
            to_micros(m.task.scheduled_for): m.task.id for m in made if m.task.scheduled_for
        }
        for tick in adv.ticks:
            task_id = by_instant.get(to_micros(tick.nominal)) if tick.with_task else None
            _tick(conn, now, adv.schedule_id, tick.nominal, tick.outcome, tick.detail, task_id)
        last = None if adv.last_task_for is None else by_instant.get(to_micros(adv.last_task_for))
        conn.execute(
            Q["schedule_advance"],
            {
                "id": adv.schedule_id,
                "materialized_until": to_micros(adv.materialized_until),
                "next_run_at": None if adv.next_run_at is None else to_micros(adv.next_run_at),
                "buffered_at": None if adv.buffered_at is None else to_micros(adv.buffered_at),
                "last_task_id": last,
                "clear_resume": int(adv.clear_resume),
            },
        )
        applied.append(True)
    return applied


def schedule_tick_list(conn: sqlite3.Connection, now: int, query: TickFilter) -> list[Tick]:
    _get_or_404(conn, query.tenant_id, query.schedule_id)
    outcomes = [o.value for o in query.outcomes] or None
    cursor = query.cursor
    params = {
        "schedule_id": query.schedule_id,
        "outcomes": None if outcomes is None else dumps(outcomes),
        "cursor_nominal": None if cursor is None else to_micros(cursor[0]),
        "cursor_outcome": None if cursor is None else cursor[1],
        "limit": max(0, query.limit),
    }
    return [tick_from_row(r) for r in conn.execute(Q["schedule_tick_list"], params)]


def schedule_revision_list(
    conn: sqlite3.Connection, now: int, tenant_id: str, schedule_id: str, limit: int,
    cursor: int | None,
) -> list[ScheduleRevision]:  # fmt: skip
    _get_or_404(conn, tenant_id, schedule_id)
    params = {
        "schedule_id": schedule_id,
        "cursor": _ABOVE_EVERY_REVISION if cursor is None else cursor,
        "limit": max(0, limit),
    }
    return [revision_from_row(r) for r in conn.execute(Q["schedule_revision_list"], params)]


Body = Callable[[sqlite3.Connection, int], T]


class ScheduleMethods:
    """The schedule methods of :class:`~duetime.store.sqlite.backend.SqliteStore` (a mixin: the
    store provides ``_read``/``_write`` transactions and ``_fire`` for wake-ups)."""

    if TYPE_CHECKING:

        async def _write(self, body: Body[T], *, integrity_retries: int = 0) -> T: ...

        async def _read(self, body: Body[T]) -> T: ...

        def _fire(self, wake: Wakeups) -> None: ...

    async def schedule_create(self, new: NewSchedule) -> Schedule:
        return await self._write(lambda conn, now: schedule_create(conn, now, new))

    async def schedule_get_by_key(self, tenant_id: str, key: str) -> Schedule | None:
        return await self._read(lambda conn, now: schedule_get_by_key(conn, now, tenant_id, key))

    async def schedule_get(self, tenant_id: str, schedule_id: str) -> Schedule | None:
        return await self._read(lambda conn, now: schedule_get(conn, now, tenant_id, schedule_id))

    async def schedule_list(self, query: ScheduleFilter) -> list[Schedule]:
        return await self._read(lambda conn, now: schedule_list(conn, now, query))

    async def schedule_update(
        self, tenant_id: str, schedule_id: str, change: ScheduleChange
    ) -> Schedule:
        return await self._write(
            lambda conn, now: schedule_update(conn, now, tenant_id, schedule_id, change)
        )

    async def schedule_delete(
        self, tenant_id: str, schedule_id: str, actor: str | None, before: Mapping[str, Any]
    ) -> int:
        return await self._write(
            lambda conn, now: schedule_delete(conn, now, tenant_id, schedule_id, actor, before)
        )

    async def schedule_occurrences_create(
        self, tenant_id: str, schedule_id: str, tasks: Sequence[NewTask], outcome: TickOutcome,
        detail: str | None = None,
    ) -> list[TaskCreated]:  # fmt: skip
        wake = Wakeups()
        batch = list(tasks)
        made = await self._write(
            lambda conn, now: schedule_occurrences_create(
                conn, now, tenant_id, schedule_id, batch, outcome, detail, wake
            )
        )
        self._fire(wake)
        return made

    async def schedule_due(self, now: datetime, horizon: datetime, limit: int) -> list[ScheduleDue]:
        return await self._read(lambda conn, _now: schedule_due(conn, _now, now, horizon, limit))

    async def schedule_advance(self, advances: Sequence[ScheduleAdvance]) -> list[bool]:
        if not advances:
            return []
        wake = Wakeups()
        batch = list(advances)
        applied = await self._write(lambda conn, now: schedule_advance(conn, now, batch, wake))
        self._fire(wake)
        return applied

    async def schedule_tick_list(self, query: TickFilter) -> list[Tick]:
        return await self._read(lambda conn, now: schedule_tick_list(conn, now, query))

    async def schedule_revision_list(
        self, tenant_id: str, schedule_id: str, *, limit: int = 100, cursor: int | None = None
    ) -> list[ScheduleRevision]:
        return await self._read(
            lambda conn, now: schedule_revision_list(
                conn, now, tenant_id, schedule_id, limit, cursor
            )
        )
