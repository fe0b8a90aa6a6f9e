"""Tenant quotas and tenant management (SPEC §7 "Tenant quotas"): the admin calls,
and creates over a quota refused with 429 naming it, creating nothing."""

from __future__ import annotations

import httpx
from api_helpers import ADMIN, TenantKey, assert_problem, make_tenant

from duetime.clock import FakeClock

WORKER = {"type": "worker"}
EVERY_MINUTE = {"every": "PT1M", "task": {"target": WORKER}}


async def _patch(client: httpx.AsyncClient, tenant: TenantKey, **quotas: object) -> httpx.Response:
    return await client.patch(f"/v1/admin/tenants/{tenant.id}", json=quotas, headers=ADMIN)


async def test_admin_lists_gets_and_patches_tenants(
    client: httpx.AsyncClient, tenant: TenantKey
) -> None:
    other = await make_tenant(client, "other")
    listed = (await client.get("/v1/admin/tenants", headers=ADMIN)).json()["items"]
    assert [t["id"] for t in listed] == [tenant.id, other.id]
    assert listed[0]["quotas"] == {
        "max_pending_tasks": None,
        "max_creates_per_second": None,
        "max_concurrency": None,
        "max_schedules": None,
        "weight": 1,
    }
    assert listed[0]["usage"] == {"pending_tasks": 0, "schedules": 0}
    resp = await _patch(client, tenant, max_pending_tasks=5, weight=3)
    assert resp.status_code == 200, resp.text
    assert resp.json()["quotas"]["max_pending_tasks"] == 5
    assert resp.json()["quotas"]["weight"] == 3
    # Left out keeps; null removes (weight: back to 1).
    resp = await _patch(client, tenant, max_schedules=2)
    assert resp.json()["quotas"] | {} == {
        "max_pending_tasks": 5,
        "max_creates_per_second": None,
        "max_concurrency": None,
        "max_schedules": 2,
        "weight": 3,
    }
    resp = await _patch(client, tenant, max_pending_tasks=None, weight=None)
    assert resp.json()["quotas"]["max_pending_tasks"] is None
    assert resp.json()["quotas"]["weight"] == 1
    got = await client.get(f"/v1/admin/tenants/{tenant.id}", headers=ADMIN)
    assert got.json()["quotas"]["max_schedules"] == 2


async def test_bad_quota_values_are_422_naming_the_field(
    client: httpx.AsyncClient, tenant: TenantKey
) -> None:
    for body, field in [
        ({"max_pending_tasks": -1}, "max_pending_tasks"),
        ({"max_creates_per_second": 0}, "max_creates_per_second"),
        ({"weight": 0}, "weight"),
        ({"weight": "3"}, "weight"),
        ({"max_tasks": 3}, "max_tasks"),
    ]:
        assert_problem(await _patch(client, tenant, **body), 422, field)
    assert_problem(await _patch(client, TenantKey("nope", "k", "x"), weight=2), 404)
    # Tenants cannot manage quotas: the admin token is needed.
    resp = await client.patch(
        f"/v1/admin/tenants/{tenant.id}", json={"weight": 9}, headers=tenant.headers
    )
    assert_problem(resp, 401)


async def test_max_pending_tasks_refuses_creates_over_it(
    client: httpx.AsyncClient, tenant: TenantKey
) -> None:
    await _patch(client, tenant, max_pending_tasks=3)
    for _ in range(2):
        resp = await client.post("/v1/tasks", json={"target": WORKER}, headers=tenant.headers)
        assert resp.status_code == 201
    batch = {"tasks": [{"target": WORKER}, {"target": WORKER}]}
    resp = await client.post("/v1/tasks/batch", json=batch, headers=tenant.headers)
    body = assert_problem(resp, 429)
    assert body["limit"] == "max_pending_tasks"
    assert int(resp.headers["retry-after"]) >= 1
    listed = await client.get("/v1/tasks", headers=tenant.headers)
    assert len(listed.json()["items"]) == 2  # nothing of the refused batch was created
    resp = await client.post("/v1/tasks", json={"target": WORKER}, headers=tenant.headers)
    assert resp.status_code == 201
    resp = await client.post("/v1/tasks", json={"target": WORKER}, headers=tenant.headers)
    assert assert_problem(resp, 429)["limit"] == "max_pending_tasks"
    # Ending a task makes room again.
    first = listed.json()["items"][0]["id"]
    await client.post(f"/v1/tasks/{first}/cancel", headers=tenant.headers)
    resp = await client.post("/v1/tasks", json={"target": WORKER}, headers=tenant.headers)
    assert resp.status_code == 201


async def test_max_creates_per_second_is_a_token_bucket(
    client: httpx.AsyncClient, tenant: TenantKey, clock: FakeClock
) -> None:
    await _patch(client, tenant, max_creates_per_second=2)
    for _ in range(2):
        resp = await client.post("/v1/tasks", json={"target": WORKER}, headers=tenant.headers)
        assert resp.status_code == 201
    resp = await client.post("/v1/tasks", json={"target": WORKER}, headers=tenant.headers)
    assert assert_problem(resp, 429)["limit"] == "max_creates_per_second"
    assert resp.headers["retry-after"] == "1"
    clock.advance(0.5)
    resp = await client.post("/v1/tasks", json={"target": WORKER}, headers=tenant.headers)
    assert resp.status_code == 201
    # Another tenant is not held back.
    other = await make_tenant(client, "other")
    resp = await client.post("/v1/tasks", json={"target": WORKER}, headers=other.headers)
    assert resp.status_code == 201


async def test_max_schedules(client: httpx.AsyncClient, tenant: TenantKey) -> None:
    await _patch(client, tenant, max_schedules=1)
    resp = await client.post("/v1/schedules", json=EVERY_MINUTE, headers=tenant.headers)
    assert resp.status_code == 201, resp.text
    resp = await client.post("/v1/schedules", json=EVERY_MINUTE, headers=tenant.headers)
    assert assert_problem(resp, 429)["limit"] == "max_schedules"
    resp = await client.put(
        "/v1/schedules/by-key/nightly", json=EVERY_MINUTE, headers=tenant.headers
    )
    assert assert_problem(resp, 429)["limit"] == "max_schedules"
    usage = (await client.get(f"/v1/admin/tenants/{tenant.id}", headers=ADMIN)).json()["usage"]
    assert usage == {"pending_tasks": 0, "schedules": 1}


async def test_delete_tenant(client: httpx.AsyncClient, tenant: TenantKey) -> None:
    created = await client.post("/v1/tasks", json={"target": WORKER}, headers=tenant.headers)
    resp = await client.delete(f"/v1/admin/tenants/{tenant.id}", headers=ADMIN)
    assert "1 task" in str(assert_problem(resp, 409)["detail"])
    await client.post(f"/v1/tasks/{created.json()['id']}/cancel", headers=tenant.headers)
    resp = await client.delete(f"/v1/admin/tenants/{tenant.id}", headers=ADMIN)
    assert resp.status_code == 204
    # Its key stops working at once on this node, and it is gone from the list.
    assert_problem(await client.get("/v1/tenant", headers=tenant.headers), 401)
    listed = (await client.get("/v1/admin/tenants", headers=ADMIN)).json()["items"]
    assert tenant.id not in [t["id"] for t in listed]
    assert_problem(await client.delete(f"/v1/admin/tenants/{tenant.id}", headers=ADMIN), 404)
