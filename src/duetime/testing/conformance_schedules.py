"""Store conformance for recurring schedules: the schedule contracts of
:mod:`duetime.store.protocols`, run unchanged against every backend.

Use it like :mod:`duetime.testing.conformance` (``from duetime.testing.conformance_schedules
import *`` given ``store`` and ``clock`` fixtures). Each test names the contract it checks.
"""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import datetime, timedelta
from typing import Any

import pytest

from duetime.clock import FakeClock
from duetime.errors import Conflict, NotFound
from duetime.store.protocols import Store
from duetime.types import (
    NewSchedule,
    NewTask,
    NewTick,
    OverlapPolicy,
    Schedule,
    ScheduleAdvance,
    ScheduleChange,
    ScheduleConfig,
    ScheduleFilter,
    TaskStatus,
    TickFilter,
    TickOutcome,
)

WORKER = {"type": "worker"}


def _config(**fields: Any) -> ScheduleConfig:
    fields.setdefault("every", "PT1M")
    fields.setdefault("task", {"target": WORKER, "name": "tick", "queue": "default"})
    return ScheduleConfig(**fields)


async def _tenant(store: Store, name: str = "acme") -> str:
    return (await store.tenant_create(name)).id


async def _schedule(
    store: Store, clock: FakeClock, tenant: str, *, actor: str | None = "key-1", **fields: Any
) -> Schedule:
    now = clock.now()
    return await store.schedule_create(
        NewSchedule(
            tenant_id=tenant,
            config=_config(**fields),
            anchor_at=now,
            materialized_until=now,
            actor=actor,
            revision={"every": fields.get("every", "PT1M")},
        )
    )


def _task(s: Schedule, nominal: datetime, run_at: datetime | None = None) -> NewTask:
    return NewTask(
        tenant_id=s.tenant_id,
        target=WORKER,
        name="tick",
        run_at=run_at if run_at is not None else nominal,
        schedule_id=s.id,
        scheduled_for=nominal,
    )


def _advance(s: Schedule, until: datetime, *nominals: datetime, **fields: Any) -> ScheduleAdvance:
    values: dict[str, Any] = {
        "schedule_id": s.id,
        "expected_version": s.version,
        "expected_cursor": s.materialized_until,
        "expected_buffered_at": s.buffered_at,
        "materialized_until": until,
        "next_run_at": until + timedelta(minutes=1),
        "buffered_at": None,
        "tasks": [_task(s, n) for n in nominals],
        "ticks": [NewTick(n, TickOutcome.FIRED, None, with_task=True) for n in nominals],
    }
    values.update(fields)
    return ScheduleAdvance(**values)


def _change(s: Schedule, action: str = "update", **fields: Any) -> ScheduleChange:
    return ScheduleChange(
        expected_version=s.version, action=action, actor="key-2", before={}, after={}, **fields
    )


async def _reread(store: Store, s: Schedule) -> Schedule:
    found = await store.schedule_get(s.tenant_id, s.id)
    assert found is not None
    return found


async def _schedule_tasks(store: Store, s: Schedule) -> list[Any]:
    from duetime.types import TaskFilter

    found = await store.task_list(TaskFilter(tenant_id=s.tenant_id, schedule_id=s.id, limit=1000))
    return sorted(found, key=lambda t: t.scheduled_for)


async def _ticks(store: Store, s: Schedule, **fields: Any) -> list[Any]:
    return await store.schedule_tick_list(
        TickFilter(tenant_id=s.tenant_id, schedule_id=s.id, **fields)
    )


# -- create, read, list --------------------------------------------------------------------------


async def test_schedule_create_sets_cursor_version_and_first_revision(
    store: Store, clock: FakeClock
) -> None:
    """schedule_create: version 1, not paused, cursor and next_run_at = materialized_until; the
    first revision is ``create`` with the actor and ``after`` = new.revision."""
    tenant = await _tenant(store)
    s = await _schedule(store, clock, tenant, timezone="Europe/London", jitter_seconds=5)
    assert s.version == 1 and not s.paused and not s.deleted
    assert s.materialized_until == clock.now() == s.next_run_at == s.anchor_at
    assert s.created_at == s.updated_at == clock.now()
    assert s.config.timezone == "Europe/London" and s.config.jitter_seconds == 5
    assert s.config.task["target"] == WORKER
    assert await store.schedule_get(tenant, s.id) == s
    [rev] = await store.schedule_revision_list(tenant, s.id)
    assert (rev.action, rev.actor, dict(rev.before), dict(rev.after)) == (
        "create",
        "key-1",
        {},
        {"every": "PT1M"},
    )
    assert rev.at == clock.now()


