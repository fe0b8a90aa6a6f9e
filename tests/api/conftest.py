"""Fixtures for the HTTP API tests: an app over the parametrized ``store`` (SQLite by default;
``--store=postgres|both`` for PostgreSQL), an httpx client that calls it in-process, and a tenant
with an API key."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from api_helpers import ADMIN_TOKEN, TenantKey, make_tenant
from cryptography.fernet import Fernet
from fastapi import FastAPI

from duetime.api.app import create_app
from duetime.config import Settings
from duetime.store import Store

SECRET_KEY = Fernet.generate_key().decode()
"""The key ring of the API tests' apps (so none makes a key file in the working directory)."""


@pytest.fixture
def settings() -> Settings:
    return Settings(admin_token=ADMIN_TOKEN, max_payload_bytes=1024, secret_keys=SECRET_KEY)


@pytest.fixture
def app(settings: Settings, store: Store) -> FastAPI:
    return create_app(settings, store)


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://duetime.test") as c:
        yield c


@pytest.fixture
async def tenant(client: httpx.AsyncClient) -> TenantKey:
    return await make_tenant(client, "acme")


@pytest.fixture
async def api(client: httpx.AsyncClient, tenant: TenantKey) -> httpx.AsyncClient:
    """The client, authenticated as ``tenant``."""
    client.headers.update(tenant.headers)
    return client


@pytest.fixture
def signals_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Long polls re-claim only when the store's signal fires (not every second as well), so a
    poll that returns before its ``wait_seconds`` ran out proves the signal woke it: the tests
    then need no wall-clock bound tighter than a loaded machine keeps."""
    from duetime.lifecycle import lease as leasing

    monkeypatch.setattr(leasing, "POLL_SLICE_SECONDS", 3600.0)
