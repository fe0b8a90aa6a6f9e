"""Helpers of the queue and lease API tests (imported as ``lease_helpers``)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
from fastapi import FastAPI

from duetime.clock import FakeClock
from duetime.engine.leader import Leader
from duetime.engine.reaper import Reaper
from duetime.store import Store

WORKER = {"type": "worker"}
HTTP = {"type": "http", "url": "http://127.0.0.1:9/hook", "method": "POST", "headers": {}}
NO_JITTER = {"max_attempts": 3, "initial_delay_seconds": 1, "multiplier": 2, "jitter": 0}


async def create(api: httpx.AsyncClient, **fields: Any) -> dict[str, Any]:
    """A task made through the API (a ``worker`` task unless ``target`` says otherwise)."""
    fields.setdefault("target", WORKER)
    resp = await api.post("/v1/tasks", json=fields)
    assert resp.status_code == 201, resp.text
    return dict(resp.json())


async def lease(
    api: httpx.AsyncClient, queue: str = "default", *, status: int = 200, **body: Any
) -> list[dict[str, Any]]:
    """``POST /v1/queues/{queue}/lease``; no waiting unless ``wait_seconds`` is given."""
    body.setdefault("worker_id", "w1")
    body.setdefault("wait_seconds", 0)
    resp = await api.post(f"/v1/queues/{queue}/lease", json=body)
    assert resp.status_code == status, resp.text
    return list(resp.json()["leases"]) if status == 200 else []


async def task(api: httpx.AsyncClient, task_id: str) -> dict[str, Any]:
    resp = await api.get(f"/v1/tasks/{task_id}")
    assert resp.status_code == 200, resp.text
    return dict(resp.json())


async def attempts(api: httpx.AsyncClient, task_id: str) -> list[dict[str, Any]]:
    resp = await api.get(f"/v1/tasks/{task_id}/attempts")
    assert resp.status_code == 200, resp.text
    return list(resp.json()["items"])


async def reap(store: Store, clock: FakeClock) -> int:
    """One round of the real reaper (as the leader): ends expired leases as lease_expired."""
    leader = Leader(store, "node-a", ttl_seconds=10, clock=clock)
    await leader.run_once()
    return await Reaper(store, leader, clock, batch=100, interval=1).run_once()


async def polls_waiting(app: FastAPI, count: int, within: float = 10.0) -> None:
    """Return once ``count`` lease calls of ``app`` wait for a task (they claimed, found nothing
    and now wait on the store's signal): the event a test creates its task after."""
    deadline = time.monotonic() + within
    while True:
        waiting = sum(app.state.services.leases._waiting.values())  # the hub's own count
        if waiting >= count:
            return
        assert time.monotonic() < deadline, f"{waiting} of {count} lease calls waiting"
        await asyncio.sleep(0.005)
