"""Cancelling a running task is told to its worker: the heartbeat answer carries
``cancel_requested``, and the SDK Worker cancels the handler; the task ends ``cancelled``.
Real API (create_app over httpx.ASGITransport) on a real SQLite store."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest

from duetime.api.app import create_app
from duetime.config import Settings
from duetime.sdk import AsyncClient, Job, Worker, WorkerConfig, worker_target
from duetime.store import Store, store_from_url

BASE = "http://127.0.0.1:8080"


@pytest.fixture
async def client(sqlite_url: str) -> AsyncIterator[AsyncClient]:
    store: Store = store_from_url(sqlite_url)
    await store.open()
    await store.migrate()
    app = create_app(Settings(), store)
    try:
        async with AsyncClient(BASE, transport=httpx.ASGITransport(app=app)) as c:
            yield c
    finally:
        await store.close()


async def test_heartbeat_answer_carries_the_cancel(client: AsyncClient) -> None:
    task = await client.create_task(target=worker_target(), name="slow")
    [lease] = await client.lease_tasks(worker_id="w", names=["slow"], max_tasks=1, wait_seconds=0)
    assert (await client.heartbeat(lease.lease_id)).cancel_requested is False
    cancelled = await client.cancel_task(task.id)
    assert cancelled.status == "running" and cancelled.cancel_requested
    assert (await client.heartbeat(lease.lease_id)).cancel_requested is True


async def test_worker_cancels_the_handler_of_a_cancelled_task(client: AsyncClient) -> None:
    started = asyncio.Event()
    stopped: list[str] = []
    worker = Worker(client, config=WorkerConfig(lease_seconds=0.6, wait_seconds=0.2))

    @worker.handler("slow")
    async def slow(job: Job) -> None:
        started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            stopped.append(job.id)
            raise

    task = await client.create_task(target=worker_target(), name="slow")
    running = asyncio.create_task(worker.run())
    try:
        await asyncio.wait_for(started.wait(), 10)
        await client.cancel_task(task.id)
        for _ in range(100):
            if (await client.get_task(task.id)).status == "cancelled":
                break
            await asyncio.sleep(0.1)
        assert (await client.get_task(task.id)).status == "cancelled"
        assert stopped == [task.id] and worker.stats.cancelled == 1
    finally:
        worker.stop()
        await asyncio.wait_for(running, 10)
