"""The dashboard's schedule pages evaluate expressions in the evaluation pool, on the budget: a
schedule whose next runs are cheap but whose year of DST look-ahead is not still renders at once
(without the DST list)."""

from __future__ import annotations

import time

import httpx
from ui_helpers import Tenant, page

from duetime.schedule.evaluation import node_pool

SPARSE = "FREQ=SECONDLY;BYMONTH=2;BYMONTHDAY=29;BYDAY=MO;BYHOUR=0;BYMINUTE=0"
"""Its first fire times (2044-02-29 00:00:00 ...) are cheap; the 61st needs a day of seconds, and
the page's 500 runs of DST look-ahead would take minutes unbounded."""


async def test_a_heavy_schedule_page_renders_on_the_budget(
    client: httpx.AsyncClient, acme: Tenant
) -> None:
    body = {"rrule": SPARSE, "task": {"target": {"type": "worker"}}}
    made = await client.post("/v1/schedules", json=body, headers=acme.bearer)
    assert made.status_code == 201, made.text
    sid = made.json()["id"]
    jobs = node_pool().jobs
    started = time.monotonic()
    html = await page(client, acme, f"/ui/schedules/{sid}")
    assert time.monotonic() - started < 10  # the budget (~0.2 s a search), not minutes
    assert "2044-02-29" in html  # its next runs are shown
    assert node_pool().jobs > jobs  # and were searched off the event loop
    listed = await page(client, acme, "/ui/schedules")
    assert sid in listed
