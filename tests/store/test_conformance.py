"""The store conformance suite, run unchanged against every backend.

The suite itself lives in :mod:`duetime.testing.conformance`; ``tests/conftest.py`` gives each
test a ``store`` per backend (SQLite and PostgreSQL) pinned to the ``clock`` fixture. This module
adds the contracts that need a store the fixture cannot give: one that is not migrated yet, or one
whose backend cannot be reached.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import asyncpg
import pytest

from duetime.errors import StoreUnavailable
from duetime.store import store_from_url
from duetime.testing.conformance import *  # noqa: F403
from duetime.testing.conformance import HTTP, new_task

PG_ADMIN_URL = os.environ.get("DUETIME_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")


async def _admin(statement: str) -> None:
    conn = await asyncpg.connect(PG_ADMIN_URL, timeout=5)
    try:
        await conn.execute(statement)
    finally:
        await conn.close()


@pytest.fixture(params=["sqlite", "postgres"])
async def blank_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """A store URL whose database exists but has never been migrated."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'blank.db'}"
        return
    name = f"duetime_blank_{uuid.uuid4().hex[:12]}"
    await _admin(f'CREATE DATABASE "{name}"')
    try:
        yield f"{PG_ADMIN_URL.rpartition('/')[0]}/{name}"
    finally:
        await _admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def test_open_does_not_migrate_and_migrate_applies_in_order(blank_url: str) -> None:
    """open(): connects without migrating; migrate(): applies the pending versions in order and
    returns them; then nothing is pending and a second migrate applies nothing."""
    store = store_from_url(blank_url)
    await store.open()
    try:
        pending = await store.migrations_pending()
        assert pending, "a blank database must have pending migrations"
        assert pending == sorted(pending)
        assert await store.migrate() == pending
        assert await store.migrations_pending() == []
        assert await store.migrate() == []
        await store.ping()
    finally:
        await store.close()
        await store.close()


async def test_concurrent_migrate_is_safe(blank_url: str) -> None:
    """migrate(): under a lock, so nodes migrating at once apply each version exactly once."""
    stores = [store_from_url(blank_url) for _ in range(3)]
    for store in stores:
        await store.open()
    try:
        expected = await stores[0].migrations_pending()
        applied = await asyncio.gather(*(store.migrate() for store in stores))
        flat = [version for versions in applied for version in versions]
        assert sorted(flat) == sorted(expected)
        for store in stores:
            assert await store.migrations_pending() == []
    finally:
        for store in stores:
            await store.close()


@pytest.mark.parametrize(
    "url",
    [
        # Nothing listens on port 1 of loopback: the connection is refused at once.
        "postgresql://postgres@127.0.0.1:1/duetime",
        # A database file under a regular file cannot be opened or created.
        "sqlite:///{tmp}/not-a-directory/duetime.db",
    ],
    ids=["postgres", "sqlite"],
)
async def test_open_unreachable_backend_raises_store_unavailable(url: str, tmp_path: Path) -> None:
    """open(): raises StoreUnavailable when the backend cannot be reached."""
    (tmp_path / "not-a-directory").write_text("a file, not a directory")
    store = store_from_url(url.format(tmp=tmp_path))
    with pytest.raises(StoreUnavailable):
        await asyncio.wait_for(store.open(), timeout=30)
    await store.close()


async def test_ready_signal_reaches_every_node(pg_url: str) -> None:
    """ready_signal: fired on every node that shares the store (PostgreSQL is the multi-node
    store; SQLite serves one node)."""
    a, b = store_from_url(pg_url), store_from_url(pg_url)
    await a.open()
    await b.open()
    try:
        tenant = await a.tenant_create("acme")
        for signal in (b.ready_signal, b.due_signal):
            while await signal.wait(0.05):
                pass
        seen = b.ready_signal.generation
        await a.task_create_many([new_task(tenant.id)])  # a worker task: long polls only
        assert await b.ready_signal.wait_after(seen, 5.0)
        await a.task_create_many([new_task(tenant.id, target=HTTP)])
        assert await b.ready_signal.wait(5.0)
        future = await a.now() + timedelta(seconds=30)
        await a.task_create_many([new_task(tenant.id, run_at=future)])
        assert await b.due_signal.wait(5.0)
    finally:
        await a.close()
        await b.close()
