"""Declarative schedules from the SDK: ``ensure_schedule`` and ``worker.schedule(...)`` against
the real API (create_app over httpx.ASGITransport) on a real SQLite store."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest

from duetime.api.app import create_app
from duetime.config import Settings
from duetime.sdk import ApiValidationError, AsyncClient, Worker, worker_target
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
async def client(store: Store) -> AsyncIterator[AsyncClient]:
    app = create_app(Settings(), store)
    async with AsyncClient(BASE, transport=httpx.ASGITransport(app=app)) as c:
        yield c


async def test_ensure_schedule_creates_once_and_follows_the_code(client: AsyncClient) -> None:
    task = {"target": worker_target(), "name": "send-report"}
    first = await client.ensure_schedule("nightly", cron="0 2 * * *", task=task)
    assert first.created is True and first.key == "nightly"
    again = await client.ensure_schedule("nightly", cron="0 2 * * *", task=task)
    assert again.created is False and again.id == first.id and again.version == first.version
    moved = await client.ensure_schedule(
        "nightly", cron="30 2 * * *", timezone="Europe/Paris", task=task
    )
    assert moved.id == first.id and moved.cron == "30 2 * * *"
    assert moved.timezone == "Europe/Paris" and moved.version == first.version + 1
    at_once = await asyncio.gather(
        *(client.ensure_schedule("other", every="PT5M", task=task) for _ in range(5))
    )
    assert [s.created for s in at_once].count(True) == 1
    assert len((await client.list_schedules()).items) == 2
    with pytest.raises(ApiValidationError) as bad:
        await client.ensure_schedule("nightly", cron="0 25 * * *", task=task)
    assert bad.value.field == "cron"


async def test_worker_declares_its_schedules_at_start(client: AsyncClient) -> None:
    def make_worker() -> Worker:
        worker = Worker(client, queues=["reports"])
        worker.schedule("0 2 * * *", key="nightly", name="send-report", tz="America/New_York")
        worker.schedule(every="PT15M", key="sync", overlap="skip", task={"timeout_seconds": 5})

        @worker.handler("send-report")
        def send_report(job: object) -> None:
            return None

        return worker

    for _ in range(3):  # three starts (deploys), one schedule each
        await asyncio.wait_for(make_worker().run(until_empty=True), 10)
    items = {s.key: s for s in (await client.list_schedules()).items}
    assert set(items) == {"nightly", "sync"}
    nightly, sync = items["nightly"], items["sync"]
    assert nightly.timezone == "America/New_York" and nightly.version == 1
    assert nightly.task["name"] == "send-report" and nightly.task["queue"] == "reports"
    assert nightly.task["target"] == {"type": "worker"}
    assert sync.overlap == "skip" and sync.task["timeout_seconds"] == 5
    assert sync.task["name"] == "sync"


def test_worker_schedule_refuses_bad_declarations() -> None:
    worker = Worker("http://127.0.0.1:1")
    with pytest.raises(ValueError, match="exactly one"):
        worker.schedule("0 2 * * *", key="x", every="PT1M")
    worker.schedule("0 2 * * *", key="x")
    with pytest.raises(ValueError, match="twice"):
        worker.schedule("0 3 * * *", key="x")
