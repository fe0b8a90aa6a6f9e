"""The materializer's pure plan on long gaps: bounded work and ledger, the right occurrences."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from duetime.schedule.budget import BudgetExceeded
from duetime.schedule.plan import PlanLimits, plan_advance
from duetime.types import (
    CatchupPolicy,
    OverlapPolicy,
    Schedule,
    ScheduleConfig,
    ScheduleDue,
    TaskStatus,
    TickOutcome,
)

T0 = datetime(2030, 1, 1, tzinfo=UTC)


def schedule(cursor: datetime, **fields: object) -> Schedule:
    config = ScheduleConfig(task={"target": {"type": "worker"}}, **fields)  # type: ignore[arg-type]
    return Schedule(
        id="s1", tenant_id="t", config=config, anchor_at=T0, paused=False, pause_note=None,
        paused_at=None, resumed_at=None, resume_catchup=None, next_run_at=cursor,
        materialized_until=cursor, buffered_at=None, last_task_id=None, version=1,
        created_at=T0, updated_at=T0,
    )  # fmt: skip


def test_two_days_down_with_a_per_second_schedule_stays_bounded() -> None:
    s = schedule(T0, every="PT1S", catchup=CatchupPolicy.ALL, catchup_max_runs=5000)
    now = T0 + timedelta(days=2)
    limits = PlanLimits(horizon_seconds=0, late_seconds=10)
    started = time.perf_counter()
    plan = plan_advance(ScheduleDue(s, None), now, limits)
    assert time.perf_counter() - started < 5  # 172,800 occurrences are never all walked
    caught = [k.nominal for k in plan.ticks if k.outcome is TickOutcome.CAUGHT_UP]
    late_edge = now - timedelta(seconds=10)
    assert caught == [late_edge - timedelta(seconds=4999 - i) for i in range(5000)]
    missed = [k for k in plan.ticks if k.outcome is TickOutcome.MISSED]
    assert len(missed) == 1000  # the ledger cap for one gap
    assert missed[0].nominal == T0 + timedelta(seconds=1)
    assert "not listed" in (missed[-1].detail or "")
    fired = [k.nominal for k in plan.ticks if k.outcome is TickOutcome.FIRED]
    assert fired == [late_edge + timedelta(seconds=i) for i in range(1, 11)]
    assert len(plan.tasks) == 5010 and plan.materialized_until == now
    assert plan.next_run_at == now + timedelta(seconds=1)


def test_latest_is_found_without_walking_the_window() -> None:
    s = schedule(T0, every="PT1S", catchup_window_seconds=10 * 86400)
    now = T0 + timedelta(days=9)
    started = time.perf_counter()
    plan = plan_advance(ScheduleDue(s, None), now, PlanLimits(horizon_seconds=0, late_seconds=1))
    assert time.perf_counter() - started < 2
    [caught] = [k.nominal for k in plan.ticks if k.outcome is TickOutcome.CAUGHT_UP]
    assert caught == now - timedelta(seconds=1)


def test_skip_decides_against_the_previous_task() -> None:
    s = schedule(T0, every="PT1M", overlap=OverlapPolicy.SKIP)
    now = T0 + timedelta(minutes=1)
    running = plan_advance(ScheduleDue(s, TaskStatus.RUNNING), now, PlanLimits())
    assert [k.outcome for k in running.ticks] == [TickOutcome.SKIPPED_OVERLAP]
    assert running.tasks == [] and running.last_task_for is None
    done = plan_advance(ScheduleDue(s, TaskStatus.FAILED), now, PlanLimits())
    assert [k.outcome for k in done.ticks] == [TickOutcome.FIRED]
    assert done.last_task_for == now
    ahead = plan_advance(ScheduleDue(s, None), T0 + timedelta(seconds=30), PlanLimits())
    assert ahead.tasks == [] and ahead.materialized_until == T0 + timedelta(seconds=30)


def test_a_runaway_expression_is_refused_by_the_plan_not_searched_for_minutes() -> None:
    """A schedule the API would refuse (stored before the budget existed, or through another
    path): its plan gives up within the evaluation budget, so the materializer reports that one
    schedule and goes on with the others."""
    runaway = "FREQ=MINUTELY;BYMONTH=2;BYMONTHDAY=29;BYDAY=MO;BYHOUR=23"
    s = schedule(T0, rrule=runaway)
    with pytest.raises(BudgetExceeded) as raised:
        plan_advance(ScheduleDue(s, None), T0 + timedelta(minutes=1), PlanLimits())
    assert raised.value.field == "rrule"
