"""Fixtures of the fault suite: real ``duetime serve`` nodes on loopback ports, a loopback
webhook receiver, SDK worker processes, and a throwaway PostgreSQL cluster for the test that
restarts the server. Every test gets its own database (``pg_url``, or its own cluster).

Every test here that uses ``procs`` is marked ``faults`` (by tests/conftest.py): opt-in locally
(``--run-slow``, ``-m faults`` or naming this directory), always run by ``scripts/test``."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from duetime.testing.faultnodes import Processes
from duetime.testing.pgcluster import PgCluster, PgUnavailable


@pytest.fixture
def procs(tmp_path: Path) -> Iterator[Processes]:
    running = Processes(tmp_path)
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
def pg_cluster() -> Iterator[PgCluster]:
    """A PostgreSQL cluster of this test's own, started; destroyed after."""
    try:
        cluster = PgCluster().init()
    except PgUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.destroy()


@pytest.fixture
def migrated() -> Callable[[str], None]:
    """Migrates the store at a URL (a database a test made itself)."""
    import asyncio

    from duetime.store import store_from_url

    async def run(url: str) -> None:
        store = store_from_url(url)
        await store.open()
        try:
            await store.migrate()
        finally:
            await store.close()

    return lambda url: asyncio.run(run(url))
