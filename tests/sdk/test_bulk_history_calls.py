"""Bulk replay/cancel and history through the SDK (async and sync), against the real API on
SQLite (the ``duetime task replay|cancel-matching`` and ``duetime history`` commands:
tests/cli)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from duetime.api.app import create_app
from duetime.config import Settings
from duetime.sdk import ApiValidationError, AsyncClient, worker_target
from duetime.store import Store, store_from_url

BASE = "http://127.0.0.1:8080"  # dev mode answers loopback hosts only


@pytest.fixture
async def store(sqlite_url: str) -> AsyncIterator[Store]:
    s = store_from_url(sqlite_url)
    await s.open()
    await s.migrate()
    try:
        yield s
    finally:
        await s.close()


@pytest.fixture
def transport(store: Store) -> httpx.ASGITransport:
    return httpx.ASGITransport(app=create_app(Settings(), store))  # dev mode


async def _fail_all(client: AsyncClient, queue: str) -> None:
    for lease in await client.lease_tasks(queue, worker_id="w", max_tasks=100, wait_seconds=0):
        await client.fail_lease(lease.lease_id, error="down", retryable=False)


async def test_sdk_replay_and_cancel_by_filter(transport: httpx.ASGITransport) -> None:
    async with AsyncClient(BASE, transport=transport) as client:
        for _ in range(3):
            await client.create_task(target=worker_target(), queue="mail", labels={"k": "v"})
        await _fail_all(client, "mail")
        done = await client.replay_tasks(queue="mail", labels={"k": "v"}, rate_per_second=1000)
        assert (done.matched, done.changed) == (3, 3)
        assert (await client.list_tasks(status="ready", queue="mail")).items.__len__() == 3
        cancelled = await client.cancel_tasks(queue="mail", status="ready", max_tasks=2)
        assert (cancelled.matched, cancelled.changed) == (2, 2)
        with pytest.raises(ApiValidationError):
            await client.replay_tasks(status="ready")


async def test_sdk_history_pages(transport: httpx.ASGITransport) -> None:
    async with AsyncClient(BASE, transport=transport) as client:
        task = await client.create_task(target=worker_target(), queue="h", name="n")
        await _fail_all(client, "h")
        page = await client.list_history(task_id=task.id, limit=2)
        assert len(page.items) == 2 and page.next_cursor
        every = [e async for e in client.iter_history(task_id=task.id, page_size=2)]
        assert [e.kind for e in every].count("attempt") == 1
        assert every[-1].to_status == "ready" and every[-1].from_status is None
        failed = await client.list_history(kind="attempt", outcome=["failed"], name="n")
        assert [e.error for e in failed.items] == ["down"]
