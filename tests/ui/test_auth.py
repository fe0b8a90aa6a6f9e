"""The dashboard's auth is the API's: a tenant key (login form → HttpOnly, SameSite=Strict
cookie, or a Bearer header), nothing in dev mode; every form post must come from this origin."""

from __future__ import annotations

import httpx
from ui_helpers import SAME_ORIGIN, Tenant, create, get_json, page

VIEWS = (
    "/ui",
    "/ui/queues",
    "/ui/tasks",
    "/ui/dead-letters",
    "/ui/schedules",
    "/ui/workers",
    "/ui/targets",
)


async def test_views_need_a_key_and_send_the_browser_to_login(
    client: httpx.AsyncClient, acme: Tenant
) -> None:
    for path in VIEWS:
        resp = await client.get(path, params={"window": "1h"} if path == "/ui" else None)
        assert resp.status_code == 303, path
        assert resp.headers["location"].startswith("/ui/login?next=%2Fui"), path
        assert (await client.get(path, headers=acme.bearer)).status_code == 200, path
        await page(client, acme, path)
    # htmx's background refresh is sent to the login page as a whole tab, not swapped in a panel.
    refresh = await client.get("/ui/queues", headers={"HX-Request": "true"})
    assert refresh.status_code == 200 and refresh.text == ""
    assert refresh.headers["hx-redirect"] == "/ui/login?next=%2Fui%2Fqueues"
    # A session that ended drops the cookie on the way to the login page.
    resp = await client.get("/ui/tasks", headers={"Cookie": "duetime_ui_session=nope"})
    assert resp.status_code == 303
    assert 'duetime_ui_session=""' in resp.headers["set-cookie"]
    assert "Max-Age=0" in resp.headers["set-cookie"]


async def test_login_sets_a_strict_http_only_cookie(
    client: httpx.AsyncClient, acme: Tenant
) -> None:
    form = await client.get("/ui/login", params={"next": "/ui/tasks?status=failed"})
    assert form.status_code == 200 and 'name="api_key"' in form.text
    assert 'value="/ui/tasks?status=failed"' in form.text

    wrong = await client.post(
        "/ui/login", data={"api_key": "dt_wrong", "next": "/ui/tasks"}, headers=SAME_ORIGIN
    )
    assert wrong.status_code == 401 and "unknown or deleted API key" in wrong.text
    assert "set-cookie" not in wrong.headers

    ok = await client.post(
        "/ui/login",
        data={"api_key": acme.api_key, "next": "/ui/tasks?status=failed"},
        headers=SAME_ORIGIN,
    )
    assert ok.status_code == 303 and ok.headers["location"] == "/ui/tasks?status=failed"
    cookie = ok.headers["set-cookie"]
    assert cookie.startswith("duetime_ui_session=") and acme.api_key not in cookie
    for attribute in ("HttpOnly", "Path=/ui", "SameSite=strict"):
        assert attribute in cookie
    assert "Secure" not in cookie  # plain http: a Secure cookie would never come back

    # A login can never send the browser off-site.
    for evil in ("https://evil.example/", "//evil.example/ui", "/v1/tasks", "/ui\\@evil"):
        resp = await client.post(
            "/ui/login", data={"api_key": acme.api_key, "next": evil}, headers=SAME_ORIGIN
        )
        assert resp.headers["location"] == "/ui", evil

    out = await client.post("/ui/logout", headers={**acme.cookie, **SAME_ORIGIN})
    assert out.status_code == 303 and "Max-Age=0" in out.headers["set-cookie"]


async def test_dev_mode_needs_no_login(dev_client: httpx.AsyncClient) -> None:
    for path in VIEWS:
        resp = await dev_client.get(path)
        assert resp.status_code == 200, path
        assert "dev mode" in resp.text
    assert (await dev_client.get("/ui/login")).status_code == 303


async def test_form_posts_from_another_origin_are_refused(
    client: httpx.AsyncClient, dev_client: httpx.AsyncClient, acme: Tenant
) -> None:
    task = await create(client, acme)
    path = f"/ui/tasks/{task['id']}/cancel"
    for headers in (
        {},  # neither Origin nor Referer
        {"Origin": "https://evil.example"},
        {"Origin": "null"},
        {"Referer": "https://evil.example/ui/tasks"},
        {"Origin": "http://127.0.0.1:8080.evil.example"},
    ):
        resp = await client.post(path, headers={**acme.cookie, **headers})
        assert resp.status_code == 403, headers
        assert "not posted from this dashboard" in resp.text
    # Dev mode has no cookie to withhold: the Origin check is what stops a cross-site post.
    resp = await dev_client.post(path, headers={"Origin": "https://evil.example"})
    assert resp.status_code == 403
    assert (await get_json(client, acme, f"/v1/tasks/{task['id']}"))["status"] == "ready"
    # The same post from the dashboard's own page works (Referer alone is enough too).
    referer = {"Referer": "http://127.0.0.1:8080/ui/tasks"}
    resp = await client.post(path, headers={**acme.cookie, **referer})
    assert resp.status_code == 303
    assert (await get_json(client, acme, f"/v1/tasks/{task['id']}"))["status"] == "cancelled"


async def test_pages_carry_security_headers_and_stay_out_of_openapi(
    client: httpx.AsyncClient, acme: Tenant
) -> None:
    resp = await client.get("/ui/tasks", headers=acme.cookie)
    csp = resp.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
    assert resp.headers["cache-control"] == "no-store"
    assert resp.headers["x-content-type-options"] == "nosniff"
    paths = (await client.get("/openapi.json")).json()["paths"]
    assert not [p for p in paths if p.startswith("/ui")]


async def test_static_files_come_from_the_package(client: httpx.AsyncClient) -> None:
    js = await client.get("/ui/static/htmx.min.js")
    assert js.status_code == 200 and js.headers["content-type"].startswith("text/javascript")
    assert b"htmx" in js.content[:200]
    css = await client.get("/ui/static/style.css")
    assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")
    assert (await client.get("/ui/static/../app.py")).status_code == 404
    assert (await client.get("/ui/static/nope.js")).status_code == 404