async def test_schedule_get_of_another_tenant_is_none(store: Store, clock: FakeClock) -> None:
    """schedule_get: another tenant's schedule is None."""
    a, b = await _tenant(store, "a"), await _tenant(store, "b")
    s = await _schedule(store, clock, a)
    assert await store.schedule_get(b, s.id) is None
    assert await store.schedule_get(a, "no-such-id") is None


async def test_schedule_list_newest_first_with_cursor_and_filters(
    store: Store, clock: FakeClock
) -> None:
    """schedule_list: newest first, after the cursor; paused/queue/name filter."""
    tenant = await _tenant(store)
    made = []
    for i in range(5):
        task = {"target": WORKER, "name": f"job-{i % 2}", "queue": "q1" if i < 3 else "q2"}
        made.append(await _schedule(store, clock, tenant, task=task))
    other = await _tenant(store, "other")
    await _schedule(store, clock, other)
    newest_first = [s.id for s in reversed(made)]
    page = await store.schedule_list(ScheduleFilter(tenant_id=tenant, limit=3))
    assert [s.id for s in page] == newest_first[:3]
    rest = await store.schedule_list(ScheduleFilter(tenant_id=tenant, cursor=page[-1].id))
    assert [s.id for s in rest] == newest_first[3:]
    by_queue = await store.schedule_list(ScheduleFilter(tenant_id=tenant, queue="q2"))
    assert {s.id for s in by_queue} == {made[3].id, made[4].id}
    by_name = await store.schedule_list(ScheduleFilter(tenant_id=tenant, name="job-1"))
    assert {s.id for s in by_name} == {made[1].id, made[3].id}
    await store.schedule_update(tenant, made[0].id, _change(made[0], "pause", paused=True))
    paused = await store.schedule_list(ScheduleFilter(tenant_id=tenant, paused=True))
    assert [s.id for s in paused] == [made[0].id]
    active = await store.schedule_list(ScheduleFilter(tenant_id=tenant, paused=False))
    assert made[0].id not in {s.id for s in active} and len(active) == 4


# -- changes -------------------------------------------------------------------------------------


async def test_schedule_update_checks_version_and_writes_revision(
    store: Store, clock: FakeClock
) -> None:
    """schedule_update: applies only at expected_version (Conflict otherwise, nothing changed);
    bumps version, sets updated_at, writes the revision. NotFound for others' or missing."""
    tenant = await _tenant(store)
    s = await _schedule(store, clock, tenant)
    clock.advance(5)
    change = ScheduleChange(
        expected_version=1,
        action="update",
        actor="key-9",
        before={"every": "PT1M"},
        after={"every": "PT5M"},
        config=dataclasses.replace(s.config, every="PT5M"),
    )
    updated = await store.schedule_update(tenant, s.id, change)
    assert updated.version == 2 and updated.config.every == "PT5M"
    assert updated.updated_at == clock.now() and updated.created_at == s.created_at
    with pytest.raises(Conflict):
        await store.schedule_update(tenant, s.id, change)  # version 1 is gone
    assert (await store.schedule_get(tenant, s.id)) == updated
    revisions = await store.schedule_revision_list(tenant, s.id)
    assert [r.action for r in revisions] == ["update", "create"]
    assert revisions[0].actor == "key-9"
    assert dict(revisions[0].before) == {"every": "PT1M"}
    assert dict(revisions[0].after) == {"every": "PT5M"}
    other = await _tenant(store, "other")
    with pytest.raises(NotFound):
        await store.schedule_update(other, s.id, _change(updated))
    with pytest.raises(NotFound):
        await store.schedule_update(tenant, "nope", _change(updated))


