"""Schedules (SPEC §3 "Schedules"): the rules, once for both backends; contracts in
:mod:`duetime.store.protocols`.

* One task per occurrence is the unique index ``(schedule_id, scheduled_for)``: an occurrence's
  task is inserted with ``ON CONFLICT ... DO NOTHING`` and the ones that existed are read back,
  so two nodes, a retried round or a fail-over never make a second task.
* A materializer round's plans apply in one transaction, each only where its version, cursor
  and buffer still hold: ``schedule_lock_guarded`` finds (PostgreSQL: locks) those schedules
  first; a racing node blocks on the locks, then finds the cursor moved and writes nothing.
* A user change reads the schedule for update, checks the version and writes the state
  :func:`apply_change` computes, with a revision.

Batches (tasks, ticks, cursors) are :func:`~.plan.batch` statements: one ``unnest`` statement
on PostgreSQL, a row at a time on SQLite.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from duetime.errors import Conflict, NotFound, ValidationError
from duetime.ids import new_id
from duetime.store.core import rows
from duetime.store.core.follow import settle
from duetime.store.core.outbox import ticks_missed
from duetime.store.core.plan import (
    NOW,
    Decode,
    Json,
    Plan,
    Row,
    UniqueViolation,
    Wake,
    all_,
    batch,
    execute,
    one,
    wake_for,
)
from duetime.store.core.runner import Runs
from duetime.store.isolation import readable
from duetime.types import (
    NewSchedule,
    NewTask,
    RetryPolicy,
    Schedule,
    ScheduleAdvance,
    ScheduleChange,
    ScheduleConfig,
    ScheduleDue,
    ScheduleFilter,
    ScheduleRevision,
    Task,
    TaskCreated,
    Tick,
    TickFilter,
    TickOutcome,
)

BUFFERED_DROPPED_BY_PAUSE = (
    "was waiting for the previous run to end (overlap=buffer_one) when the schedule was paused"
)
"""Ledger detail of a ``skipped_paused`` row for an occurrence a pause dropped from the buffer."""

_Key = tuple[str, datetime]
_TickRow = tuple[str, datetime, TickOutcome, str | None, str | None]


def apply_change(current: Schedule, change: ScheduleChange, now: datetime) -> Schedule:
    """``current`` with ``change`` applied at store time ``now`` (version and ``updated_at`` are
    the store's to bump). See :class:`~duetime.types.ScheduleChange` for the fields' meaning.

    Pausing keeps the first pause's ``paused_at`` and drops a buffered occurrence (the store
    records it ``skipped_paused``). Rewinding or resuming sets ``next_run_at`` to the cursor, so
    the next materializer round looks at the schedule and computes the real next run.
    """
    s = current
    paused, note, paused_at, buffered = s.paused, s.pause_note, s.paused_at, s.buffered_at
    if change.paused is True:
        paused, note = True, change.pause_note
        paused_at = s.paused_at if s.paused and s.paused_at is not None else now
        buffered = None
    elif change.paused is False:
        paused, note, paused_at = False, None, None
    cursor, next_run = s.materialized_until, s.next_run_at
    resumed_at, resume_catchup = s.resumed_at, s.resume_catchup
    if change.rewind_to is not None:
        cursor = min(cursor, change.rewind_to)
        next_run = cursor
    if change.resume_at is not None:
        resumed_at, resume_catchup = change.resume_at, change.resume_catchup
        next_run = cursor
    return dataclasses.replace(
        s,
        config=change.config or s.config,
        paused=paused,
        pause_note=note,
        paused_at=paused_at,
        buffered_at=buffered,
        materialized_until=cursor,
        next_run_at=next_run,
        resumed_at=resumed_at,
        resume_catchup=resume_catchup,
    )


# -- parameters ----------------------------------------------------------------------------------


def _config(c: ScheduleConfig) -> dict[str, Any]:
    """The ``schedules`` columns that hold a :class:`ScheduleConfig`."""
    return {
        "cron": c.cron, "every": c.every, "rrule": c.rrule, "timezone": c.timezone,
        "start_at": c.start_at, "end_at": c.end_at, "jitter_seconds": c.jitter_seconds,
        "dst_nonexistent": c.dst_nonexistent, "dst_ambiguous": c.dst_ambiguous,
        "task": Json(dict(c.task)), "overlap": c.overlap.value, "catchup": c.catchup.value,
        "catchup_window_seconds": c.catchup_window_seconds,
        "catchup_max_runs": c.catchup_max_runs,
    }  # fmt: skip


def _state(s: Schedule) -> dict[str, Any]:
    """The columns a user change rewrites besides the config (see ``schedule_write``)."""
    return {
        "paused": s.paused, "pause_note": s.pause_note, "paused_at": s.paused_at,
        "resumed_at": s.resumed_at,
        "resume_catchup": None if s.resume_catchup is None else s.resume_catchup.value,
        "next_run_at": s.next_run_at, "materialized_until": s.materialized_until,
        "buffered_at": s.buffered_at,
    }  # fmt: skip


@functools.lru_cache(maxsize=256)
def _retry(policy: RetryPolicy) -> Json:
    return Json(policy.to_json())


def _key(t: NewTask) -> _Key:
    if t.schedule_id is None or t.scheduled_for is None:
        raise ValueError("an occurrence's task needs schedule_id and scheduled_for")
    return t.schedule_id, t.scheduled_for


def _task_row(t: NewTask) -> dict[str, Any]:
    """The parameters of ``schedule_task_insert`` for an occurrence's task."""
    target_type = t.target.get("type")
    if not isinstance(target_type, str):
        raise ValidationError("target.type is required", "target.type")
    return {
        "id": new_id(), "tenant_id": t.tenant_id, "name": t.name, "queue": t.queue,
        "target_type": target_type, "target": Json(t.target), "payload": t.payload_json,
        "priority": t.priority, "retry": _retry(t.retry),
        "timeout_seconds": float(t.timeout_seconds), "concurrency_key": t.concurrency_key,
        "labels": Json(dict(t.labels)), "schedule_id": t.schedule_id,
        "scheduled_for": t.scheduled_for, "run_at": t.run_at, "flow_key": t.flow_key,
    }  # fmt: skip


