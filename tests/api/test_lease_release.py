"""Handing leases back without spending an attempt: ``POST /v1/leases/{id}/release`` and
``POST /v1/leases/release`` (what a stopping worker does with leases it never started)."""

from __future__ import annotations

import httpx
from api_helpers import TenantKey, assert_problem, make_tenant
from lease_helpers import attempts, create, lease, task

from duetime.clock import FakeClock


async def test_release_one_lease(api: httpx.AsyncClient) -> None:
    made = await create(api, retry={"max_attempts": 1})
    [held] = await lease(api)
    resp = await api.post(f"/v1/leases/{held['lease_id']}/release")
    assert resp.status_code == 200, resp.text
    assert resp.json() == {
        "lease_id": held["lease_id"],
        "status": "ok",
        "task_id": made["id"],
        "task_status": "ready",
    }
    after = await task(api, made["id"])
    assert after["status"] == "ready" and after["attempts"] == 0
    assert await attempts(api, made["id"]) == []
    # Its only attempt was not spent: the next lease gets attempt 1 again.
    [again] = await lease(api)
    assert again["attempt"] == 1
    # The old lease is stale now.
    resp = await api.post(f"/v1/leases/{held['lease_id']}/release")
    assert_problem(resp, 409)


async def test_release_with_a_delay(api: httpx.AsyncClient, clock: FakeClock) -> None:
    made = await create(api)
    [held] = await lease(api)
    resp = await api.post(f"/v1/leases/{held['lease_id']}/release", json={"delay_seconds": 60})
    assert resp.json()["task_status"] == "scheduled"
    assert await lease(api) == []
    after = await task(api, made["id"])
    assert after["status"] == "scheduled"


async def test_release_many_reports_stale_items(
    api: httpx.AsyncClient, client: httpx.AsyncClient
) -> None:
    for _ in range(2):
        await create(api)
    held = await lease(api, max_tasks=2)
    ids = [h["lease_id"] for h in held]
    body = {"lease_ids": [ids[0], "0190c6f2-0000-7000-8000-000000000000", ids[1]]}
    resp = await api.post("/v1/leases/release", json=body)
    assert resp.status_code == 200, resp.text
    items = resp.json()["items"]
    assert [i["status"] for i in items] == ["ok", "stale", "ok"]
    assert {i["task_status"] for i in items} == {"ready", None}


async def test_release_is_fenced_by_tenant(client: httpx.AsyncClient, tenant: TenantKey) -> None:
    other = await make_tenant(client, "other")
    resp = await client.post(
        "/v1/tasks", json={"target": {"type": "worker"}}, headers=tenant.headers
    )
    assert resp.status_code == 201
    resp = await client.post(
        "/v1/queues/default/lease",
        json={"wait_seconds": 0, "worker_id": "w1"},
        headers=tenant.headers,
    )
    [held] = resp.json()["leases"]
    resp = await client.post(f"/v1/leases/{held['lease_id']}/release", headers=other.headers)
    assert_problem(resp, 409)


async def test_bad_release_bodies_are_422(api: httpx.AsyncClient) -> None:
    for body, field in [
        ({"delay_seconds": -1}, "delay_seconds"),
        ({"lease_ids": []}, "lease_ids"),
        ({"lease_ids": ["x"], "extra": 1}, "extra"),
    ]:
        path = "/v1/leases/release" if "lease_ids" in body else "/v1/leases/x/release"
        assert_problem(await api.post(path, json=body), 422, field)
