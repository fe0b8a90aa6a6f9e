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


async def test_reused_idempotency_key_with_other_fields_is_a_409_naming_the_task(
    api: httpx.AsyncClient,
) -> None:
    first = {"target": WORKER, "payload": {"n": 1}, "idempotency_key": "k-1"}
    made = await api.post("/v1/tasks", json=first)
    assert made.status_code == 201
    task_id = made.json()["id"]
    # The same request again (a default spelt out is the same field): the task, 200.
    again = await api.post("/v1/tasks", json={**first, "priority": 0})
    assert again.status_code == 200 and again.json()["id"] == task_id
    # Different fields: 409 naming the existing task; nothing made.
    clash = await api.post("/v1/tasks", json={**first, "payload": {"n": 2}})
    problem = assert_problem(clash, 409)
    assert task_id in str(problem["detail"]) and "k-1" in str(problem["detail"])
    assert len((await api.get("/v1/tasks")).json()["items"]) == 1
    # The original request still matches after the task is changed (fingerprint, not state).
    patched = await api.patch(f"/v1/tasks/{task_id}", json={"payload": {"n": 3}})
    assert patched.status_code == 200, patched.text
    after = await api.post("/v1/tasks", json=first)
    assert after.status_code == 200 and after.json()["id"] == task_id
    assert after.json()["payload"] == {"n": 3}
    # Keys are per tenant and per request: another key is another task.
    other = await api.post("/v1/tasks", json={**first, "idempotency_key": "k-2"})
    assert other.status_code == 201


async def test_payload_ref_instead_of_a_payload(api: httpx.AsyncClient) -> None:
    ref = "vault://secrets/customer-42/report"
    made = await api.post("/v1/tasks", json={"target": WORKER, "payload_ref": ref})
    assert made.status_code == 201, made.text
    assert made.json()["payload_ref"] == ref and made.json()["payload"] is None
    got = (await api.get(f"/v1/tasks/{made.json()['id']}")).json()
    assert got["payload_ref"] == ref
    both = {"target": WORKER, "payload": {"a": 1}, "payload_ref": ref}
    assert_problem(await api.post("/v1/tasks", json=both), 422, "payload_ref")
    too_long = {"target": WORKER, "payload_ref": "x" * 2049}
    assert_problem(await api.post("/v1/tasks", json=too_long), 422, "payload_ref")
    header_unsafe = {"target": WORKER, "payload_ref": "a\r\nX-Evil: 1"}
    assert_problem(await api.post("/v1/tasks", json=header_unsafe), 422, "payload_ref")
    leased = await api.post("/v1/queues/default/lease", json={"worker_id": "w", "wait_seconds": 0})
    assert leased.status_code == 200, leased.text
    assert leased.json()["leases"][0]["task"]["payload_ref"] == ref
