"""The evaluation pool (:mod:`duetime.schedule.evaluation`): jobs run in worker processes and
their refusals come back as they were raised; a tenant over its share is refused by name; waiting
calls start in turn by tenant; a call that gives up leaves no slot taken."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest

from duetime.errors import TooManyRequests, ValidationError
from duetime.schedule.budget import BudgetExceeded
from duetime.schedule.evaluation import (
    LIMIT,
    WORKER_NICENESS,
    EvaluationPool,
    checked_first,
    next_times,
    upcoming_times,
)
from duetime.schedule.parse import parse_spec

NOW = datetime(2030, 1, 1, tzinfo=UTC)
RUNAWAY = "FREQ=MINUTELY;BYMONTH=2;BYMONTHDAY=29;BYDAY=MO;BYHOUR=23"
"""Its first fire time takes minutes of search: over any budget."""


@pytest.fixture
async def pool() -> AsyncIterator[EvaluationPool]:
    made = EvaluationPool(workers=1, per_tenant=2)
    await made.warm()  # the process is up before anything is timed
    try:
        yield made
    finally:
        made.close()


async def test_a_worker_runs_at_a_lower_cpu_priority_than_the_node(pool: EvaluationPool) -> None:
    # Where the workers and the node's event loop want the same core, the loop gets it.
    assert await pool.run("a", os.nice, 0) == os.nice(0) + WORKER_NICENESS


def _idle(pool: EvaluationPool) -> bool:
    state = pool._state
    return state.busy == 0 and not state.in_flight and not state.queues and not state.ring


async def test_jobs_run_in_a_worker_and_refusals_come_back_by_field(pool: EvaluationPool) -> None:
    timing = {"cron": "30 2 * * *", "timezone": "UTC", "anchor": NOW}
    spec, first = await pool.run("a", checked_first, timing, "cron", 10, NOW)
    assert first == datetime(2030, 1, 1, 2, 30, tzinfo=UTC)
    assert [o.nominal.hour for o in await pool.run("a", upcoming_times, spec, NOW, 3)] == [2] * 3
    with pytest.raises(ValidationError) as bad:
        await pool.run("a", checked_first, {**timing, "cron": "61 * * * *"}, "cron", 10, NOW)
    assert bad.value.field == "cron"
    runaway = {"rrule": RUNAWAY, "anchor": NOW}
    with pytest.raises(BudgetExceeded) as over:
        await pool.run("a", checked_first, runaway, "rrule", 10, NOW)
    assert over.value.field == "rrule"
    found = await pool.run("a", next_times, [spec, parse_spec(**runaway), spec], NOW)
    assert found[0] == (True, first)
    assert found[1][0] is False  # the page's one budget ran out on it ...
    assert found[2][0] is False  # ... and so nothing after it is searched
    assert _idle(pool)


async def test_a_tenant_over_its_share_is_refused_by_name(pool: EvaluationPool) -> None:
    held = [asyncio.create_task(pool.run("a", time.sleep, 0.3)) for _ in range(2)]
    await asyncio.sleep(0.05)
    with pytest.raises(TooManyRequests) as refused:
        await pool.run("a", time.sleep, 0)
    assert refused.value.limit == LIMIT and refused.value.retry_after
    await pool.run("b", time.sleep, 0)  # another tenant is not refused
    await asyncio.gather(*held)
    await pool.run("a", time.sleep, 0)  # and the first one has its share back
    assert _idle(pool)


async def test_waiting_calls_start_in_turn_by_tenant() -> None:
    done: list[str] = []
    busy = EvaluationPool(workers=1, per_tenant=8)
    try:
        await busy.warm()
        flood = [asyncio.create_task(call_on(busy, done, "a", n)) for n in range(5)]
        await asyncio.sleep(0.02)  # the flood is queued first ...
        calm = asyncio.create_task(call_on(busy, done, "b", 0))
        await asyncio.gather(*flood, calm)
        # ... yet b runs after at most one more of a's: the turns go round the tenants.
        assert done.index("b0") <= 2, done
        assert _idle(busy)
    finally:
        busy.close()


async def call_on(pool: EvaluationPool, done: list[str], tenant: str, n: int) -> None:
    await pool.run(tenant, time.sleep, 0.1)
    done.append(f"{tenant}{n}")


async def test_a_call_that_gives_up_leaves_no_slot_taken(pool: EvaluationPool) -> None:
    running = asyncio.create_task(pool.run("a", time.sleep, 0.3))
    await asyncio.sleep(0.05)
    waiting = asyncio.create_task(pool.run("b", time.sleep, 0))
    await asyncio.sleep(0.05)
    waiting.cancel()  # it gives up while queued
    with pytest.raises(asyncio.CancelledError):
        await waiting
    running.cancel()  # and this one while its job runs: the slot is freed when the job ends
    with pytest.raises(asyncio.CancelledError):
        await running
    await asyncio.sleep(0.4)
    assert _idle(pool)
    await asyncio.wait_for(pool.run("b", time.sleep, 0), 5)
