"""Helpers of the dashboard's HTML tests (imported as ``ui_helpers``: pytest puts this directory
on ``sys.path``, and the unusual name cannot collide with another test directory's module)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import unquote

import httpx

ADMIN_TOKEN = "ui-test-admin-token"
BASE = "http://127.0.0.1:8080"
SAME_ORIGIN = {"Origin": BASE}
WORKER = {"type": "worker"}


@dataclass(frozen=True)
class Tenant:
    id: str
    name: str
    api_key: str
    session: str
    """The id of a dashboard session logged in with ``api_key``."""

    @property
    def bearer(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"}

    @property
    def cookie(self) -> dict[str, str]:
        """What the browser sends to /ui/* once logged in."""
        return {"Cookie": f"duetime_ui_session={self.session}"}


@dataclass(frozen=True)
class Admin:
    """An admin session (logged in with the admin token), viewing ``tenant_id`` when set."""

    session: str
    tenant_id: str | None = None

    def viewing(self, tenant_id: str) -> Admin:
        """The same session with ``tenant_id`` picked on the Tenants page."""
        return replace(self, tenant_id=tenant_id)

    @property
    def cookie(self) -> dict[str, str]:
        cookie = f"duetime_ui_session={self.session}"
        if self.tenant_id is not None:
            cookie += f"; duetime_ui_tenant={self.tenant_id}"
        return {"Cookie": cookie}


Session = Tenant | Admin
"""Who a dashboard request comes from: a tenant key's session or an admin's."""


async def make_tenant(client: httpx.AsyncClient, name: str) -> Tenant:
    resp = await client.post(
        "/v1/admin/tenants", json={"name": name}, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}
    )
    assert resp.status_code == 201, resp.text
    body = resp.json()
    session = await login(client, body["api_key"])
    return Tenant(id=body["id"], name=name, api_key=body["api_key"], session=session)


async def login(client: httpx.AsyncClient, credential: str) -> str:
    """Log in to the dashboard with an API key or the admin token; the session's id."""
    resp = await client.post(
        "/ui/login", data={"api_key": credential, "next": "/ui"}, headers=SAME_ORIGIN
    )
    assert resp.status_code == 303, resp.text
    session = resp.cookies.get("duetime_ui_session")
    assert session, resp.headers.get("set-cookie")
    client.cookies.clear()  # each test sends the session it means, as a header
    return session


async def admin_login(client: httpx.AsyncClient) -> Admin:
    """A new admin session, viewing no tenant yet."""
    return Admin(await login(client, ADMIN_TOKEN))


async def create(client: httpx.AsyncClient, tenant: Tenant, **fields: Any) -> dict[str, Any]:
    """A task made through the JSON API (a ``worker`` task unless ``target`` says otherwise)."""
    fields.setdefault("target", WORKER)
    resp = await client.post("/v1/tasks", json=fields, headers=tenant.bearer)
    assert resp.status_code == 201, resp.text
    return dict(resp.json())


async def dead_letter(
    client: httpx.AsyncClient, tenant: Tenant, queue: str, error: str, count: int = 1
) -> list[str]:
    """``count`` tasks of ``queue`` failed for good with ``error`` (leased and failed through
    the pull-worker API, as a worker would)."""
    ids = [(await create(client, tenant, queue=queue, name="job"))["id"] for _ in range(count)]
    resp = await client.post(
        f"/v1/queues/{queue}/lease",
        json={"max_tasks": count, "wait_seconds": 0, "worker_id": "w-1"},
        headers=tenant.bearer,
    )
    assert resp.status_code == 200, resp.text
    leases = resp.json()["leases"]
    assert sorted(lease["task"]["id"] for lease in leases) == sorted(ids)
    for lease in leases:
        failed = await client.post(
            f"/v1/leases/{lease['lease_id']}/fail",
            json={"error": error, "retryable": False},
            headers=tenant.bearer,
        )
        assert failed.status_code == 200, failed.text
    return ids


async def get_json(client: httpx.AsyncClient, tenant: Tenant, path: str) -> dict[str, Any]:
    resp = await client.get(path, headers=tenant.bearer)
    assert resp.status_code == 200, resp.text
    return dict(resp.json())


async def page(client: httpx.AsyncClient, tenant: Session, path: str, status: int = 200) -> str:
    """A dashboard page's HTML, fetched with the login cookie."""
    resp = await client.get(path, headers=tenant.cookie)
    assert resp.status_code == status, f"{path}: {resp.status_code} {resp.text[:500]}"
    assert resp.headers["content-type"].startswith("text/html")
    return resp.text


async def post_form(
    client: httpx.AsyncClient, tenant: Session, path: str, data: dict[str, Any] | None = None
) -> httpx.Response:
    """A same-origin form post with the login cookie; the action's redirect is not followed."""
    return await client.post(path, data=data or {}, headers={**tenant.cookie, **SAME_ORIGIN})


def flash(resp: httpx.Response) -> str:
    """The one-shot message an action left for the next page."""
    raw = resp.cookies.get("duetime_ui_flash") or ""
    return unquote(raw)