async def test_schedule_update_rewind_forgets_unstarted_future_occurrences(
    store: Store, clock: FakeClock
) -> None:
    """schedule_update rewind_to: deletes the unstarted tasks after it and their ticks, keeps
    older and started ones, moves the cursor back and next_run_at to it."""
    tenant = await _tenant(store)
    s = await _schedule(store, clock, tenant)
    now = clock.now()
    nominals = [now + timedelta(minutes=i) for i in range(1, 4)]
    assert await store.schedule_advance([_advance(s, now + timedelta(minutes=3), *nominals)])
    s = await _reread(store, s)
    clock.advance(90)  # the first occurrence is due and claimed; two are in the future
    await store.task_promote_due(100)
    from duetime.types import ClaimRequest, TargetType

    [lease] = await store.task_claim(
        ClaimRequest(worker_id="w", limit=10, target_types=frozenset({TargetType.WORKER}))
    )
    assert lease.task.scheduled_for == nominals[0]
    # The third is running too (a user moved it earlier): started work is never forgotten.
    tasks = await _schedule_tasks(store, s)
    from duetime.types import TaskPatch

    await store.task_update(tenant, tasks[2].id, TaskPatch(run_at=clock.now()))
    [lease3] = await store.task_claim(
        ClaimRequest(worker_id="w", limit=10, target_types=frozenset({TargetType.WORKER}))
    )
    rewound = await store.schedule_update(tenant, s.id, _change(s, rewind_to=clock.now()))
    assert rewound.materialized_until == clock.now() == rewound.next_run_at
    left = await _schedule_tasks(store, s)
    assert [t.scheduled_for for t in left] == [nominals[0], nominals[2]]
    ticks = await _ticks(store, s)
    assert sorted(t.nominal for t in ticks) == [nominals[0], nominals[2]]
    assert lease3.task.id == tasks[2].id


async def test_schedule_update_pause_and_resume(store: Store, clock: FakeClock) -> None:
    """schedule_update: pausing sets paused, pause_note and paused_at (the first pause's) and
    drops a buffered occurrence with a skipped_paused tick; resuming clears them and records
    resumed_at/resume_catchup with next_run_at = the cursor."""
    tenant = await _tenant(store)
    s = await _schedule(store, clock, tenant, overlap=OverlapPolicy.BUFFER_ONE)
    buffered_at = clock.now() + timedelta(minutes=1)
    clock.advance(60)
    assert await store.schedule_advance(
        [_advance(s, clock.now(), buffered_at=buffered_at, tasks=[], ticks=[])]
    ) == [True]
    s = await _reread(store, s)
    assert s.buffered_at == buffered_at
    paused = await store.schedule_update(
        tenant, s.id, _change(s, "pause", paused=True, pause_note="maintenance")
    )
    assert paused.paused and paused.pause_note == "maintenance"
    assert paused.paused_at == clock.now() and paused.buffered_at is None
    [tick] = await _ticks(store, s)
    assert (tick.nominal, tick.outcome, tick.task_id) == (
        buffered_at,
        TickOutcome.SKIPPED_PAUSED,
        None,
    )
    clock.advance(30)
    again = await store.schedule_update(tenant, s.id, _change(paused, "pause", paused=True))
    assert again.paused_at == paused.paused_at
    from duetime.types import CatchupPolicy

    clock.advance(30)
    resumed = await store.schedule_update(
        tenant,
        s.id,
        _change(again, "resume", paused=False, resume_at=clock.now(),
                resume_catchup=CatchupPolicy.LATEST),
    )  # fmt: skip
    assert not resumed.paused and resumed.pause_note is None and resumed.paused_at is None
    assert resumed.resumed_at == clock.now()
    assert resumed.resume_catchup is CatchupPolicy.LATEST
    assert resumed.next_run_at == resumed.materialized_until


