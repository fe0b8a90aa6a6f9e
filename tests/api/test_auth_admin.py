"""Authentication (API keys, the admin token, dev mode), admin calls, and the tenant calls."""

from __future__ import annotations

from datetime import timedelta

import httpx
import pytest
from api_helpers import ADMIN, TenantKey, assert_problem, case, make_tenant

from duetime.api.app import create_app
from duetime.api.deps import Authenticator
from duetime.auth import API_KEY_PREFIX, SIGNING_SECRET_PREFIX, hash_api_key
from duetime.clock import FakeClock
from duetime.config import Settings
from duetime.errors import ConfigError
from duetime.store import Store

WORKER = {"type": "worker"}


# -- API keys ------------------------------------------------------------------------------------


BAD_AUTH: list[dict[str, str]] = [
    {},
    {"Authorization": "Bearer"},
    {"Authorization": "Bearer dt_nope_nope"},
    {"Authorization": "Basic dXNlcjpwYXNz"},
    {"Authorization": "dt_raw_key_without_scheme"},
    {"Authorization": "Bearer test-admin-token"},  # the admin token is not an API key
]


async def test_missing_or_bad_api_key_is_401(client: httpx.AsyncClient, tenant: TenantKey) -> None:
    calls = [
        ("POST", "/v1/tasks"),
        ("POST", "/v1/tasks/batch"),
        ("GET", "/v1/tasks"),
        ("GET", "/v1/tasks/0190c6f2-0000-7000-8000-000000000000"),
        ("PATCH", "/v1/tasks/0190c6f2-0000-7000-8000-000000000000"),
        ("POST", "/v1/tasks/0190c6f2-0000-7000-8000-000000000000/cancel"),
        ("POST", "/v1/tasks/0190c6f2-0000-7000-8000-000000000000/retry"),
        ("GET", "/v1/tasks/0190c6f2-0000-7000-8000-000000000000/attempts"),
        ("GET", "/v1/tenant"),
        ("POST", "/v1/tenant/signing-secrets/rotate"),
    ]
    for headers in BAD_AUTH:
        for method, path in calls:
            with case((headers, method, path)):
                # The body is invalid for most calls: auth is checked first all the same.
                json = {"target": WORKER} if method != "GET" else None
                resp = await client.request(method, path, json=json, headers=headers)
                assert_problem(resp, 401)
                assert resp.headers["www-authenticate"] == "Bearer"


async def test_bearer_scheme_is_case_insensitive(
    client: httpx.AsyncClient, tenant: TenantKey
) -> None:
    resp = await client.get("/v1/tasks", headers={"Authorization": f"bearer {tenant.api_key}"})
    assert resp.status_code == 200


async def test_deleted_key_stops_working_at_once_here(
    client: httpx.AsyncClient, tenant: TenantKey
) -> None:
    assert (await client.get("/v1/tasks", headers=tenant.headers)).status_code == 200
    resp = await client.delete(f"/v1/admin/keys/{tenant.key_id}", headers=ADMIN)
    assert resp.status_code == 204 and resp.content == b""
    assert_problem(await client.get("/v1/tasks", headers=tenant.headers), 401)
    assert_problem(await client.delete(f"/v1/admin/keys/{tenant.key_id}", headers=ADMIN), 404)


async def test_key_deleted_elsewhere_stops_within_the_cache_ttl(
    settings: Settings, store: Store
) -> None:
    """A key deleted through another node (here: straight in the store) keeps working only until
    this node's auth cache entry expires."""
    app = create_app(settings, store)
    auth: Authenticator = app.state.services.auth
    now = [100.0]
    auth.cache.monotonic = lambda: now[0]
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
        tenant = await make_tenant(c, "t")
        assert (await c.get("/v1/tasks", headers=tenant.headers)).status_code == 200
        assert await store.api_key_delete(tenant.key_id)
        now[0] += auth.cache.ttl - 0.5
        assert (await c.get("/v1/tasks", headers=tenant.headers)).status_code == 200  # cached
        now[0] += 1.0
        assert_problem(await c.get("/v1/tasks", headers=tenant.headers), 401)


async def test_unknown_key_is_cached_but_new_keys_work(
    client: httpx.AsyncClient, tenant: TenantKey
) -> None:
    bad = {"Authorization": "Bearer dt_0000_nope"}
    assert_problem(await client.get("/v1/tasks", headers=bad), 401)
    assert_problem(await client.get("/v1/tasks", headers=bad), 401)
    resp = await client.post(f"/v1/admin/tenants/{tenant.id}/keys", headers=ADMIN)
    assert resp.status_code == 201
    second = {"Authorization": f"Bearer {resp.json()['api_key']}"}
    assert (await client.get("/v1/tasks", headers=second)).status_code == 200


