"""The API's share of the node's busy hot path (``Services.pulse``, engine/pressure.py): the
history round waits while creates, leases and acks run at more than a trickle."""

from __future__ import annotations

from dataclasses import replace

import httpx
from fastapi import FastAPI

from duetime.engine.pressure import Pulse


def test_pulse_counts_a_rate_not_a_trickle() -> None:
    now = [0.0]
    pulse = Pulse(per_second=200, window=0.5, clock=lambda: now[0])
    pulse.add(99)
    assert not pulse.busy()  # 99 in half a second: below 200/s
    pulse.add(1)
    assert pulse.busy()
    now[0] = 0.7  # the next window: the busy one before it still counts
    assert pulse.busy()
    pulse.add(5)
    now[0] = 1.3  # one quiet window later
    assert not pulse.busy()
    now[0] = 5.0  # long quiet: nothing carries over
    pulse.add(50)
    assert not pulse.busy()


async def test_creates_leases_and_acks_are_counted(api: httpx.AsyncClient, app: FastAPI) -> None:
    pulse = Pulse(per_second=200, window=0.5, clock=lambda: 0.0)  # one window throughout
    services = app.state.services
    app.state.services = replace(services, pulse=pulse)
    services.creator.count = services.leases.count = pulse.add
    made = await api.post(
        "/v1/tasks/batch",
        json={"tasks": [{"target": {"type": "worker"}, "queue": "q"} for _ in range(50)]},
    )
    assert made.status_code == 201, made.text
    leased = await api.post("/v1/queues/q/lease", json={"worker_id": "w", "max_tasks": 40})
    assert leased.status_code == 200, leased.text
    leases = leased.json()["leases"]
    assert len(leases) == 40 and not pulse.busy()  # 90 tasks in the window: below 200/s
    acked = await api.post(
        "/v1/leases/complete", json={"items": [{"lease_id": x["lease_id"]} for x in leases]}
    )
    assert acked.status_code == 200, acked.text
    assert pulse.busy()  # 130 in the window, more than 100 (200/s over half a second)
