"""Expression evaluation is bounded: an expression whose next fire times cannot be found
within the evaluation budget is a 422 naming its field at create and PATCH, ``upcoming`` and
backfill are bounded alike, and reads answer ``next_run_at`` without searching again."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

import httpx
from api_helpers import assert_problem
from fastapi import FastAPI

from duetime.clock import FakeClock

WORKER = {"type": "worker"}
# dateutil steps through every minute of every day until a Monday 29 February at 23:00 comes:
# minutes of CPU in one call before the budget.
RUNAWAY = "FREQ=MINUTELY;BYMONTH=2;BYMONTHDAY=29;BYDAY=MO;BYHOUR=23"
# Its first fire times (2044-02-29 00:00:00 ...) are cheap; the 61st needs a day of seconds.
SPARSE = "FREQ=SECONDLY;BYMONTH=2;BYMONTHDAY=29;BYDAY=MO;BYHOUR=0;BYMINUTE=0"


def schedule(**fields: Any) -> dict[str, Any]:
    fields.setdefault("task", {"target": WORKER, "name": "report"})
    return fields


async def test_a_runaway_expression_is_refused_at_create_and_patch(
    api: httpx.AsyncClient,
) -> None:
    resp = await api.post("/v1/schedules", json=schedule(rrule=RUNAWAY))
    body = assert_problem(resp, 422, "rrule")
    assert "budget" in str(body["detail"])
    assert (await api.get("/v1/schedules")).json()["items"] == []
    created = await api.post("/v1/schedules", json=schedule(rrule="FREQ=DAILY;BYHOUR=9"))
    assert created.status_code == 201, created.text
    sid = created.json()["id"]
    assert_problem(await api.patch(f"/v1/schedules/{sid}", json={"rrule": RUNAWAY}), 422, "rrule")
    after = (await api.get(f"/v1/schedules/{sid}")).json()
    assert after["rrule"] == "FREQ=DAILY;BYHOUR=9" and after["version"] == 1


async def test_upcoming_and_backfill_are_bounded_by_the_budget(api: httpx.AsyncClient) -> None:
    created = await api.post("/v1/schedules", json=schedule(rrule=SPARSE))
    assert created.status_code == 201, created.text
    sid = created.json()["id"]
    assert created.json()["next_run_at"] == "2044-02-29T00:00:00Z"
    few = await api.get(f"/v1/schedules/{sid}/upcoming", params={"count": 10})
    assert few.status_code == 200, few.text
    assert len(few.json()["items"]) == 10
    many = await api.get(f"/v1/schedules/{sid}/upcoming", params={"count": 1000})
    assert_problem(many, 422, "count")
    created = await api.post(
        "/v1/schedules",
        json=schedule(rrule=SPARSE, start_at="1970-01-01T00:00:00Z"),
    )
    assert created.status_code == 201, created.text
    backfill = {"start": "1970-01-01T00:00:00Z", "end": "2029-01-01T00:00:00Z", "max_runs": 10000}
    resp = await api.post(f"/v1/schedules/{created.json()['id']}/backfill", json=backfill)
    assert_problem(resp, 422, "start")


async def test_reads_do_not_search_for_next_run_again(
    api: httpx.AsyncClient, clock: FakeClock, app: FastAPI
) -> None:
    made = [
        (await api.post("/v1/schedules", json=schedule(cron=f"{m} * * * *"))).json()
        for m in range(5)
    ]
    pool = app.state.services.evaluations  # every search runs there

    async def searches(read: Awaitable[httpx.Response]) -> tuple[int, httpx.Response]:
        before = pool.jobs
        resp = await read
        return pool.jobs - before, resp

    for _ in range(3):
        jobs, resp = await searches(api.get("/v1/schedules"))
        assert jobs == 0
        listed = resp.json()["items"]
        assert sorted(s["next_run_at"] for s in listed) == sorted(s["next_run_at"] for s in made)
        for s in made:
            jobs, resp = await searches(api.get(f"/v1/schedules/{s['id']}"))
            assert jobs == 0 and resp.json()["next_run_at"] == s["next_run_at"]
    # Once a fire time passes, the next read finds the next ones (in one search), then reuses
    # them.
    clock.advance(3600)
    jobs, resp = await searches(api.get("/v1/schedules"))
    assert jobs == 1
    for s in resp.json()["items"]:
        before = next(m for m in made if m["id"] == s["id"])
        assert s["next_run_at"] > before["next_run_at"]
    assert (await searches(api.get("/v1/schedules")))[0] == 0
