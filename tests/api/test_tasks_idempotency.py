"""Idempotency keys on POST /v1/tasks and /v1/tasks/batch, over both stores: the same request
again returns the first task (200), a reused key with other fields is a 409 naming the existing
task and makes nothing, a key is matched by the request and not by the task's current state, and
keys are per tenant."""

from __future__ import annotations

import httpx
from api_helpers import TenantKey, assert_problem, make_tenant

HOOK = {"type": "http", "url": "https://example.com/hook"}
WORKER = {"type": "worker"}


async def test_idempotent_create_returns_the_first_task(
    api: httpx.AsyncClient, client: httpx.AsyncClient
) -> None:
    body = {"target": HOOK, "idempotency_key": "k-1", "payload": 1}
    first = await api.post("/v1/tasks", json=body)
    assert first.status_code == 201
    again = await api.post("/v1/tasks", json=body)
    assert again.status_code == 200
    assert again.json()["id"] == first.json()["id"]
    assert again.json()["payload"] == 1
    other = await api.post("/v1/tasks", json={**body, "payload": 2})  # other fields: 409
    assert other.status_code == 409 and first.json()["id"] in other.json()["detail"]
    listed = (await api.get("/v1/tasks")).json()["items"]
    assert [t["id"] for t in listed] == [first.json()["id"]]


async def test_idempotency_keys_are_per_tenant(
    api: httpx.AsyncClient, client: httpx.AsyncClient, tenant: TenantKey
) -> None:
    other = await make_tenant(client, "other")
    body = {"target": HOOK, "idempotency_key": "shared"}
    a = await client.post("/v1/tasks", json=body, headers=tenant.headers)
    b = await client.post("/v1/tasks", json=body, headers=other.headers)
    assert (a.status_code, b.status_code) == (201, 201)
    assert a.json()["id"] != b.json()["id"]


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


async def test_batch_idempotent_items_come_back_as_they_are(api: httpx.AsyncClient) -> None:
    first = (await api.post("/v1/tasks", json={"target": HOOK, "idempotency_key": "a"})).json()
    batch = {"tasks": [{"target": HOOK, "idempotency_key": "a"}, {"target": HOOK}]}
    items = (await api.post("/v1/tasks/batch", json=batch)).json()["items"]
    assert items[0]["id"] == first["id"]
    assert items[1]["id"] != first["id"]
