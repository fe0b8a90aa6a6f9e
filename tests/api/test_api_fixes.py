"""Fixes from issue 14, over both stores: batch errors name the task (``tasks.N.depends_on``);
a reused idempotency key with a different request is a 409 naming the existing task."""

from __future__ import annotations

import uuid

import httpx
from api_helpers import assert_problem

WORKER = {"type": "worker"}


async def test_batch_missing_parent_names_the_task(api: httpx.AsyncClient) -> None:
    parent = (await api.post("/v1/tasks", json={"target": WORKER})).json()["id"]
    ghost = str(uuid.uuid4())
    tasks = [
        {"target": WORKER, "depends_on": [parent]},
        {"target": WORKER, "depends_on": [parent, ghost]},
    ]
    problem = assert_problem(
        await api.post("/v1/tasks/batch", json={"tasks": tasks}), 422, "tasks.1.depends_on"
    )
    assert ghost in str(problem["detail"])
    assert len((await api.get("/v1/tasks")).json()["items"]) == 1  # nothing made