def _id(r: Row, d: type[Decode]) -> str:
    return d.ident(r["id"])


def _made_key(m: Task | _Made) -> _Key:
    assert m.schedule_id is not None and m.scheduled_for is not None
    return m.schedule_id, m.scheduled_for


class _Unread:
    """A row kept with its backend's decode, converted later so that one row that cannot be read
    is left out (:func:`~duetime.store.isolation.readable`), not fatal to the whole read."""

    __slots__ = ("decode", "row")

    def __init__(self, row: Row, decode: type[Decode]) -> None:
        self.row, self.decode = row, decode

    def __getitem__(self, key: str) -> Any:
        return self.row[key]


# -- steps shared by several plans ---------------------------------------------------------------


def _get_or_404(tenant_id: str, schedule_id: str, *, lock: bool = False) -> Plan[Schedule]:
    query = "schedule_get_for_update" if lock else "schedule_get"
    found: Schedule | None = yield one(query, rows.schedule, id=schedule_id, tenant_id=tenant_id)
    if found is None:
        raise NotFound(f"no schedule {schedule_id!r}")
    return found


def _revision(
    schedule_id: str, action: str, actor: str | None, before: Mapping[str, Any],
    after: Mapping[str, Any],
) -> Plan[None]:  # fmt: skip
    yield execute(
        "schedule_revision_insert", schedule_id=schedule_id, actor=actor, action=action,
        before=Json(dict(before)), after=Json(dict(after)),
    )  # fmt: skip


