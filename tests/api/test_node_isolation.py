"""No tenant can stall a node with schedule expressions: while one tenant keeps twenty heavy
evaluations going (``upcoming?count=1000`` of a sparse RRULE, creates of an RRULE the budget
refuses), ``/healthz`` and another tenant's creates keep answering, that tenant's own schedule
creates get their turn, and the flood is refused past its share (429 naming the limit). A real
``duetime serve`` on loopback, on each store."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from duetime.bench.harness import NodeOptions, Proc, start_node

pytestmark = pytest.mark.acceptance  # a real node and timing bounds: apart from other bursts

TOKEN = "isolation-admin-token-0123456789abcdef"
SPARSE = "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=29;BYDAY=MO"
"""1,000 fire times of it take ~0.3 s of CPU: a heavy evaluation the budget still allows."""
RUNAWAY = "FREQ=MINUTELY;BYMONTH=2;BYMONTHDAY=29;BYDAY=MO;BYHOUR=23"
"""The budget refuses it after its whole allowance (~0.3 s of CPU)."""
HEAVY_CALLS = 20
FLOOD_SECONDS = 4.0
BOUND = 0.25
"""p99 of the light calls under the flood, in seconds: without the pool a light call waited
seconds (the event loop evaluated), with it a few tens of milliseconds on a loaded 2-core box."""


@pytest.fixture
def node(store_url: str, tmp_path: Path) -> Iterator[Proc]:
    proc = start_node(
        tmp_path,
        NodeOptions(db=store_url, env={"DUETIME_ADMIN_TOKEN": TOKEN}, engine=True),
    )
    try:
        yield proc
    finally:
        proc.stop()


def p99(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


async def _tenant(client: httpx.AsyncClient, name: str) -> dict[str, str]:
    resp = await client.post(
        "/v1/admin/tenants", json={"name": name}, headers={"Authorization": f"Bearer {TOKEN}"}
    )
    assert resp.status_code == 201, resp.text
    return {"Authorization": f"Bearer {resp.json()['api_key']}"}


@pytest.mark.alone  # its bound is the node's own latency, not that of a machine shared with tests
async def test_heavy_schedule_evaluations_do_not_stall_the_node(node: Proc) -> None:
    async with httpx.AsyncClient(base_url=node.url, timeout=60) as client:
        flood, calm = await _tenant(client, "flood"), await _tenant(client, "calm")
        made = await client.post(
            "/v1/schedules",
            json={"rrule": SPARSE, "task": {"target": {"type": "worker"}}},
            headers=flood,
        )
        assert made.status_code == 201, made.text
        upcoming = f"/v1/schedules/{made.json()['id']}/upcoming"
        statuses: list[int] = []
        refusals: list[httpx.Response] = []
        stop = asyncio.Event()

        async def heavy(n: int) -> None:
            async with httpx.AsyncClient(base_url=node.url, headers=flood, timeout=60) as own:
                while not stop.is_set():
                    if n % 2:
                        resp = await own.get(upcoming, params={"count": 1000})
                    else:
                        body = {"rrule": RUNAWAY, "task": {"target": {"type": "worker"}}}
                        resp = await own.post("/v1/schedules", json=body)
                    statuses.append(resp.status_code)
                    if resp.status_code == 429:
                        refusals.append(resp)
                        await asyncio.sleep(0.05)  # keeps the flood on without a hot loop

        async def light(
            method: str, path: str, samples: list[float], every: float, **kwargs: object
        ) -> None:
            async with httpx.AsyncClient(base_url=node.url, timeout=60) as own:
                while not stop.is_set():
                    started = time.monotonic()
                    resp = await own.request(method, path, **kwargs)  # type: ignore[arg-type]
                    samples.append(time.monotonic() - started)
                    assert resp.status_code in (200, 201), resp.text
                    await asyncio.sleep(every)

        healthz: list[float] = []
        creates: list[float] = []
        schedules: list[float] = []
        worker_task = {"target": {"type": "worker"}, "run_at": "2099-01-01T00:00:00Z"}
        calm_schedule = {"cron": "0 9 * * *", "task": {"target": {"type": "worker"}}}
        flooding = [asyncio.create_task(heavy(n)) for n in range(HEAVY_CALLS)]
        await asyncio.sleep(0.5)  # the flood is on before the light calls are timed
        probes = [
            asyncio.create_task(light("GET", "/healthz", healthz, 0.02)),
            asyncio.create_task(
                light("POST", "/v1/tasks", creates, 0.02, json=worker_task, headers=calm)
            ),
            asyncio.create_task(
                light("POST", "/v1/schedules", schedules, 0.2, json=calm_schedule, headers=calm)
            ),
        ]
        # The flood runs FLOOD_SECONDS, and on until every probe has its samples (a loaded
        # machine answers the calm tenant's evaluations more slowly, never more than 3x longer).
        await asyncio.sleep(FLOOD_SECONDS)
        for _ in range(int(2 * FLOOD_SECONDS / 0.1)):
            if len(healthz) >= 40 and len(creates) >= 40 and len(schedules) >= 5:
                break
            await asyncio.sleep(0.1)
        stop.set()
        await asyncio.gather(*probes, *flooding)

    assert len(healthz) >= 40 and len(creates) >= 40 and len(schedules) >= 5
    assert p99(healthz) < BOUND, sorted(healthz)[-5:]
    assert p99(creates) < BOUND, sorted(creates)[-5:]
    # The calm tenant's evaluations wait at most about one evaluation per worker.
    assert max(schedules) < 2.0, sorted(schedules)[-5:]
    # The flood did real work, and was refused past its share, by name.
    assert 200 in statuses and 422 in statuses, sorted(set(statuses))
    assert refusals, "the flooding tenant was never over its share"
    assert set(statuses) <= {200, 422, 429}
    problem = refusals[0].json()
    assert problem["limit"] == "schedule_evaluations"
    assert int(refusals[0].headers["retry-after"]) >= 1


async def test_a_node_stops_promptly_in_the_middle_of_a_bulk_walk(node: Proc) -> None:
    async with httpx.AsyncClient(base_url=node.url, timeout=60) as client:
        headers = await _tenant(client, "bulk")
        body = {"tasks": [{"target": {"type": "worker"}, "run_at": "2099-01-01T00:00:00Z"}] * 30}
        made = await client.post("/v1/tasks/batch", json=body, headers=headers)
        assert made.status_code == 201, made.text
        walk = asyncio.create_task(
            client.post(
                "/v1/tasks/cancel",
                json={"rate_per_second": 1, "max_tasks": 30},  # a walk of 30 s
                headers=headers,
            )
        )
        await asyncio.sleep(1.5)
        node.popen.send_signal(signal.SIGTERM)
        started = time.monotonic()
        resp = await asyncio.wait_for(walk, 10)
        assert resp.status_code == 503, resp.text
        assert resp.json()["type"] == "urn:duetime:problem:shutting-down"
        assert resp.headers["retry-after"]
        code = await asyncio.to_thread(node.popen.wait, 15)
    assert time.monotonic() - started < 8, "the node waited for the walk"
    assert code == 0
