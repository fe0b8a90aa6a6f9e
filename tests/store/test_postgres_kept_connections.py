"""The PostgreSQL store's connections kept in hand between calls (ADR 0009,
:mod:`duetime.store.postgres.pooling`): a clean call's connection is reused without asyncpg's pool,
a waiter in the pool is never starved by it, a failed call's connection goes back to the pool,
a connection the server dropped is replaced, and closing the store gives every one back."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import asyncpg
import pytest

from duetime.errors import StoreUnavailable
from duetime.store.postgres.backend import PostgresStore
from duetime.store.postgres.errors import is_unavailable

pytestmark = pytest.mark.conformance


@pytest.fixture
async def pg(pg_url: str) -> AsyncIterator[PostgresStore]:
    # pool_max=2: one connection may be kept, so a second concurrent call already shares the pool.
    store = PostgresStore(pg_url, pool_min=1, pool_max=2, acquire_timeout=3.0)
    await store.open()
    try:
        yield store
    finally:
        await store.close()


async def _backend_pid(store: PostgresStore) -> int:
    async with store._connection() as conn:
        pid: int = await conn.fetchval("SELECT pg_backend_pid()")
    return pid


async def test_a_clean_call_keeps_its_connection_for_the_next(pg: PostgresStore) -> None:
    first = await _backend_pid(pg)
    assert pg._kept.held == 1
    assert await _backend_pid(pg) == first, "the kept connection served the next call"
    assert pg._kept.held == 1


async def test_a_caller_waiting_in_the_pool_gets_the_connection_instead(
    pg: PostgresStore,
) -> None:
    release = asyncio.Event()
    both_held = asyncio.Event()
    holding = 0

    async def hold() -> None:
        nonlocal holding
        async with pg._connection() as conn:
            await conn.fetchval("SELECT 1")
            holding += 1
            if holding == 2:
                both_held.set()
            await release.wait()

    holders = [asyncio.create_task(hold()) for _ in range(2)]
    await asyncio.wait_for(both_held.wait(), 10)
    # Both pool connections are in use: a third call waits in asyncpg's pool.
    third = asyncio.create_task(_backend_pid(pg))
    await asyncio.sleep(0.05)
    assert not third.done()
    release.set()
    await asyncio.gather(*holders)
    # Kept connections never sit idle while someone waits: the third call is served now,
    # well before its 3 s acquire timeout.
    assert isinstance(await asyncio.wait_for(third, 2.0), int)


async def test_a_failed_call_gives_its_connection_back_to_the_pool(pg: PostgresStore) -> None:
    await _backend_pid(pg)
    assert pg._kept.held == 1
    with pytest.raises(asyncpg.UndefinedTableError):
        async with pg._connection() as conn:
            await conn.fetchval("SELECT * FROM no_such_table")
    assert pg._kept.held == 0
    assert isinstance(await _backend_pid(pg), int)


async def test_a_connection_left_in_a_transaction_is_not_kept(pg: PostgresStore) -> None:
    async with pg._connection() as conn:
        await conn.execute("BEGIN")
    assert pg._kept.held == 0, "asyncpg's pool rolls it back on release"
    async with pg._connection() as conn:
        assert not conn.is_in_transaction()


async def test_a_kept_connection_the_server_dropped_is_replaced(
    pg: PostgresStore, pg_url: str
) -> None:
    dropped = await _backend_pid(pg)
    admin = await asyncpg.connect(pg_url)
    try:
        assert await admin.fetchval("SELECT pg_terminate_backend($1)", dropped)
    finally:
        await admin.close()
    # Either the loop has seen the close (the kept connection is skipped) or the call finds out;
    # a call that found out is StoreUnavailable once, and the next is served by a new backend.
    try:
        pid = await _backend_pid(pg)
    except StoreUnavailable:
        pid = await _backend_pid(pg)
    assert pid != dropped


class CountingPool:
    """The store's pool, counting the connections taken from it."""

    def __init__(self, pool: object) -> None:
        self.pool = pool
        self.taken = 0

    def acquire(self, **kwargs: object) -> object:
        self.taken += 1
        return self.pool.acquire(**kwargs)  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> object:
        return getattr(self.pool, name)


async def test_idle_kept_connections_go_back_to_the_pool(pg: PostgresStore) -> None:
    await _backend_pid(pg)  # a connection is kept from here on
    counting = CountingPool(pg._pool)
    pg._pool = counting  # type: ignore[assignment]
    try:
        await _backend_pid(pg)
        await _backend_pid(pg)
        assert counting.taken == 0, "the connection kept by the last call serves the next ones"
        pg._kept.idle_seconds = 0.0
        await asyncio.sleep(0.01)
        await _backend_pid(pg)
        assert counting.taken == 1, "one idle too long goes back; the call takes from the pool"
    finally:
        pg._pool = counting.pool  # type: ignore[assignment]


async def test_close_gives_kept_connections_back(pg_url: str) -> None:
    store = PostgresStore(pg_url, pool_min=1, pool_max=4)
    await store.open()
    await asyncio.gather(*(_backend_pid(store) for _ in range(4)))
    assert 1 <= store._kept.held <= 2
    await asyncio.wait_for(store.close(), 5.0)
    assert store._kept.held == 0


def test_the_termination_race_is_an_unavailable_store_and_other_client_errors_are_not() -> None:
    race = asyncpg.exceptions.InternalClientError(
        "cannot switch to state 12; another operation (2) is in progress"
    )
    assert is_unavailable(race)
    assert not is_unavailable(asyncpg.exceptions.InternalClientError("something else broke"))
