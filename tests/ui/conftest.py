"""Fixtures of the dashboard's HTML tests: an app over the parametrized ``store`` (SQLite by
default; ``--store=postgres|both`` for PostgreSQL) with auth on, an in-process httpx client, and
two tenants with their keys."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from ui_helpers import ADMIN_TOKEN, BASE, Admin, Tenant, admin_login, make_tenant

from duetime.api.app import create_app
from duetime.config import Settings
from duetime.store import Store


@pytest.fixture
async def client(store: Store) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(Settings(admin_token=ADMIN_TOKEN), store)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url=BASE) as c:
        yield c


@pytest.fixture
async def dev_client(store: Store) -> AsyncIterator[httpx.AsyncClient]:
    """The same app in dev mode (no admin token: no auth)."""
    app = create_app(Settings(), store)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url=BASE) as c:
        yield c


@pytest.fixture
async def acme(client: httpx.AsyncClient) -> Tenant:
    return await make_tenant(client, "acme")


@pytest.fixture
async def globex(client: httpx.AsyncClient) -> Tenant:
    return await make_tenant(client, "globex")


@pytest.fixture
async def admin(client: httpx.AsyncClient) -> Admin:
    """An admin's dashboard session, viewing no tenant yet."""
    return await admin_login(client)