async def test_schedule_delete_cancels_pending_occurrences(store: Store, clock: FakeClock) -> None:
    """schedule_delete: the schedule is gone for every reader; tasks that never started are
    cancelled (a running one is not); returns how many; NotFound the second time."""
    tenant = await _tenant(store)
    s = await _schedule(store, clock, tenant)
    now = clock.now()
    nominals = [now, now + timedelta(minutes=1), now + timedelta(minutes=2)]
    await store.schedule_advance([_advance(s, nominals[-1], *nominals)])
    from duetime.types import ClaimRequest, TargetType

    await store.task_claim(
        ClaimRequest(worker_id="w", limit=1, target_types=frozenset({TargetType.WORKER}))
    )
    assert await store.schedule_delete(tenant, s.id, "key-3", {"every": "PT1M"}) == 2
    statuses = [t.status for t in await _schedule_tasks(store, s)]
    assert statuses == [TaskStatus.RUNNING, TaskStatus.CANCELLED, TaskStatus.CANCELLED]
    assert await store.schedule_get(tenant, s.id) is None
    assert await store.schedule_list(ScheduleFilter(tenant_id=tenant)) == []
    with pytest.raises(NotFound):
        await store.schedule_delete(tenant, s.id, None, {})
    with pytest.raises(NotFound):
        await _ticks(store, s)
    with pytest.raises(NotFound):
        await store.schedule_revision_list(tenant, s.id)
    assert await store.schedule_due(clock.now(), clock.now() + timedelta(hours=1), 10) == []


# -- explicit occurrences (trigger, backfill) ------------------------------------------------------


async def test_schedule_occurrences_create_is_one_task_per_occurrence(
    store: Store, clock: FakeClock
) -> None:
    """schedule_occurrences_create: tasks with schedule_id/scheduled_for and a tick each; an
    occurrence that has its task already comes back with created=False (also a repeat in the
    same call); works on a paused schedule; NotFound for another tenant."""
    tenant = await _tenant(store)
    s = await _schedule(store, clock, tenant)
    s = await store.schedule_update(tenant, s.id, _change(s, "pause", paused=True))
    a, b = clock.now() - timedelta(hours=2), clock.now() - timedelta(hours=1)
    made = await store.schedule_occurrences_create(
        tenant, s.id, [_task(s, a), _task(s, b), _task(s, a)], TickOutcome.BACKFILLED, "why"
    )
    assert [m.created for m in made] == [True, True, False]
    assert made[2].task.id == made[0].task.id
    assert made[0].task.schedule_id == s.id and made[0].task.scheduled_for == a
    assert made[0].task.status is TaskStatus.READY
    again = await store.schedule_occurrences_create(
        tenant, s.id, [_task(s, b)], TickOutcome.TRIGGERED
    )
    assert not again[0].created and again[0].task.id == made[1].task.id
    ticks = await _ticks(store, s)
    assert [(t.nominal, t.outcome, t.task_id, t.detail) for t in ticks] == [
        (b, TickOutcome.BACKFILLED, made[1].task.id, "why"),
        (a, TickOutcome.BACKFILLED, made[0].task.id, "why"),
    ]
    assert len(await _schedule_tasks(store, s)) == 2
    other = await _tenant(store, "other")
    with pytest.raises(NotFound):
        await store.schedule_occurrences_create(other, s.id, [_task(s, a)], TickOutcome.TRIGGERED)


# -- the materializer's side ---------------------------------------------------------------------


