"""Fixtures shared by every test layer.

PostgreSQL: ``DUETIME_TEST_PG_URL`` names a server and a database we may connect to in order to
create others (default: the local trust-auth server). Each test gets a fresh database cloned from
a migrated template made once per test process, so tests never see each other's rows.
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import socket
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from duetime.clock import FakeClock
from duetime.store import Store, store_from_url

PG_ADMIN_URL = os.environ.get("DUETIME_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")


def _with_db(url: str, db: str) -> str:
    base, _, _ = url.rpartition("/")
    return f"{base}/{db}"


async def _admin_execute(*statements: str) -> None:
    try:
        conn = await asyncpg.connect(PG_ADMIN_URL, timeout=5)
    except (OSError, asyncpg.PostgresError) as exc:
        pytest.fail(
            f"PostgreSQL is not reachable at {PG_ADMIN_URL} ({exc}); "
            "run ./scripts/test (it starts a throwaway server) or set DUETIME_TEST_PG_URL",
            pytrace=False,
        )
    try:
        for statement in statements:
            await conn.execute(statement)
    finally:
        await conn.close()


@pytest.fixture(scope="session")
def pg_template() -> Iterator[str]:
    """Name of a migrated template database, private to this test process."""
    name = f"duetime_tpl_{os.getpid()}_{uuid.uuid4().hex[:6]}"

    async def make() -> None:
        await _admin_execute(f'CREATE DATABASE "{name}"')
        store = store_from_url(_with_db(PG_ADMIN_URL, name))
        await store.open()
        try:
            await store.migrate()
        finally:
            await store.close()

    asyncio.run(make())
    yield name
    asyncio.run(_admin_execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.fixture
async def pg_url(pg_template: str) -> AsyncIterator[str]:
    """URL of a fresh, migrated, empty PostgreSQL database for this test."""
    name = f"duetime_t_{uuid.uuid4().hex[:12]}"
    await _admin_execute(f'CREATE DATABASE "{name}" TEMPLATE "{pg_template}"')
    yield _with_db(PG_ADMIN_URL, name)
    await _admin_execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'duetime.db'}"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest) -> str:
    """A fresh store URL, once per backend: tests using it run unchanged against both."""
    name = "pg_url" if request.param == "postgres" else "sqlite_url"
    return str(request.getfixturevalue(name))


@pytest.fixture
async def store(store_url: str, clock: FakeClock) -> AsyncIterator[Store]:
    """An open, migrated store on each backend, whose time is the test's :class:`FakeClock`."""
    s = store_from_url(store_url, clock=clock)
    await s.open()
    await s.migrate()
    try:
        yield s
    finally:
        await s.close()


@pytest.fixture
def dials(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """Every address a socket of this test connects to; a non-loopback one is blocked."""
    seen: list[Any] = []
    blocked: list[Any] = []
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex

    def allowed(address: Any) -> bool:
        seen.append(address)
        if isinstance(address, tuple):
            host = str(address[0]).split("%")[0]
            if not ipaddress.ip_address(host).is_loopback:
                blocked.append(address)
                return False
        return True

    def connect(self: socket.socket, address: Any) -> None:
        if not allowed(address):
            raise ConnectionRefusedError(f"test network rule: {address} is not loopback")
        real_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        if not allowed(address):
            raise ConnectionRefusedError(f"test network rule: {address} is not loopback")
        return real_connect_ex(self, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
    yield seen
    assert not blocked, f"the test tried to dial non-loopback addresses: {blocked}"
