"""Durable notifications at their causes: a dead letter and a refusal over a quota each leave
one event in the store (in the transaction of the dead letter; in one of its own for the
refusal, at most once per quota and period on a node), only for tenants that asked for it."""

from __future__ import annotations

import httpx
from api_helpers import ADMIN, TenantKey, make_tenant
from fastapi import FastAPI
from lease_helpers import WORKER, create, lease

from duetime.store import Store

HOOK = {"type": "http", "url": "http://127.0.0.1:9/notify"}


async def _ask(client: httpx.AsyncClient, tenant: TenantKey, *events: str) -> None:
    resp = await client.put(
        "/v1/tenant/notifications",
        json={"events": list(events), "target": HOOK},
        headers=tenant.headers,
    )
    assert resp.status_code == 200, resp.text


async def test_a_dead_letter_is_an_event_of_the_tenant_that_asked(
    client: httpx.AsyncClient, tenant: TenantKey, store: Store
) -> None:
    await _ask(client, tenant, "task.dead_lettered")
    quiet = await make_tenant(client, "quiet")
    client.headers.update(tenant.headers)
    await create(client, name="doomed", retry={"max_attempts": 1})
    await create(client, name="fine")
    for held in await lease(client, max_tasks=10):
        if held["task"]["name"] == "doomed":
            body = {"error": "broken", "retryable": False}
            await client.post(f"/v1/leases/{held['lease_id']}/fail", json=body)
        else:
            await client.post(f"/v1/leases/{held['lease_id']}/complete", json={})
    assert await store.notification_events_count() == 1
    client.headers.update(quiet.headers)
    await create(client, name="doomed")
    (held,) = await lease(client)
    body = {"error": "broken", "retryable": False}
    await client.post(f"/v1/leases/{held['lease_id']}/fail", json=body)
    assert await store.notification_events_count() == 1  # the quiet tenant asked for nothing


async def test_a_quota_refusal_is_an_event_at_most_once_a_period(
    client: httpx.AsyncClient, tenant: TenantKey, store: Store, app: FastAPI
) -> None:
    await _ask(client, tenant, "tenant.quota_reached")
    limited = await client.patch(
        f"/v1/admin/tenants/{tenant.id}", json={"max_pending_tasks": 1}, headers=ADMIN
    )
    assert limited.status_code == 200
    client.headers.update(tenant.headers)
    await create(client)
    for _ in range(5):
        refused = await client.post("/v1/tasks", json={"target": WORKER})
        assert refused.status_code == 429
    assert await store.notification_events_count() == 1