async def test_schedule_due_picks_by_horizon_overlap_and_buffer(
    store: Store, clock: FakeClock
) -> None:
    """schedule_due: allow schedules with next_run_at <= horizon, others with next_run_at <= now,
    earliest next_run_at first, then those only waiting with a buffered_at (waiting=True); never
    paused or deleted ones; limit; the status of last_task_id comes along."""
    tenant = await _tenant(store)
    now = clock.now()
    horizon = now + timedelta(seconds=60)

    async def made(nxt: datetime, **fields: Any) -> Schedule:
        s = await _schedule(store, clock, tenant, **fields)
        await store.schedule_advance([_advance(s, now, next_run_at=nxt, tasks=[], ticks=[])])
        fresh = await store.schedule_get(tenant, s.id)
        assert fresh is not None
        return fresh

    ahead = await made(now + timedelta(seconds=30))
    far = await made(now + timedelta(seconds=90))
    gated_due = await made(now - timedelta(seconds=1), overlap=OverlapPolicy.SKIP)
    await made(now + timedelta(seconds=30), overlap=OverlapPolicy.SKIP)  # not yet due
    paused = await made(now - timedelta(seconds=5))
    await store.schedule_update(tenant, paused.id, _change(paused, "pause", paused=True))
    deleted = await made(now - timedelta(seconds=5))
    await store.schedule_delete(tenant, deleted.id, None, {})
    buffered = await _schedule(store, clock, tenant, overlap=OverlapPolicy.BUFFER_ONE)
    [task] = await store.schedule_occurrences_create(
        tenant, buffered.id, [_task(buffered, now)], TickOutcome.TRIGGERED
    )
    await store.schedule_advance(
        [_advance(buffered, now, next_run_at=now + timedelta(hours=1), buffered_at=now,
                  tasks=[_task(buffered, now)], ticks=[], last_task_for=now)]
    )  # fmt: skip
    found = await store.schedule_due(now, horizon, 100)
    assert [d.schedule.id for d in found] == [gated_due.id, ahead.id, buffered.id]
    assert [d.waiting for d in found] == [False, False, True]  # waiting ones come last
    by_id = {d.schedule.id: d for d in found}
    assert by_id[buffered.id].last_task_status is TaskStatus.READY
    assert by_id[buffered.id].schedule.last_task_id == task.task.id
    assert by_id[ahead.id].last_task_status is None
    assert far.id not in by_id
    assert [d.schedule.id for d in await store.schedule_due(now, horizon, 1)] == [gated_due.id]


async def test_schedule_advance_applies_plans_under_their_guard(
    store: Store, clock: FakeClock
) -> None:
    """schedule_advance: applies tasks, ticks (with_task links the task) and the cursor; a plan
    made from a stale version or cursor, or for a paused schedule, writes nothing (False); a
    repeated tick is ignored; version and updated_at are untouched."""
    tenant = await _tenant(store)
    s = await _schedule(store, clock, tenant)
    now = clock.now()
    n1, n2 = now + timedelta(seconds=10), now + timedelta(seconds=70)
    skipped = NewTick(now + timedelta(seconds=40), TickOutcome.DST_SKIPPED, "gap")
    plan = _advance(s, now + timedelta(seconds=60), n1, ticks=[
        NewTick(n1, TickOutcome.FIRED, None, with_task=True), skipped, skipped,
    ], next_run_at=n2)  # fmt: skip
    assert await store.schedule_advance([plan]) == [True]
    assert await store.schedule_advance([plan]) == [False]  # the cursor moved on
    after = await store.schedule_get(tenant, s.id)
    assert after is not None
    assert after.materialized_until == now + timedelta(seconds=60) and after.next_run_at == n2
    assert after.version == s.version and after.updated_at == s.updated_at
    [task] = await _schedule_tasks(store, s)
    assert (task.scheduled_for, task.run_at, task.status) == (n1, n1, TaskStatus.SCHEDULED)
    ticks = await _ticks(store, s)
    assert [(t.nominal, t.outcome, t.task_id) for t in ticks] == [
        (skipped.nominal, TickOutcome.DST_SKIPPED, None),
        (n1, TickOutcome.FIRED, task.id),
    ]
    # Stale version: a user change came in between.
    changed = await store.schedule_update(tenant, s.id, _change(after))
    stale = _advance(after, n2, n2)
    assert await store.schedule_advance([stale]) == [False]
    paused = await store.schedule_update(tenant, s.id, _change(changed, "pause", paused=True))
    assert await store.schedule_advance([_advance(paused, n2, n2)]) == [False]
    assert len(await _schedule_tasks(store, s)) == 1