def _ticks(ticks: Sequence[_TickRow]) -> Plan[None]:
    """Record ledger rows (a repeat of ``(schedule_id, nominal, outcome)`` is ignored)."""
    if ticks:
        yield batch(
            "schedule_tick_insert",
            [
                {"schedule_id": s, "nominal": n, "outcome": o.value, "task_id": t, "detail": d}
                for s, n, o, t, d in ticks
            ],
        )


@dataclass(frozen=True, slots=True)
class _Made:
    """What a materializer round needs of an occurrence's task (cheaper to read than a Task)."""

    schedule_id: str
    scheduled_for: datetime
    id: str
    status: str


def _made(r: Row, d: type[Decode]) -> _Made:
    return _Made(r["schedule_id"], d.time(r["scheduled_for"]), d.ident(r["id"]), r["status"])


Made = TypeVar("Made", Task, _Made)


def _occurrences(
    tasks: Sequence[NewTask], into: Callable[[Row, type[Decode]], Made]
) -> Plan[list[tuple[Made, bool]]]:
    """Every occurrence's task (read with ``into``), in input order, with True when made now;
    an occurrence that had its task (or that the batch names twice) gets that one. Asks for the
    wake-up the new tasks need."""
    keys = [_key(t) for t in tasks]
    fresh: dict[_Key, NewTask] = {}
    for key, t in zip(keys, tasks, strict=True):
        fresh.setdefault(key, t)
    made: dict[_Key, Made] = {}
    if fresh:
        inserted: list[Made] = yield batch(
            "schedule_task_insert", [_task_row(t) for t in fresh.values()], into
        )
        made = {_made_key(m): m for m in inserted}
    known: dict[_Key, Made] = {}
    missing = [{"schedule_id": s, "scheduled_for": at} for s, at in fresh if (s, at) not in made]
    if missing:
        found: list[Made] = yield batch("schedule_tasks_at", missing, into)
        known = {_made_key(m): m for m in found}
    if made:
        yield wake_for(m.status for m in made.values())
    results: list[tuple[Made, bool]] = []
    for key in keys:
        if key in made:  # the first item of an occurrence made it; a repeat gets it as known
            known[key] = made.pop(key)
            results.append((known[key], True))
        else:
            results.append((known[key], False))
    return results


# -- the API's side ------------------------------------------------------------------------------


def schedule_create(new: NewSchedule) -> Plan[Schedule]:
    schedule_id = new_id()
    try:
        made: Schedule = yield one(
            "schedule_insert", rows.schedule, id=schedule_id, tenant_id=new.tenant_id,
            **_config(new.config), anchor_at=new.anchor_at, next_run_at=new.next_run_at,
            materialized_until=new.materialized_until, key=new.key,
        )  # fmt: skip
    except UniqueViolation as exc:  # the transaction rolls back: nothing is made
        raise Conflict(f"a schedule with key {new.key!r} exists already") from exc
    yield from _revision(schedule_id, "create", new.actor, {}, new.revision)
    return made


def schedule_get(tenant_id: str, schedule_id: str) -> Plan[Schedule | None]:
    found: Schedule | None = yield one(
        "schedule_get", rows.schedule, id=schedule_id, tenant_id=tenant_id
    )
    return found


def schedule_get_by_key(tenant_id: str, key: str) -> Plan[Schedule | None]:
    found: Schedule | None = yield one(
        "schedule_get_by_key", rows.schedule, tenant_id=tenant_id, key=key
    )
    return found


def schedule_list(query: ScheduleFilter) -> Plan[list[Schedule]]:
    if query.limit <= 0:
        return []
    found: list[Schedule] = yield all_(
        "schedule_list", rows.schedule, tenant_id=query.tenant_id, cursor=query.cursor,
        paused=query.paused, queue=query.queue, name=query.name, limit=query.limit,
    )  # fmt: skip
    return found


