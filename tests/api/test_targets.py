"""``GET /v1/targets``: the tenant's circuits, as the dispatchers recorded them."""

from __future__ import annotations

from datetime import timedelta

import httpx
from api_helpers import TenantKey, assert_problem, make_tenant

from duetime.clock import FakeClock
from duetime.store import Store
from duetime.types import TargetCircuit


async def test_targets_lists_the_tenants_circuits_only(
    client: httpx.AsyncClient, tenant: TenantKey, store: Store, clock: FakeClock
) -> None:
    other = await make_tenant(client, "other")
    resp = await client.get("/v1/targets", headers=tenant.headers)
    assert resp.status_code == 200 and resp.json() == {"items": []}
    until = clock.now() + timedelta(seconds=5)
    await store.circuit_put(
        TargetCircuit(tenant.id, "https://a.example:443", "open", 5, 5.0, until, clock.now())
    )
    [item] = (await client.get("/v1/targets", headers=tenant.headers)).json()["items"]
    assert item["origin"] == "https://a.example:443"
    assert (item["state"], item["failures"], item["opened"]) == ("open", 5, 1)
    assert item["cooldown_seconds"] == 5.0 and item["open_until"] is not None
    assert (await client.get("/v1/targets", headers=other.headers)).json() == {"items": []}
    assert_problem(await client.get("/v1/targets"), 401)
