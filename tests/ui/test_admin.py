"""The admin token opens the dashboard for every tenant, one at a time: it lists the tenants
with their usage and quotas, keeps the picked tenant in a strict cookie, shows that tenant in
every view, and its changes are recorded as made by ``admin``. A tenant key's session can never
switch tenants, and dev mode has no admin."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest
from ui_helpers import (
    ADMIN_TOKEN,
    SAME_ORIGIN,
    Admin,
    Tenant,
    create,
    dead_letter,
    flash,
    get_json,
    make_tenant,
    page,
    post_form,
)

from duetime.api.ui import views_admin

VIEWS = (
    "/ui",
    "/ui/queues",
    "/ui/tasks",
    "/ui/dead-letters",
    "/ui/schedules",
    "/ui/workers",
    "/ui/targets",
)
ADMIN_BEARER = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
SCHEDULE = {
    "cron": "0 3 * * *",
    "timezone": "UTC",
    "task": {"name": "nightly", "queue": "reports", "target": {"type": "worker"}},
}


async def _history(
    client: httpx.AsyncClient, tenant: Tenant, **params: str
) -> list[dict[str, Any]]:
    resp = await client.get("/v1/history", params=params, headers=tenant.bearer)
    assert resp.status_code == 200, resp.text
    items: list[dict[str, Any]] = resp.json()["items"]
    return items


async def _actor_of(client: httpx.AsyncClient, tenant: Tenant, task_id: str, to: str) -> str:
    """Who moved the task to status ``to`` (its newest such record)."""
    events = await _history(client, tenant, task_id=task_id, kind="task")
    return next(e["actor"] for e in events if e["to_status"] == to)


async def test_admin_login_lists_tenants_and_views_the_picked_one(
    client: httpx.AsyncClient, acme: Tenant, globex: Tenant
) -> None:
    quotas = {"max_pending_tasks": 10, "max_schedules": 1, "weight": 3}
    patched = await client.patch(f"/v1/admin/tenants/{acme.id}", json=quotas, headers=ADMIN_BEARER)
    assert patched.status_code == 200, patched.text
    acme_tasks = [(await create(client, acme, queue="acme-q"))["id"] for _ in range(2)]
    globex_task = (await create(client, globex, queue="globex-q"))["id"]
    made = await client.post("/v1/schedules", json=SCHEDULE, headers=acme.bearer)
    assert made.status_code == 201, made.text

    # The login form takes the admin token like a key, into the same strict cookie.
    ok = await client.post(
        "/ui/login", data={"api_key": ADMIN_TOKEN, "next": "/ui/tasks"}, headers=SAME_ORIGIN
    )
    assert ok.status_code == 303 and ok.headers["location"] == "/ui/tasks"
    cookie = ok.headers["set-cookie"]
    assert cookie.startswith("duetime_ui_session=") and ADMIN_TOKEN not in cookie
    for attribute in ("HttpOnly", "Path=/ui", "SameSite=strict"):
        assert attribute in cookie

    # No tenant picked yet: every view sends the admin to the Tenants page, then back.
    admin = Admin(ok.cookies["duetime_ui_session"])
    for path in VIEWS:
        resp = await client.get(path, headers=admin.cookie)
        assert resp.status_code == 303, path
        assert resp.headers["location"].startswith("/ui/tenants?next=%2Fui"), path
    resp = await client.get("/ui/tasks?status=ready", headers=admin.cookie)
    assert resp.headers["location"] == "/ui/tenants?next=%2Fui%2Ftasks%3Fstatus%3Dready"

    tenants = await page(client, admin, "/ui/tenants?next=/ui/tasks")
    assert "no tenant picked" in tenants and 'href="/ui/tenants"' in tenants
    assert 'href="/ui/tasks"' not in tenants  # nothing to show before a tenant is picked
    rows = re.findall(r"<tr(?: class=\"current\")?>\s*<td><b>([^<]+)</b>.*?</tr>", tenants, re.S)
    assert rows == ["acme", "globex"]  # oldest first
    acme_row = re.search(r"<td><b>acme</b>.*?</tr>", tenants, re.S)
    assert acme_row is not None
    row = acme_row.group(0)
    assert acme.id in row and "<time datetime=" in row  # its id, when it was created
    assert '2 <span class="muted">/ 10</span>' in row  # pending tasks against the quota
    assert 'class="num full"' in row  # 1 schedule of 1 allowed: at its quota
    assert '<td class="num">3</td>' in row  # weight
    assert tenants.count('name="next" value="/ui/tasks"') == 2

    # Pick acme: a strict cookie like the key's, and back to the page asked for.
    picked = await post_form(
        client, admin, "/ui/tenants/select", {"tenant_id": acme.id, "next": "/ui/tasks"}
    )
    assert picked.status_code == 303 and picked.headers["location"] == "/ui/tasks"
    tenant_cookie = next(
        c for c in picked.headers.get_list("set-cookie") if c.startswith("duetime_ui_tenant=")
    )
    assert tenant_cookie.startswith(f"duetime_ui_tenant={acme.id};")
    for attribute in ("HttpOnly", "Path=/ui", "SameSite=strict"):
        assert attribute in tenant_cookie
    assert flash(picked) == "viewing tenant acme"

    as_acme = admin.viewing(acme.id)
    for path in VIEWS:
        html = await page(client, as_acme, path)
        assert f'viewing <b title="{acme.id}">acme</b>' in html, path
        assert 'href="/ui/tenants"' in html, path
        assert "globex-q" not in html, path
    tasks = await page(client, as_acme, "/ui/tasks")
    assert all(t in tasks for t in acme_tasks) and globex_task not in tasks
    listed = await page(client, as_acme, "/ui/tenants")
    assert re.search(r'<tr class="current">\s*<td><b>acme</b>', listed)

    # Switch to globex: the same pages now show globex's work.
    await post_form(client, as_acme, "/ui/tenants/select", {"tenant_id": globex.id})
    as_globex = admin.viewing(globex.id)
    tasks = await page(client, as_globex, "/ui/tasks")
    assert globex_task in tasks and not any(t in tasks for t in acme_tasks)
    assert "acme-q" not in await page(client, as_globex, "/ui/queues")

    # A script may send the token as a Bearer header, with the tenant cookie.
    scripted = await client.get(
        "/ui/tasks", headers={**ADMIN_BEARER, "Cookie": f"duetime_ui_tenant={acme.id}"}
    )
    assert scripted.status_code == 200 and acme_tasks[0] in scripted.text


async def test_tenants_are_paged(
    client: httpx.AsyncClient,
    admin: Admin,
    acme: Tenant,
    globex: Tenant,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(views_admin, "PAGE_SIZE", 1)
    first = await page(client, admin, "/ui/tenants?next=/ui/queues")
    assert acme.id in first and globex.id not in first
    next_url = re.search(r'<a class="next" href="([^"]+)"', first)
    assert next_url is not None
    second = await page(client, admin, next_url.group(1).replace("&amp;", "&"))
    # acme's id is still in the page as the cursor its live refresh asks with, not as a row.
    assert f">{globex.id}</td>" in second and f">{acme.id}</td>" not in second
    assert 'class="next"' not in second and "First page" in second
    assert 'name="next" value="/ui/queues"' in second  # where a pick leads, kept across pages


async def test_picking_an_unknown_or_deleted_tenant(
    client: httpx.AsyncClient, admin: Admin, acme: Tenant
) -> None:
    for wanted in ("no-such-tenant", "", "x" * 500, "bad\x01id"):
        resp = await post_form(client, admin, "/ui/tenants/select", {"tenant_id": wanted})
        assert resp.status_code == 303 and resp.headers["location"] == "/ui/tenants", wanted
        assert flash(resp).startswith("!no tenant"), wanted
        cookies = resp.headers.get_list("set-cookie")
        assert not [c for c in cookies if c.startswith("duetime_ui_tenant=")], wanted
    # A form posted from elsewhere never switches.
    resp = await client.post(
        "/ui/tenants/select",
        data={"tenant_id": acme.id},
        headers={**admin.cookie, "Origin": "https://evil.example"},
    )
    assert resp.status_code == 403 and "set-cookie" not in resp.headers

    # The tenant being viewed is deleted: back to the Tenants page, the choice forgotten.
    gone = await make_tenant(client, "short-lived")
    deleted = await client.delete(f"/v1/admin/tenants/{gone.id}", headers=ADMIN_BEARER)
    assert deleted.status_code == 204
    resp = await client.get("/ui/queues", headers=admin.viewing(gone.id).cookie)
    assert resp.status_code == 303 and resp.headers["location"] == "/ui/tenants?next=%2Fui%2Fqueues"
    assert "duetime_ui_tenant=" in resp.headers["set-cookie"]
    assert "no longer exists" in flash(resp)
    # A form post without a tenant does nothing and goes the same way.
    task = await create(client, acme)
    resp = await post_form(client, admin, f"/ui/tasks/{task['id']}/cancel")
    assert resp.status_code == 303 and resp.headers["location"] == "/ui/tenants?next=%2Fui"
    assert (await get_json(client, acme, f"/v1/tasks/{task['id']}"))["status"] == "ready"

    # Logging out forgets the tenant too.
    out = await client.post("/ui/logout", headers={**admin.viewing(acme.id).cookie, **SAME_ORIGIN})
    cookies = out.headers.get_list("set-cookie")
    assert any(c.startswith('duetime_ui_session=""') and "Max-Age=0" in c for c in cookies)
    assert any(c.startswith('duetime_ui_tenant=""') and "Max-Age=0" in c for c in cookies)


async def test_a_tenant_key_can_never_switch_tenants(
    client: httpx.AsyncClient, acme: Tenant, globex: Tenant
) -> None:
    theirs = await create(client, globex, queue="globex-secret")
    mine = await create(client, acme, queue="mine")
    # A tenant cookie naming globex, sent with acme's key (cookie or Bearer), is ignored.
    for headers in (
        {"Cookie": f"duetime_ui_session={acme.session}; duetime_ui_tenant={globex.id}"},
        {**acme.bearer, "Cookie": f"duetime_ui_tenant={globex.id}"},
    ):
        for path in VIEWS:
            resp = await client.get(path, headers=headers)
            assert resp.status_code == 200, path
            assert f'tenant <b title="{acme.id}">acme</b>' in resp.text, path
            assert "globex-secret" not in resp.text and theirs["id"] not in resp.text, path
            assert 'href="/ui/tenants"' not in resp.text, path  # no Tenants link either
        tasks = await client.get("/ui/tasks", headers=headers)
        assert mine["id"] in tasks.text

    # Neither the list of tenants nor the switch is open to a tenant key.
    listed = await page(client, acme, "/ui/tenants", status=403)
    assert "only an admin session" in listed and globex.id not in listed
    resp = await post_form(client, acme, "/ui/tenants/select", {"tenant_id": globex.id})
    assert resp.status_code == 403 and "only an admin session" in resp.text
    assert "duetime_ui_tenant" not in resp.headers.get("set-cookie", "")
    # Actions through a forged tenant cookie stay on the key's tenant: globex's task is
    # invisible to acme, so cancelling it changes nothing.
    forged = {"Cookie": f"duetime_ui_session={acme.session}; duetime_ui_tenant={globex.id}"}
    resp = await client.post(f"/ui/tasks/{theirs['id']}/cancel", headers={**forged, **SAME_ORIGIN})
    assert resp.status_code == 303 and flash(resp).startswith("!")
    assert (await get_json(client, globex, f"/v1/tasks/{theirs['id']}"))["status"] == "ready"


async def test_admin_changes_are_recorded_as_admin(
    client: httpx.AsyncClient, admin: Admin, acme: Tenant
) -> None:
    admin = admin.viewing(acme.id)
    by_admin = await create(client, acme, delay_seconds=3600)
    by_key = await create(client, acme, delay_seconds=3600)
    resp = await post_form(client, admin, f"/ui/tasks/{by_admin['id']}/cancel")
    assert flash(resp) == "task cancelled"
    assert await _actor_of(client, acme, by_admin["id"], "cancelled") == "admin"
    resp = await post_form(client, admin, f"/ui/tasks/{by_admin['id']}/retry")
    assert flash(resp).startswith("task replayed")
    assert await _actor_of(client, acme, by_admin["id"], "ready") == "admin"

    # The key's own session is recorded as the API records that key.
    await post_form(client, acme, f"/ui/tasks/{by_key['id']}/cancel")
    by_api = await create(client, acme, delay_seconds=3600)
    cancelled = await client.post(f"/v1/tasks/{by_api['id']}/cancel", headers=acme.bearer)
    assert cancelled.status_code == 200
    key_actor = await _actor_of(client, acme, by_key["id"], "cancelled")
    assert key_actor.startswith("key:")
    assert key_actor == await _actor_of(client, acme, by_api["id"], "cancelled")

    dead = await dead_letter(client, acme, "crm", "HTTP 500", count=2)
    resp = await post_form(client, admin, "/ui/dead-letters/replay", {"id": dead})
    assert flash(resp) == "replayed 2 task(s)"
    for task_id in dead:
        assert await _actor_of(client, acme, task_id, "ready") == "admin"

    made = await client.post("/v1/schedules", json=SCHEDULE, headers=acme.bearer)
    schedule_id = made.json()["id"]
    resp = await post_form(client, admin, f"/ui/schedules/{schedule_id}/pause", {"note": "x"})
    assert flash(resp) == "schedule paused: x"
    revisions = await get_json(client, acme, f"/v1/schedules/{schedule_id}/revisions")
    newest = revisions["items"][0]
    assert (newest["action"], newest["actor"]) == ("pause", "admin")
    events = await _history(client, acme, schedule_id=schedule_id, kind="schedule")
    assert events[0]["to_status"] == "pause" and events[0]["actor"] == "admin"


async def test_dev_mode_has_no_admin(dev_client: httpx.AsyncClient) -> None:
    html = (await dev_client.get("/ui/targets")).text
    assert 'href="/ui/targets"' in html and 'href="/ui/tenants"' not in html
    resp = await dev_client.get("/ui/tenants")
    assert resp.status_code == 403 and "no admin in dev mode" in resp.text
    resp = await dev_client.post(
        "/ui/tenants/select", data={"tenant_id": "default"}, headers=SAME_ORIGIN
    )
    assert resp.status_code == 403 and "set-cookie" not in resp.headers
    # Any token at all is no admin there: the dashboard is tenant default's.
    resp = await dev_client.get("/ui", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    assert resp.status_code == 200 and 'tenant <b title="default">default</b>' in resp.text