async def test_auth_cache_is_bounded() -> None:
    from duetime.api.deps import AuthCache

    cache = AuthCache(ttl=5, max_entries=3, monotonic=lambda: 0.0)
    for i in range(5):
        cache.put(f"h{i}", f"t{i}", f"k{i}")
    assert cache.get("h0") == (False, None)
    assert cache.get("h4") == (True, "t4")
    cache.evict_key("k4")
    assert cache.get("h4") == (False, None)


# -- admin ---------------------------------------------------------------------------------------


async def test_admin_creates_tenants_and_keys(client: httpx.AsyncClient, store: Store) -> None:
    resp = await client.post("/v1/admin/tenants", json={"name": "Acme Inc"}, headers=ADMIN)
    assert resp.status_code == 201
    created = resp.json()
    assert created["name"] == "Acme Inc"
    assert created["api_key"].startswith(f"{API_KEY_PREFIX}{created['key_id']}_")
    stored = await store.api_key_get_by_hash(hash_api_key(created["api_key"]))
    assert stored is not None and stored.tenant_id == created["id"]

    resp = await client.post(f"/v1/admin/tenants/{created['id']}/keys", headers=ADMIN)
    assert resp.status_code == 201
    key = resp.json()
    assert key["tenant_id"] == created["id"]
    assert key["api_key"].startswith(f"{API_KEY_PREFIX}{key['id']}_")
    assert key["created_at"].endswith("Z")
    for api_key in (created["api_key"], key["api_key"]):
        me = await client.get("/v1/tenant", headers={"Authorization": f"Bearer {api_key}"})
        assert me.json()["id"] == created["id"]


async def test_admin_errors(client: httpx.AsyncClient) -> None:
    assert_problem(await client.post("/v1/admin/tenants/none-such/keys", headers=ADMIN), 404)
    assert_problem(await client.delete("/v1/admin/keys/none-such", headers=ADMIN), 404)
    for body, field in [({}, "name"), ({"name": ""}, "name"), ({"name": "a", "x": 1}, "x")]:
        resp = await client.post("/v1/admin/tenants", json=body, headers=ADMIN)
        assert_problem(resp, 422, field)


async def test_admin_calls_need_the_admin_token(
    client: httpx.AsyncClient, tenant: TenantKey
) -> None:
    bad: list[dict[str, str]] = [
        {},
        {"Authorization": "Bearer wrong-token"},
        {"Authorization": "Bearer test-admin-tokeN"},
        {"Authorization": "Basic test-admin-token"},
    ]
    for headers in bad:
        with case(headers):
            resp = await client.post("/v1/admin/tenants", json={"name": "x"}, headers=headers)
            assert_problem(resp, 401)
            resp = await client.post("/v1/admin/tenants", json={"bad": 1}, headers=headers)
            assert_problem(resp, 401)
            resp = await client.post(f"/v1/admin/tenants/{tenant.id}/keys", headers=headers)
            assert_problem(resp, 401)
            resp = await client.delete(f"/v1/admin/keys/{tenant.key_id}", headers=headers)
            assert_problem(resp, 401)
    # A tenant's own API key is not the admin token either.
    resp = await client.post("/v1/admin/tenants", json={"name": "x"}, headers=tenant.headers)
    assert_problem(resp, 401)
    assert (await client.get("/v1/tasks", headers=tenant.headers)).status_code == 200


# -- tenant ----------------------------------------------------------------------------------------


async def test_tenant_and_signing_secret_rotation(
    client: httpx.AsyncClient, tenant: TenantKey, clock: FakeClock
) -> None:
    me = (await client.get("/v1/tenant", headers=tenant.headers)).json()
    assert me["id"] == tenant.id and me["name"] == "acme"
    (first,) = me["signing_secrets"]
    assert first["secret"].startswith(SIGNING_SECRET_PREFIX)
    assert first["expires_at"] is None

    resp = await client.post(
        "/v1/tenant/signing-secrets/rotate", json={"overlap_seconds": 60}, headers=tenant.headers
    )
    assert resp.status_code == 200, resp.text
    secrets = resp.json()["signing_secrets"]
    old, new = secrets
    assert old["id"] == first["id"]
    assert old["expires_at"] == (clock.now() + timedelta(seconds=60)).isoformat().replace(
        "+00:00", "Z"
    )
    assert new["expires_at"] is None and new["secret"] != first["secret"]
    clock.advance(61)
    after = (await client.get("/v1/tenant", headers=tenant.headers)).json()["signing_secrets"]
    assert [s["id"] for s in after] == [new["id"]]


