"""Fixtures of the SQL API tests (PostgreSQL only): the store on a fresh migrated database, tenants,
and login roles granted a tenant, each connecting as itself (the server trusts loopback)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator

import asyncpg
import httpx
import pytest
from fastapi import FastAPI
from sql_helpers import MAX_PAYLOAD_BYTES, Roles

from duetime.api.app import create_app
from duetime.config import Settings
from duetime.store.postgres.backend import PostgresStore


@pytest.fixture
async def store(pg_url: str) -> AsyncIterator[PostgresStore]:
    s = PostgresStore(pg_url)
    await s.open()
    try:
        yield s
    finally:
        await s.close()


@pytest.fixture
async def tenant(store: PostgresStore) -> str:
    return (await store.tenant_create("acme")).id


@pytest.fixture
async def roles(pg_url: str) -> AsyncIterator[Roles]:
    made = Roles(pg_url)
    try:
        yield made
    finally:
        await made.drop()


@pytest.fixture
async def producer(
    store: PostgresStore, tenant: str, roles: Roles
) -> AsyncIterator[asyncpg.Connection]:
    """A connection as a login role granted ``tenant``."""
    role = await roles.make()
    await store.sql_grant(tenant, role, max_payload_bytes=MAX_PAYLOAD_BYTES)
    conn = await roles.connect(role)
    try:
        yield conn
    finally:
        await conn.close()


@pytest.fixture
def fresh_role_name() -> Iterator[str]:
    yield f"dt_missing_{uuid.uuid4().hex[:10]}"


ADMIN_TOKEN = "sql-api-admin-token"


@pytest.fixture
def node(store: PostgresStore) -> FastAPI:
    """A node's API app on ``store`` (no engine runs: lease polls and creates only)."""
    return create_app(Settings(admin_token=ADMIN_TOKEN, max_payload_bytes=MAX_PAYLOAD_BYTES), store)


@pytest.fixture
async def api(node: FastAPI) -> AsyncIterator[tuple[httpx.AsyncClient, str]]:
    """An API client of ``node``, authenticated as a new tenant, and that tenant."""
    transport = httpx.ASGITransport(app=node)
    async with httpx.AsyncClient(transport=transport, base_url="http://duetime.test") as client:
        made = await client.post(
            "/v1/admin/tenants",
            json={"name": "acme"},
            headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
        )
        assert made.status_code == 201, made.text
        client.headers["Authorization"] = f"Bearer {made.json()['api_key']}"
        yield client, made.json()["id"]