def schedule_update(tenant_id: str, schedule_id: str, change: ScheduleChange) -> Plan[Schedule]:
    current = yield from _get_or_404(tenant_id, schedule_id, lock=True)
    if current.version != change.expected_version:
        raise Conflict(
            f"schedule {schedule_id} changed since version {change.expected_version} "
            f"(now {current.version}); read it again and retry"
        )
    updated = apply_change(current, change, (yield NOW))
    if current.buffered_at is not None and updated.buffered_at is None:
        yield from _ticks([(schedule_id, current.buffered_at, TickOutcome.SKIPPED_PAUSED, None,
                            BUFFERED_DROPPED_BY_PAUSE)])  # fmt: skip
    if change.rewind_to is not None:
        at = change.rewind_to
        dropped = yield all_("schedule_tasks_drop_future", _id, schedule_id=schedule_id, after=at)
        yield execute(
            "schedule_ticks_drop_future", schedule_id=schedule_id, after=at, task_ids=dropped
        )
    written: Schedule | None = yield one(
        "schedule_write", rows.schedule, id=schedule_id, version=current.version,
        **_config(updated.config), **_state(updated),
    )  # fmt: skip
    if written is None:  # unreachable: the row is held since it was read
        raise Conflict(f"schedule {schedule_id} changed concurrently; nothing was changed")
    yield from _revision(schedule_id, change.action, change.actor, change.before, change.after)
    return written


def _cancelled(r: Row, d: type[Decode]) -> tuple[str, bool]:
    return d.ident(r["id"]), d.flag(r["has_dependents"])


def schedule_delete(
    tenant_id: str, schedule_id: str, actor: str | None, before: Mapping[str, Any]
) -> Plan[int]:
    if (yield one("schedule_mark_deleted", _id, id=schedule_id, tenant_id=tenant_id)) is None:
        raise NotFound(f"no schedule {schedule_id!r}")
    cancelled: list[tuple[str, bool]] = yield all_(
        "schedule_tasks_cancel_pending", _cancelled, schedule_id=schedule_id
    )
    followed = [(task_id, "cancelled") for task_id, has_dependents in cancelled if has_dependents]
    if followed:
        yield from settle(followed)
    if cancelled:
        yield Wake(ended=tuple(task_id for task_id, _ in cancelled))
    yield from _revision(schedule_id, "delete", actor, before, {"deleted": True})
    return len(cancelled)


def schedule_occurrences_create(
    tenant_id: str, schedule_id: str, tasks: Sequence[NewTask], outcome: TickOutcome,
    detail: str | None,
) -> Plan[list[TaskCreated]]:  # fmt: skip
    yield from _get_or_404(tenant_id, schedule_id)
    made = yield from _occurrences(tasks, rows.task)
    yield from _ticks([
        (schedule_id, t.scheduled_for, outcome, t.id, detail)
        for t, created in made if created and t.scheduled_for is not None
    ])  # fmt: skip
    return [TaskCreated(task=t, created=created) for t, created in made]


def schedule_tick_list(query: TickFilter) -> Plan[list[Tick]]:
    yield from _get_or_404(query.tenant_id, query.schedule_id)
    nominal, outcome = query.cursor if query.cursor is not None else (None, None)
    found: list[Tick] = yield all_(
        "schedule_tick_list", rows.tick, schedule_id=query.schedule_id,
        outcomes=[o.value for o in query.outcomes] or None, cursor_nominal=nominal,
        cursor_outcome=outcome, limit=max(0, query.limit),
    )  # fmt: skip
    return found


def schedule_revision_list(
    tenant_id: str, schedule_id: str, limit: int, cursor: int | None
) -> Plan[list[ScheduleRevision]]:
    yield from _get_or_404(tenant_id, schedule_id)
    found: list[ScheduleRevision] = yield all_(
        "schedule_revision_list", rows.schedule_revision, schedule_id=schedule_id, cursor=cursor,
        limit=max(0, limit),
    )  # fmt: skip
    return found


# -- the materializer's side ---------------------------------------------------------------------


def schedule_due(at: datetime, horizon: datetime, limit: int) -> Plan[list[ScheduleDue]]:
    found: list[_Unread] = yield all_("schedule_due", _Unread, at=at, horizon=horizon, limit=limit)
    return readable(found, lambda u: rows.schedule_due(u, u.decode), "schedule")


