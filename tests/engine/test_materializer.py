"""The schedule materializer one round at a time, on both stores, with a pinned clock: every
policy, the tick ledger, DST through the real expression layer, jitter across a fail-over, racing
nodes, and a restart after downtime."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

from duetime.clock import FakeClock
from duetime.engine.leader import Leader
from duetime.engine.materializer import Materializer, MaterializerConfig
from duetime.flow.rules import flow_rules
from duetime.history.retention import RetentionPolicy
from duetime.schedule.occurrences import jitter_for
from duetime.schedule.plan import PlanLimits
from duetime.store import Store
from duetime.types import (
    AttemptOutcome,
    CatchupPolicy,
    ClaimRequest,
    Completion,
    NewSchedule,
    OverlapPolicy,
    QueueSettings,
    Schedule,
    ScheduleChange,
    ScheduleConfig,
    TargetType,
    Task,
    TaskFilter,
    TaskStatus,
    Tick,
    TickFilter,
    TickOutcome,
)

WORKER = {"type": "worker"}
LIMITS = PlanLimits(horizon_seconds=60, late_seconds=5)
OC = TickOutcome
MINUTE = timedelta(minutes=1)


async def make_schedule(store: Store, clock: FakeClock, **fields: Any) -> Schedule:
    tenant = await store.tenant_get("t1") or await store.tenant_create("t1", tenant_id="t1")
    fields.setdefault("task", {"target": WORKER, "name": "tick", "payload": {"n": 1}})
    now = clock.now()
    return await store.schedule_create(
        NewSchedule(
            tenant_id=tenant.id,
            config=ScheduleConfig(**fields),
            anchor_at=now,
            materialized_until=now,
        )
    )


async def node(store: Store, clock: FakeClock, name: str = "a", **limits: Any) -> Materializer:
    leader = Leader(store, name, ttl_seconds=10, clock=clock)
    await leader.run_once()
    leader.is_leader = True  # a second node may believe it leads too (a fail-over window)
    config = MaterializerConfig(limits=dataclasses.replace(LIMITS, **limits))
    return Materializer(store, leader, clock, config)


async def tasks_of(store: Store, s: Schedule) -> list[Task]:
    found = await store.task_list(TaskFilter(tenant_id=s.tenant_id, schedule_id=s.id, limit=1000))
    return sorted(found, key=lambda t: (t.scheduled_for, t.id))


async def ticks_of(store: Store, s: Schedule) -> list[Tick]:
    found = await store.schedule_tick_list(
        TickFilter(tenant_id=s.tenant_id, schedule_id=s.id, limit=1000)
    )
    return sorted(found, key=lambda t: (t.nominal, t.outcome))


def ledger(ticks: list[Tick]) -> list[tuple[datetime, TickOutcome]]:
    return [(t.nominal, t.outcome) for t in ticks]


async def finish(store: Store, task: Task) -> None:
    """Run ``task`` to success (claim it, then complete it)."""
    await store.task_promote_due(100)
    leases = await store.task_claim(
        ClaimRequest(worker_id="w", limit=100, target_types=frozenset({TargetType.WORKER}))
    )
    lease = next(lease for lease in leases if lease.task.id == task.id)
    [result] = await store.task_complete_many(
        [
            Completion(
                task.id,
                lease.lease_id,
                AttemptOutcome.SUCCEEDED,
                lease.task.run_at,
                1.0,
                status=TaskStatus.SUCCEEDED,
            )
        ]
    )
    assert result.accepted


async def test_allow_makes_occurrences_ahead_and_advances_the_cursor(
    store: Store, clock: FakeClock
) -> None:
    s = await make_schedule(store, clock, every="PT20S")
    m = await node(store, clock)
    t0 = clock.now()
    assert await m.run_once() == 6  # 3 tasks + 3 ticks: t0+20, +40, +60
    tasks = await tasks_of(store, s)
    assert [t.scheduled_for for t in tasks] == [t0 + timedelta(seconds=k) for k in (20, 40, 60)]
    assert all(t.run_at == t.scheduled_for and t.status is TaskStatus.SCHEDULED for t in tasks)
    assert tasks[0].payload == {"n": 1} and tasks[0].name == "tick"
    ticks = await ticks_of(store, s)
    assert [(t.outcome, t.task_id) for t in ticks] == [(OC.FIRED, t.id) for t in tasks]
    after = await store.schedule_get(s.tenant_id, s.id)
    assert after is not None
    assert after.materialized_until == t0 + MINUTE
    assert after.next_run_at == t0 + timedelta(seconds=80)
    assert await m.run_once() == 0  # nothing new within the horizon
    clock.advance(20)
    assert await m.run_once() == 2
    assert len(await tasks_of(store, s)) == 4


async def test_only_the_leader_materializes(store: Store, clock: FakeClock) -> None:
    await make_schedule(store, clock, every="PT20S")
    m = await node(store, clock)
    m._leader.is_leader = False
    assert await m.run_once() == 0


async def test_a_round_reads_only_schedules_with_occurrences_due(
    store: Store, clock: FakeClock
) -> None:
    for _ in range(30):
        await make_schedule(store, clock, cron="0 3 * * *")  # next run hours away
    busy = await make_schedule(store, clock, every="PT30S")
    m = await node(store, clock)
    await m.run_once()  # the first round computes every schedule's real next run
    now = clock.now()
    due = await store.schedule_due(now, now + MINUTE, 1000)
    assert [d.schedule.id for d in due] == []  # busy's next run is beyond the horizon now
    clock.advance(30)
    due = await store.schedule_due(clock.now(), clock.now() + MINUTE, 1000)
    assert [d.schedule.id for d in due] == [busy.id]


async def test_jitter_is_deterministic_across_a_failover(store: Store, clock: FakeClock) -> None:
    s = await make_schedule(store, clock, every="PT10S", jitter_seconds=7)
    first = await node(store, clock, "a")
    await first.run_once()
    made = {t.scheduled_for: t.run_at for t in await tasks_of(store, s)}
    assert len(made) == 6
    for nominal, run_at in made.items():
        assert nominal is not None
        assert run_at == nominal + timedelta(seconds=jitter_for(s.id, nominal, 7))
    assert len(set(made.values())) == 6 and any(r != n for n, r in made.items())
    # The occurrences are forgotten (as by a PATCH) and another node makes them again.
    current = await store.schedule_get(s.tenant_id, s.id)
    assert current is not None
    change = ScheduleChange(current.version, "update", None, {}, {}, rewind_to=clock.now())
    await store.schedule_update(s.tenant_id, s.id, change)
    assert await tasks_of(store, s) == []
    second = await node(store, clock, "b")
    await second.run_once()
    assert {t.scheduled_for: t.run_at for t in await tasks_of(store, s)} == made


async def test_two_nodes_racing_make_one_task_per_occurrence(
    store: Store, clock: FakeClock
) -> None:
    schedules = [await make_schedule(store, clock, every="PT5S") for _ in range(10)]
    nodes = [await node(store, clock, name) for name in "abc"]
    for _ in range(3):
        await asyncio.gather(*(n.run_once() for n in nodes))
        clock.advance(5)
    for s in schedules:
        tasks = await tasks_of(store, s)
        nominals = [t.scheduled_for for t in tasks]
        assert len(nominals) == len(set(nominals)) == 14  # (t0, t0 + 70 s] in 5 s steps
        assert len(await ticks_of(store, s)) == 14


async def test_overlap_skip_records_skipped_overlap_while_the_previous_runs(
    store: Store, clock: FakeClock
) -> None:
    s = await make_schedule(store, clock, every="PT1M", overlap=OverlapPolicy.SKIP)
    m = await node(store, clock)
    t0 = clock.now()
    assert await m.run_once() == 0  # skip is decided when due, never ahead
    clock.advance(60)
    await m.run_once()
    [first] = await tasks_of(store, s)
    assert first.status is TaskStatus.READY  # made when due: ready at once
    clock.advance(60)
    await m.run_once()  # the first has not finished
    clock.advance(60)
    await finish(store, first)
    await m.run_once()
    tasks = await tasks_of(store, s)
    assert [t.scheduled_for for t in tasks] == [t0 + MINUTE, t0 + 3 * MINUTE]
    ticks = await ticks_of(store, s)
    assert ledger(ticks) == [
        (t0 + MINUTE, OC.FIRED),
        (t0 + 2 * MINUTE, OC.SKIPPED_OVERLAP),
        (t0 + 3 * MINUTE, OC.FIRED),
    ]
    assert "previous run had not finished" in (ticks[1].detail or "")


async def test_overlap_buffer_one_keeps_one_waiting(store: Store, clock: FakeClock) -> None:
    s = await make_schedule(store, clock, every="PT1M", overlap=OverlapPolicy.BUFFER_ONE)
    m = await node(store, clock)
    t0 = clock.now()
    for _ in range(3):
        clock.advance(60)
        await m.run_once()
    [first] = await tasks_of(store, s)
    waiting = await store.schedule_get(s.tenant_id, s.id)
    assert waiting is not None and waiting.buffered_at == t0 + 2 * MINUTE
    await finish(store, first)
    await m.run_once()  # no time passes: the waiting one fires as soon as the first ended
    tasks = await tasks_of(store, s)
    assert [t.scheduled_for for t in tasks] == [t0 + MINUTE, t0 + 2 * MINUTE]
    assert tasks[1].status is TaskStatus.READY
    ticks = await ticks_of(store, s)
    assert ledger(ticks) == [
        (t0 + MINUTE, OC.FIRED),
        (t0 + 2 * MINUTE, OC.FIRED),
        (t0 + 3 * MINUTE, OC.SKIPPED_OVERLAP),
    ]
    assert "waited for the previous run" in (ticks[1].detail or "")
    after = await store.schedule_get(s.tenant_id, s.id)
    assert after is not None and after.buffered_at is None
    assert after.last_task_id == tasks[1].id


async def test_retention_keeps_a_schedules_last_occurrence(store: Store, clock: FakeClock) -> None:
    """The overlap rule reads a schedule's last run, so the retention sweep leaves it while it
    retires the older finished occurrence (asked of each task's own schedule, by key)."""
    s = await make_schedule(store, clock, every="PT1M", overlap=OverlapPolicy.SKIP)
    m = await node(store, clock)
    clock.advance(60)
    await m.run_once()
    [old] = await tasks_of(store, s)
    await finish(store, old)
    clock.advance(60)
    await m.run_once()
    _, last = await tasks_of(store, s)
    await finish(store, last)
    after = await store.schedule_get(s.tenant_id, s.id)
    assert after is not None and after.last_task_id == last.id
    clock.advance(8 * 86400)
    week = RetentionPolicy(succeeded=7 * 86400.0, failed=7 * 86400.0, cancelled=7 * 86400.0)
    assert await store.task_retention_sweep(week, limit=100) == 1
    assert await store.task_get(s.tenant_id, old.id) is None
    assert await store.task_get(s.tenant_id, last.id) is not None


async def _downtime(
    store: Store, clock: FakeClock, minutes: int, **fields: Any
) -> tuple[Schedule, datetime, list[Tick], list[Task]]:
    """A PT1M schedule whose node dies at t0 and comes back ``minutes`` later (a new node)."""
    s = await make_schedule(store, clock, every="PT1M", **fields)
    t0 = clock.now()
    old = await node(store, clock, "old", horizon_seconds=0)
    await old.run_once()
    clock.advance(minutes * 60)
    new = await node(store, clock, "new", horizon_seconds=0)
    await new.run_once()
    return s, t0, await ticks_of(store, s), await tasks_of(store, s)


async def test_downtime_catchup_latest(store: Store, clock: FakeClock) -> None:
    _, t0, ticks, tasks = await _downtime(store, clock, 5)
    # t0+1..t0+4 are late by more than late_seconds; t0+5 is due now and fires as usual.
    assert ledger(ticks) == [
        (t0 + MINUTE, OC.MISSED),
        (t0 + 2 * MINUTE, OC.MISSED),
        (t0 + 3 * MINUTE, OC.MISSED),
        (t0 + 4 * MINUTE, OC.CAUGHT_UP),
        (t0 + 5 * MINUTE, OC.FIRED),
    ]
    assert "only the latest one runs" in (ticks[0].detail or "")
    assert [t.scheduled_for for t in tasks] == [t0 + 4 * MINUTE, t0 + 5 * MINUTE]
    assert all(t.status is TaskStatus.READY for t in tasks)
    assert ticks[3].task_id == tasks[0].id


async def test_downtime_catchup_none(store: Store, clock: FakeClock) -> None:
    _, t0, ticks, tasks = await _downtime(store, clock, 4, catchup=CatchupPolicy.NONE)
    assert [o for _, o in ledger(ticks)] == [OC.MISSED, OC.MISSED, OC.MISSED, OC.FIRED]
    assert "catchup is none" in (ticks[0].detail or "")
    assert [t.scheduled_for for t in tasks] == [t0 + 4 * MINUTE]


async def test_downtime_catchup_all_bounded_by_max_runs_and_window(
    store: Store, clock: FakeClock
) -> None:
    _, t0, ticks, tasks = await _downtime(
        store, clock, 10, catchup=CatchupPolicy.ALL, catchup_max_runs=3,
        catchup_window_seconds=6 * 60,
    )  # fmt: skip
    outcomes = [o for _, o in ledger(ticks)]
    assert outcomes == [OC.MISSED] * 6 + [OC.CAUGHT_UP] * 3 + [OC.FIRED]
    assert "before the catch-up window" in (ticks[0].detail or "")  # t0+1..t0+4 (<= now - 6 min)
    assert "over catchup_max_runs (3)" in (ticks[5].detail or "")  # t0+6: in the window
    assert [t.scheduled_for for t in tasks] == [t0 + k * MINUTE for k in (7, 8, 9, 10)]


async def test_pause_resume_makes_no_burst_unless_asked(store: Store, clock: FakeClock) -> None:
    s = await make_schedule(store, clock, every="PT1M")
    m = await node(store, clock)
    t0 = clock.now()
    await m.run_once()
    assert len(await tasks_of(store, s)) == 1  # t0+1 min, made ahead
    s1 = await store.schedule_get(s.tenant_id, s.id)
    assert s1 is not None
    pause = ScheduleChange(s1.version, "pause", None, {}, {}, paused=True, rewind_to=clock.now())
    s2 = await store.schedule_update(s.tenant_id, s.id, pause)
    assert await tasks_of(store, s) == []  # the occurrence made ahead is forgotten
    clock.advance(5 * 60 + 30)
    assert await m.run_once() == 0  # paused: nothing is made
    resume = ScheduleChange(s2.version, "resume", None, {}, {}, paused=False,
                            resume_at=clock.now())  # fmt: skip
    await store.schedule_update(s.tenant_id, s.id, resume)
    await m.run_once()
    ticks = await ticks_of(store, s)
    assert ledger(ticks)[:5] == [(t0 + k * MINUTE, OC.SKIPPED_PAUSED) for k in range(1, 6)]
    assert ledger(ticks)[5:] == [(t0 + 6 * MINUTE, OC.FIRED)]  # made ahead again
    assert [t.scheduled_for for t in await tasks_of(store, s)] == [t0 + 6 * MINUTE]


async def test_resume_with_catchup_latest_runs_one(store: Store, clock: FakeClock) -> None:
    s = await make_schedule(store, clock, every="PT1M", overlap=OverlapPolicy.SKIP)
    m = await node(store, clock)
    t0 = clock.now()
    pause = ScheduleChange(s.version, "pause", None, {}, {}, paused=True, rewind_to=t0)
    s2 = await store.schedule_update(s.tenant_id, s.id, pause)
    clock.advance(3 * 60 + 30)
    resume = ScheduleChange(s2.version, "resume", None, {}, {}, paused=False,
                            resume_at=clock.now(), resume_catchup=CatchupPolicy.LATEST)  # fmt: skip
    await store.schedule_update(s.tenant_id, s.id, resume)
    await m.run_once()
    assert ledger(await ticks_of(store, s)) == [
        (t0 + MINUTE, OC.SKIPPED_PAUSED),
        (t0 + 2 * MINUTE, OC.SKIPPED_PAUSED),
        (t0 + 3 * MINUTE, OC.CAUGHT_UP),
    ]
    [task] = await tasks_of(store, s)
    assert task.scheduled_for == t0 + 3 * MINUTE and task.status is TaskStatus.READY


async def _walk(m: Materializer, clock: FakeClock, instants: list[datetime]) -> None:
    """Run a round shortly before each instant (inside the horizon)."""
    for instant in instants:
        clock.set(instant - timedelta(seconds=30))
        await m.run_once()


async def test_dst_gap_shifts_or_skips_a_fixed_time(store: Store, clock: FakeClock) -> None:
    clock.set(datetime(2026, 3, 7, 12, 0, tzinfo=UTC))
    tz = "America/New_York"
    shifted = await make_schedule(store, clock, cron="30 2 * * *", timezone=tz)
    skipped = await make_schedule(
        store, clock, cron="30 2 * * *", timezone=tz, dst_nonexistent="skip"
    )
    m = await node(store, clock)
    jump = datetime(2026, 3, 8, 7, 0, tzinfo=UTC)  # 03:00 EDT, right after the gap
    await _walk(m, clock, [jump, datetime(2026, 3, 9, 6, 30, tzinfo=UTC)])
    [shift, normal] = await ticks_of(store, shifted)
    assert (shift.nominal, shift.outcome) == (jump, OC.DST_SHIFTED)
    assert "02:30 does not exist on 2026-03-08" in (shift.detail or "")
    assert shift.task_id is not None and normal.outcome is OC.FIRED
    assert [t.scheduled_for for t in await tasks_of(store, shifted)] == [
        jump,
        datetime(2026, 3, 9, 6, 30, tzinfo=UTC),
    ]
    [gap, after] = await ticks_of(store, skipped)
    assert (gap.nominal, gap.outcome, gap.task_id) == (jump, OC.DST_SKIPPED, None)
    assert "skipped (dst.nonexistent=skip)" in (gap.detail or "")
    assert [t.scheduled_for for t in await tasks_of(store, skipped)] == [after.nominal]


async def test_dst_fold_runs_once_or_twice(store: Store, clock: FakeClock) -> None:
    clock.set(datetime(2026, 10, 31, 12, 0, tzinfo=UTC))
    tz = "America/New_York"
    once = await make_schedule(store, clock, cron="30 1 * * *", timezone=tz)
    both = await make_schedule(store, clock, cron="30 1 * * *", timezone=tz, dst_ambiguous="both")
    m = await node(store, clock)
    edt, est = datetime(2026, 11, 1, 5, 30, tzinfo=UTC), datetime(2026, 11, 1, 6, 30, tzinfo=UTC)
    await _walk(m, clock, [edt, est])
    assert ledger(await ticks_of(store, once)) == [(edt, OC.FIRED)]
    twice = await ticks_of(store, both)
    assert ledger(twice) == [(edt, OC.FIRED), (est, OC.FIRED)]
    assert "second run" in (twice[1].detail or "")
    assert [t.scheduled_for for t in await tasks_of(store, both)] == [edt, est]


async def test_hourly_keeps_its_rhythm_through_a_dst_change(store: Store, clock: FakeClock) -> None:
    clock.set(datetime(2026, 11, 1, 4, 0, 30, tzinfo=UTC))
    s = await make_schedule(store, clock, cron="0 * * * *", timezone="America/New_York")
    m = await node(store, clock, horizon_seconds=4 * 3600)
    await m.run_once()
    nominals = [t.scheduled_for for t in await tasks_of(store, s)]
    hours = [datetime(2026, 11, 1, h, 0, tzinfo=UTC) for h in range(5, 9)]
    assert nominals == hours  # 01:00 EDT, 01:00 EST, 02:00 EST, 03:00 EST: every real hour


async def test_a_schedule_that_ends_stops_being_read(store: Store, clock: FakeClock) -> None:
    t0 = clock.now()
    s = await make_schedule(store, clock, every="PT20S", end_at=t0 + timedelta(seconds=40))
    m = await node(store, clock)
    await m.run_once()
    assert [t.scheduled_for for t in await tasks_of(store, s)] == [
        t0 + timedelta(seconds=20),
        t0 + timedelta(seconds=40),
    ]
    after = await store.schedule_get(s.tenant_id, s.id)
    assert after is not None and after.next_run_at is None
    clock.advance(3600)
    assert await store.schedule_due(clock.now(), clock.now() + MINUTE, 10) == []


async def test_waiting_schedules_neither_starve_due_ones_nor_spin(
    store: Store, clock: FakeClock
) -> None:
    waiting = [
        await make_schedule(store, clock, every="PT1M", overlap=OverlapPolicy.BUFFER_ONE)
        for _ in range(3)
    ]
    m = await node(store, clock)
    for _ in range(2):
        clock.advance(60)
        await m.run_once()
    for s in waiting:
        current = await store.schedule_get(s.tenant_id, s.id)
        assert current is not None and current.buffered_at is not None
    clock.advance(1)
    due = await make_schedule(store, clock, every="PT20S")
    small = Materializer(store, m._leader, clock, MaterializerConfig(batch=2, limits=LIMITS))
    reads = 0
    original = store.schedule_due

    async def counting(*args: Any) -> Any:
        nonlocal reads
        reads += 1
        return await original(*args)

    store.schedule_due = counting  # type: ignore[method-assign]
    try:
        await small.run_once()
    finally:
        store.schedule_due = original  # type: ignore[method-assign]
    assert len(await tasks_of(store, due)) == 3
    assert reads == 1  # the batch ended with a waiting schedule: nothing due is left
    # Each round looks at the waiting schedules least recently looked at: they take turns.
    for _ in range(2):
        await small.run_once()
        rows = await store.schedule_due(clock.now(), clock.now(), 10)
        assert [d.waiting for d in rows] == [True] * 3
    looked = [await store.schedule_get(s.tenant_id, s.id) for s in waiting]
    assert all(s is not None and s.materialized_until == clock.now() for s in looked)


async def test_occurrences_take_their_keys_under_the_queues_keyed_limits(
    store: Store, clock: FakeClock
) -> None:
    """As any create: the keyed rate limit's key (``flow_key``) and, with a per-key concurrency
    limit, the concurrency key are evaluated on the template's task; a queue's uniqueness window
    does not hold an occurrence back (a schedule makes one task an occurrence)."""
    rules, per_key = flow_rules(
        {"key_limit": {"key": "payload.customer", "rate": "1/s", "max_concurrency": 1},
         "unique": {"key": "name", "period": "PT1H"}}
    )  # fmt: skip
    tenant = await store.tenant_get("t1") or await store.tenant_create("t1", tenant_id="t1")
    await store.queue_put(
        tenant.id, "keyed", QueueSettings(flow=rules, max_concurrency_per_key=per_key)
    )
    keyed = await make_schedule(
        store, clock, every="PT20S",
        task={"target": WORKER, "name": "sync", "queue": "keyed", "payload": {"customer": "c-7"}},
    )  # fmt: skip
    plain = await make_schedule(store, clock, every="PT20S")
    m = await node(store, clock)
    await m.run_once()
    made = await tasks_of(store, keyed)
    assert len(made) == 3  # the uniqueness window on "name" held none of them back
    assert {(t.flow_key, t.concurrency_key) for t in made} == {("c-7", "c-7")}
    assert {(t.flow_key, t.concurrency_key) for t in await tasks_of(store, plain)} == {(None, None)}
