"""Waiting for a task's end: ``GET /v1/tasks/{id}?wait=`` answers when the task ends or the wait
runs out, woken by the store's own wake-up (no sweep, no poll of its own); many waits at once
each answer soon after their task's end; waits hold nothing once answered."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import pytest
from api_helpers import assert_problem
from fastapi import FastAPI
from lease_helpers import create, lease

from duetime.lifecycle.waits import EndWatch


@pytest.fixture
def no_sweeps(app: FastAPI) -> None:
    """Waits read their tasks again only when woken (no sweep each second), so a wait that
    answers before its ``wait`` ran out proves the end woke it."""
    app.state.waits = EndWatch(app.state.store, sweep_seconds=3600)


def _watch(app: FastAPI) -> EndWatch:
    found: EndWatch = app.state.waits
    return found


async def _until_waiting(app: FastAPI, count: int) -> None:
    deadline = time.monotonic() + 10
    while _watch(app).open < count:
        assert time.monotonic() < deadline, f"{_watch(app).open} of {count} waits open"
        await asyncio.sleep(0.005)


async def _ack(api: httpx.AsyncClient, lease_id: str, result: Any) -> None:
    resp = await api.post(f"/v1/leases/{lease_id}/complete", json={"result": result})
    assert resp.status_code == 200, resp.text


async def test_a_wait_answers_when_the_task_ends(
    api: httpx.AsyncClient, app: FastAPI, no_sweeps: None
) -> None:
    task = await create(api, name="slow")
    waiter = asyncio.create_task(api.get(f"/v1/tasks/{task['id']}", params={"wait": 30}))
    await _until_waiting(app, 1)
    (held,) = await lease(api)
    started = time.monotonic()
    await _ack(api, held["lease_id"], {"ok": True})
    answer = await waiter
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["status"] == "succeeded" and body["result"] == {"ok": True}
    # Far below the 30 s asked for: the end woke the wait (sweeps are off).
    assert time.monotonic() - started < 5
    assert _watch(app).sweeps == 0 and _watch(app).open == 0


async def test_a_wait_that_runs_out_answers_the_task_as_it_is(
    api: httpx.AsyncClient, app: FastAPI
) -> None:
    task = await create(api)
    started = time.monotonic()
    body = (await api.get(f"/v1/tasks/{task['id']}", params={"wait": 0.2})).json()
    assert body["status"] == "ready" and time.monotonic() - started >= 0.2
    ended = await create(api)
    await api.post(f"/v1/tasks/{ended['id']}/cancel")
    started = time.monotonic()
    body = (await api.get(f"/v1/tasks/{ended['id']}", params={"wait": 30})).json()
    assert body["status"] == "cancelled" and time.monotonic() - started < 5
    assert _watch(app).open == 0


async def test_a_cancel_wakes_a_wait_and_bad_waits_are_refused(
    api: httpx.AsyncClient, app: FastAPI, no_sweeps: None
) -> None:
    task = await create(api)
    waiter = asyncio.create_task(api.get(f"/v1/tasks/{task['id']}", params={"wait": 30}))
    await _until_waiting(app, 1)
    await api.post(f"/v1/tasks/{task['id']}/cancel")
    assert (await waiter).json()["status"] == "cancelled"
    for bad in ("-1", "61", "soon"):
        assert_problem(await api.get(f"/v1/tasks/{task['id']}", params={"wait": bad}), 422, "wait")


async def test_many_waits_each_answer_soon_after_their_tasks_end(
    api: httpx.AsyncClient, app: FastAPI, no_sweeps: None
) -> None:
    count = 200
    made = await api.post(
        "/v1/tasks/batch", json={"tasks": [{"target": {"type": "worker"}} for _ in range(count)]}
    )
    ids = [t["id"] for t in made.json()["items"]]
    answered: dict[str, float] = {}

    async def wait(task_id: str) -> None:
        resp = await api.get(f"/v1/tasks/{task_id}", params={"wait": 60})
        assert resp.json()["status"] == "succeeded"
        answered[task_id] = time.monotonic()

    waiters = [asyncio.create_task(wait(i)) for i in ids]
    await _until_waiting(app, count)
    ended: dict[str, float] = {}
    while len(ended) < count:
        leases = await lease(api, max_tasks=50)
        body = {"items": [{"lease_id": x["lease_id"], "result": 1} for x in leases]}
        assert (await api.post("/v1/leases/complete", json=body)).status_code == 200
        now = time.monotonic()
        ended.update((x["task"]["id"], now) for x in leases)
    await asyncio.gather(*waiters)
    lags = sorted(answered[i] - ended[i] for i in ids)
    # Each answer follows its ack within the same event loop turns (the in-process client
    # shares the loop); a second is far from what a sweep or a poll would need (sweeps off).
    assert lags[int(count * 0.99)] < 1.0, lags[-5:]
    assert _watch(app).sweeps == 0 and _watch(app).open == 0
