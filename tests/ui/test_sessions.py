"""Dashboard sessions: the cookie is a random session id (never the key or the admin token),
kept hashed in the store, ended by logout, by the admin, by idle time and by age."""

from __future__ import annotations

import hashlib

import httpx
import pytest
from ui_helpers import ADMIN_TOKEN, BASE, SAME_ORIGIN, Admin, Tenant, login, make_tenant

from duetime.api.app import create_app
from duetime.clock import FakeClock
from duetime.config import Settings
from duetime.store import Store

ADMIN_BEARER = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


async def _works(client: httpx.AsyncClient, cookie: dict[str, str]) -> bool:
    resp = await client.get("/ui/tasks", headers=cookie)
    if resp.status_code == 303:
        assert resp.headers["location"].startswith("/ui/login"), resp.headers["location"]
        return False
    assert resp.status_code == 200, resp.text[:300]
    return True


async def test_the_cookie_holds_a_session_id_never_the_credential(
    client: httpx.AsyncClient, store: Store, acme: Tenant, admin: Admin
) -> None:
    for session, credential in ((acme.session, acme.api_key), (admin.session, ADMIN_TOKEN)):
        assert session != credential and credential not in session
        assert len(session) >= 40  # 32 random bytes
        # The store knows only its hash, with who logged in.
        found = await store.ui_session_use(hashlib.sha256(session.encode()).hexdigest(), 60)
        assert found is not None
    found = await store.ui_session_use(hashlib.sha256(acme.session.encode()).hexdigest(), 60)
    assert found is not None and found.tenant_id == acme.id and found.key_id
    # The key itself is no session: a cookie holding it is refused.
    assert not await _works(client, {"Cookie": f"duetime_ui_session={acme.api_key}"})
    assert not await _works(client, {"Cookie": f"duetime_ui_key={acme.api_key}"})
    # Two logins are two sessions.
    assert await login(client, acme.api_key) != acme.session


async def test_after_logout_the_old_cookie_no_longer_works(
    client: httpx.AsyncClient, acme: Tenant
) -> None:
    other = {"Cookie": f"duetime_ui_session={await login(client, acme.api_key)}"}
    assert await _works(client, acme.cookie)
    out = await client.post("/ui/logout", headers={**acme.cookie, **SAME_ORIGIN})
    assert out.status_code == 303
    assert 'duetime_ui_session=""' in out.headers["set-cookie"]
    # A copy of the cookie kept anywhere (another tab, a stolen copy) is dead server side.
    assert not await _works(client, acme.cookie)
    assert await _works(client, other)  # the same key's other session lives on


async def test_admin_revocation_ends_sessions(
    client: httpx.AsyncClient, acme: Tenant, admin: Admin
) -> None:
    globex = await make_tenant(client, "globex")
    acme_again = {"Cookie": f"duetime_ui_session={await login(client, acme.api_key)}"}
    revoked = await client.post(
        "/v1/admin/sessions/revoke", json={"tenant_id": acme.id}, headers=ADMIN_BEARER
    )
    assert revoked.status_code == 200 and revoked.json() == {"revoked": 2}
    assert not await _works(client, acme.cookie)
    assert not await _works(client, acme_again)
    assert await _works(client, globex.cookie)
    assert await _works(client, admin.viewing(acme.id).cookie)

    everything = await client.post("/v1/admin/sessions/revoke", headers=ADMIN_BEARER)
    assert everything.status_code == 200 and everything.json() == {"revoked": 2}
    assert not await _works(client, globex.cookie)
    assert not await _works(client, admin.viewing(acme.id).cookie)
    # The API keys themselves still work: revocation is of sessions.
    assert (await client.get("/v1/tasks", headers=acme.bearer)).status_code == 200

    unknown = await client.post(
        "/v1/admin/sessions/revoke", json={"tenant_id": "nope"}, headers=ADMIN_BEARER
    )
    assert unknown.status_code == 404
    bad = await client.post(
        "/v1/admin/sessions/revoke", json={"tenant": acme.id}, headers=ADMIN_BEARER
    )
    assert bad.status_code == 422 and "tenant" in bad.text
    denied = await client.post("/v1/admin/sessions/revoke", headers=acme.bearer)
    assert denied.status_code == 401


async def test_deleting_the_key_ends_its_sessions(client: httpx.AsyncClient, acme: Tenant) -> None:
    made = await client.post(f"/v1/admin/tenants/{acme.id}/keys", headers=ADMIN_BEARER)
    second = made.json()
    session = {"Cookie": f"duetime_ui_session={await login(client, second['api_key'])}"}
    assert await _works(client, session)
    deleted = await client.delete(f"/v1/admin/keys/{second['id']}", headers=ADMIN_BEARER)
    assert deleted.status_code == 204
    assert not await _works(client, session)
    assert await _works(client, acme.cookie)


async def test_sessions_expire_when_idle_and_at_their_absolute_limit(
    store: Store, clock: FakeClock
) -> None:
    settings = Settings(
        admin_token=ADMIN_TOKEN, ui_session_idle_seconds=600, ui_session_seconds=3600
    )
    app = create_app(settings, store)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE) as client:
        acme = await make_tenant(client, "acme")
        idle = {"Cookie": f"duetime_ui_session={await login(client, acme.api_key)}"}
        clock.advance(599)
        assert await _works(client, acme.cookie)  # used: its idle time starts again
        clock.advance(2)
        assert not await _works(client, idle)  # 601 s unused
        for _ in range(5):  # used every 9 minutes, but no longer than an hour in all
            clock.advance(540)
            assert await _works(client, acme.cookie)
        clock.advance(540)
        assert not await _works(client, acme.cookie)
        # The cookie's own lifetime says the same limit to the browser.
        resp = await client.post(
            "/ui/login", data={"api_key": acme.api_key, "next": "/ui"}, headers=SAME_ORIGIN
        )
        assert "Max-Age=3600" in resp.headers["set-cookie"]


@pytest.mark.parametrize(
    "told", [{"behind_tls": True}, {"public_url": "https://duetime.example.com"}]
)
async def test_cookies_are_secure_when_the_node_is_behind_tls(
    store: Store, told: dict[str, object]
) -> None:
    app = create_app(Settings(admin_token=ADMIN_TOKEN, **told), store)  # type: ignore[arg-type]
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE) as client:
        acme = await make_tenant(client, "acme")
        # The request reached the node as plain http (a proxy terminated TLS): still Secure.
        resp = await client.post(
            "/ui/login", data={"api_key": acme.api_key, "next": "/ui"}, headers=SAME_ORIGIN
        )
        cookie = resp.headers["set-cookie"]
        for attribute in ("Secure", "HttpOnly", "SameSite=strict", "Path=/ui"):
            assert attribute in cookie