async def test_rotation_defaults_and_validation(
    client: httpx.AsyncClient, tenant: TenantKey, clock: FakeClock
) -> None:
    path = "/v1/tenant/signing-secrets/rotate"
    resp = await client.post(path, headers=tenant.headers)  # no body: default overlap, one day
    assert resp.status_code == 200, resp.text
    old = resp.json()["signing_secrets"][0]
    assert old["expires_at"] == "2030-01-02T00:00:00Z"
    assert (await client.post(path, json={}, headers=tenant.headers)).status_code == 200
    for body, field in [
        ({"overlap_seconds": -1}, "overlap_seconds"),
        ({"overlap_seconds": "1"}, "overlap_seconds"),
        ({"overlap": 1}, "overlap"),
    ]:
        assert_problem(await client.post(path, json=body, headers=tenant.headers), 422, field)


# -- dev mode --------------------------------------------------------------------------------------


async def test_dev_mode_acts_as_default_tenant(store: Store) -> None:
    dev = Settings(admin_token=None)
    assert dev.dev_mode
    app = create_app(dev, store)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1"
    ) as c:
        me = await c.get("/v1/tenant")
        assert me.status_code == 200, me.text
        assert me.json()["id"] == "default"
        created = await c.post("/v1/tasks", json={"target": WORKER})
        assert created.status_code == 201
        task = await store.task_get("default", created.json()["id"])
        assert task is not None
        # Any key (or none) is fine.
        other = await c.get("/v1/tasks", headers={"Authorization": "Bearer whatever"})
        assert [t["id"] for t in other.json()["items"]] == [created.json()["id"]]
        # Admin calls are refused: a tenant or key made here would act as `default`.
        refused = await c.post("/v1/admin/tenants", json={"name": "second"})
        problem = assert_problem(refused, 403)
        assert "dev mode" in str(problem["detail"]) and "DUETIME_ADMIN_TOKEN" in str(
            problem["detail"]
        )
        assert_problem(await c.post("/v1/admin/tenants/default/keys", json={}), 403)
    # A second app (another node) finds the tenant already there.
    again = create_app(dev, store)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=again), base_url="http://127.0.0.1"
    ) as c:
        assert (await c.get("/v1/tasks")).json()["items"][0]["id"] == created.json()["id"]


def test_dev_mode_is_refused_on_a_public_bind() -> None:
    with pytest.raises(ConfigError, match="dev mode"):
        Settings(admin_token=None, host="0.0.0.0").check()
    assert Settings(admin_token=None, host="127.0.0.1").check().dev_mode
    assert not Settings(admin_token="t" * 32, host="0.0.0.0").check().dev_mode


async def test_live_signing_secrets_are_capped(
    client: httpx.AsyncClient, tenant: TenantKey, clock: FakeClock
) -> None:
    """At most 3 live secrets: a fourth rotation with an overlap is a 409 that says when the
    oldest expires; overlap 0 still works and leaves the new secret alone."""
    path = "/v1/tenant/signing-secrets/rotate"
    for _ in range(2):
        resp = await client.post(path, json={"overlap_seconds": 600}, headers=tenant.headers)
        assert resp.status_code == 200, resp.text
    assert len(resp.json()["signing_secrets"]) == 3
    refused = await client.post(path, json={"overlap_seconds": 600}, headers=tenant.headers)
    body = assert_problem(refused, 409)
    assert "overlap_seconds 0" in str(body["detail"]) and "2030-01-01T00:10:00" in str(
        body["detail"]
    )
    me = (await client.get("/v1/tenant", headers=tenant.headers)).json()
    assert len(me["signing_secrets"]) == 3
    clock.advance(601)  # the older ones expire: rotating with an overlap works again
    resp = await client.post(path, json={"overlap_seconds": 600}, headers=tenant.headers)
    assert resp.status_code == 200, resp.text
    assert len(resp.json()["signing_secrets"]) == 2
    resp = await client.post(path, json={"overlap_seconds": 600}, headers=tenant.headers)
    assert resp.status_code == 200
    resp = await client.post(path, json={"overlap_seconds": 0}, headers=tenant.headers)
    assert resp.status_code == 200, resp.text
    assert len(resp.json()["signing_secrets"]) == 1