def schedule_advance(advances: Sequence[ScheduleAdvance]) -> Plan[list[bool]]:
    guards = [
        {"id": a.schedule_id, "version": a.expected_version, "cursor": a.expected_cursor,
         "buffered": a.expected_buffered_at}
        for a in advances
    ]  # fmt: skip
    held = set((yield batch("schedule_lock_guarded", guards, _id)))
    todo = [a for a in advances if a.schedule_id in held]
    if todo:
        made = yield from _occurrences([t for a in todo for t in a.tasks], _made)
        task_of = {(m.schedule_id, m.scheduled_for): m.id for m, _ in made}
        yield from _ticks([
            (a.schedule_id, k.nominal, k.outcome,
             task_of.get((a.schedule_id, k.nominal)) if k.with_task else None, k.detail)
            for a in todo for k in a.ticks
        ])  # fmt: skip
        missed = {
            a.schedule_id: n
            for a in todo
            if (n := sum(k.outcome is TickOutcome.MISSED for k in a.ticks))
        }
        yield from ticks_missed(missed)  # the tenants' notifications, in this transaction
        yield batch(
            "schedule_advance",
            [
                {"id": a.schedule_id, "materialized_until": a.materialized_until,
                 "next_run_at": a.next_run_at, "buffered_at": a.buffered_at,
                 "last_task_id": None if a.last_task_for is None
                 else task_of.get((a.schedule_id, a.last_task_for)),
                 "clear_resume": a.clear_resume}
                for a in todo
            ],
        )  # fmt: skip
    return [a.schedule_id in held for a in advances]


class ScheduleMethods(Runs):
    """The schedule methods of :class:`~duetime.store.protocols.Store`, for both backends."""

    async def schedule_create(self, new: NewSchedule) -> Schedule:
        return await self._run(schedule_create(new), write=True)

    async def schedule_get(self, tenant_id: str, schedule_id: str) -> Schedule | None:
        return await self._run(schedule_get(tenant_id, schedule_id))

    async def schedule_get_by_key(self, tenant_id: str, key: str) -> Schedule | None:
        return await self._run(schedule_get_by_key(tenant_id, key))

    async def schedule_list(self, query: ScheduleFilter) -> list[Schedule]:
        return await self._run(schedule_list(query))

    async def schedule_update(
        self, tenant_id: str, schedule_id: str, change: ScheduleChange
    ) -> Schedule:
        return await self._run(schedule_update(tenant_id, schedule_id, change), write=True)

    async def schedule_delete(
        self, tenant_id: str, schedule_id: str, actor: str | None, before: Mapping[str, Any]
    ) -> int:
        return await self._run(schedule_delete(tenant_id, schedule_id, actor, before), write=True)

    async def schedule_occurrences_create(
        self, tenant_id: str, schedule_id: str, tasks: Sequence[NewTask], outcome: TickOutcome,
        detail: str | None = None,
    ) -> list[TaskCreated]:  # fmt: skip
        plan = schedule_occurrences_create(tenant_id, schedule_id, list(tasks), outcome, detail)
        return await self._run(plan, write=True)

    async def schedule_due(self, now: datetime, horizon: datetime, limit: int) -> list[ScheduleDue]:
        return await self._run(schedule_due(now, horizon, limit))

    async def schedule_advance(self, advances: Sequence[ScheduleAdvance]) -> list[bool]:
        if not advances:
            return []
        return await self._run(schedule_advance(list(advances)), write=True)

    async def schedule_tick_list(self, query: TickFilter) -> list[Tick]:
        return await self._run(schedule_tick_list(query))

    async def schedule_revision_list(
        self, tenant_id: str, schedule_id: str, *, limit: int = 100, cursor: int | None = None
    ) -> list[ScheduleRevision]:
        return await self._run(schedule_revision_list(tenant_id, schedule_id, limit, cursor))