async def test_schedule_advance_never_makes_a_second_task_for_an_occurrence(
    store: Store, clock: FakeClock
) -> None:
    """schedule_advance: an occurrence that has its task already keeps it (no second task); the
    tick links the existing task; last_task_for picks it as last_task_id; clear_resume clears
    resumed_at."""
    tenant = await _tenant(store)
    s = await _schedule(store, clock, tenant)
    n1 = clock.now() + timedelta(seconds=10)
    [first] = await store.schedule_occurrences_create(
        tenant, s.id, [_task(s, n1)], TickOutcome.TRIGGERED
    )
    from duetime.types import CatchupPolicy

    s = await store.schedule_update(
        tenant, s.id, _change(s, paused=False, resume_at=clock.now(),
                              resume_catchup=CatchupPolicy.ALL),
    )  # fmt: skip
    assert s.resumed_at is not None
    plan = _advance(s, n1, n1, last_task_for=n1, clear_resume=True)
    assert await store.schedule_advance([plan]) == [True]
    [task] = await _schedule_tasks(store, s)
    assert task.id == first.task.id
    fired = await _ticks(store, s, outcomes=[TickOutcome.FIRED])
    assert [(t.outcome, t.task_id) for t in fired] == [(TickOutcome.FIRED, first.task.id)]
    after = await store.schedule_get(tenant, s.id)
    assert after is not None
    assert after.last_task_id == first.task.id
    assert after.resumed_at is None and after.resume_catchup is None


async def test_concurrent_advances_of_one_plan_make_one_task_per_occurrence(
    store: Store, clock: FakeClock
) -> None:
    """schedule_advance: two materializers applying the same plan at once (a race, a retried
    round, a fail-over) make each occurrence's task once; exactly one advance applies."""
    tenant = await _tenant(store)
    schedules = [await _schedule(store, clock, tenant) for _ in range(5)]
    now = clock.now()
    nominals = [now + timedelta(seconds=i) for i in range(1, 21)]
    plans = [_advance(s, nominals[-1], *nominals) for s in schedules]
    results = await asyncio.gather(*(store.schedule_advance(plans) for _ in range(4)))
    for i in range(len(schedules)):
        assert sum(r[i] for r in results) == 1
    for s in schedules:
        tasks = await _schedule_tasks(store, s)
        assert [t.scheduled_for for t in tasks] == nominals
        assert len(await _ticks(store, s, limit=1000)) == len(nominals)


# -- ledger and revisions ------------------------------------------------------------------------


async def test_schedule_tick_list_newest_first_with_cursor_and_outcomes(
    store: Store, clock: FakeClock
) -> None:
    """schedule_tick_list: newest nominal first (then outcome descending), after the
    (nominal, outcome) cursor, only the outcomes asked for."""
    tenant = await _tenant(store)
    s = await _schedule(store, clock, tenant)
    now = clock.now()
    t1, t2 = now + timedelta(seconds=1), now + timedelta(seconds=2)
    ticks = [
        NewTick(t1, TickOutcome.MISSED),
        NewTick(t2, TickOutcome.DST_SKIPPED),
        NewTick(t2, TickOutcome.FIRED, with_task=True),
    ]
    await store.schedule_advance([_advance(s, t2, t2, ticks=ticks)])
    found = await _ticks(store, s)
    assert [(t.nominal, t.outcome) for t in found] == [
        (t2, TickOutcome.FIRED),
        (t2, TickOutcome.DST_SKIPPED),
        (t1, TickOutcome.MISSED),
    ]
    assert found[0].task_id is not None and found[0].recorded_at == now
    page = await _ticks(store, s, limit=1, cursor=(t2, "fired"))
    assert [(t.nominal, t.outcome) for t in page] == [(t2, TickOutcome.DST_SKIPPED)]
    only = await _ticks(store, s, outcomes=[TickOutcome.MISSED, TickOutcome.FIRED])
    assert [t.outcome for t in only] == [TickOutcome.FIRED, TickOutcome.MISSED]


async def test_schedule_revision_list_newest_first_with_cursor(
    store: Store, clock: FakeClock
) -> None:
    """schedule_revision_list: newest first, ids below the cursor, at most limit."""
    tenant = await _tenant(store)
    s = await _schedule(store, clock, tenant)
    for _ in range(3):
        s = await store.schedule_update(tenant, s.id, _change(s))
    revisions = await store.schedule_revision_list(tenant, s.id)
    assert [r.action for r in revisions] == ["update", "update", "update", "create"]
    ids = [r.id for r in revisions]
    assert ids == sorted(ids, reverse=True)
    page = await store.schedule_revision_list(tenant, s.id, limit=2, cursor=ids[1])
    assert [r.id for r in page] == ids[2:4]
