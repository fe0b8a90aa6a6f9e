"""The SDK's schedule calls against the real API (create_app over httpx.ASGITransport) on a real
SQLite store whose time is pinned (the ``duetime schedule`` commands: tests/cli)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from duetime.api.app import create_app
from duetime.clock import FakeClock
from duetime.config import Settings
from duetime.engine.leader import Leader
from duetime.engine.materializer import Materializer
from duetime.sdk import ApiNotFound, ApiValidationError, AsyncClient, worker_target
from duetime.store import Store, store_from_url

BASE = "http://127.0.0.1:8080"  # dev mode answers loopback hosts only
T0 = datetime(2030, 1, 1, tzinfo=UTC)


@pytest.fixture
async def pinned(sqlite_url: str) -> AsyncIterator[tuple[Store, FakeClock]]:
    clock = FakeClock(T0)
    store = store_from_url(sqlite_url, clock=clock)
    await store.open()
    await store.migrate()
    try:
        yield store, clock
    finally:
        await store.close()


@pytest.fixture
async def client(pinned: tuple[Store, FakeClock]) -> AsyncIterator[AsyncClient]:
    app = create_app(Settings(), pinned[0])  # dev mode: no keys
    async with AsyncClient(BASE, transport=httpx.ASGITransport(app=app)) as c:
        yield c


async def test_every_schedule_call(client: AsyncClient, pinned: tuple[Store, FakeClock]) -> None:
    store, clock = pinned
    s = await client.create_schedule(
        every="PT30S", jitter_seconds=0, catchup="all",
        task={"target": worker_target(), "name": "sync", "payload": {"x": 1}},
    )  # fmt: skip
    assert s.every == "PT30S" and s.catchup == "all" and s.description == "Every 30 seconds"
    assert s.next_run_at == T0 + timedelta(seconds=30)
    assert (await client.get_schedule(s.id)).id == s.id
    assert [x.id for x in (await client.list_schedules()).items] == [s.id]
    assert [x.id async for x in client.iter_schedules(page_size=1)] == [s.id]

    upcoming = await client.list_upcoming(s.id, count=3)
    assert [u.at for u in upcoming] == [T0 + timedelta(seconds=30 * k) for k in (1, 2, 3)]

    leader = Leader(store, "n", ttl_seconds=10, clock=clock)
    await leader.run_once()
    await Materializer(store, leader, clock).run_once()
    ticks = [t async for t in client.iter_ticks(s.id, page_size=1)]
    assert [t.outcome for t in ticks] == ["fired", "fired"]

    changed = await client.update_schedule(s.id, every="PT1M", end_at=None)
    assert changed.every == "PT1M" and changed.version == 2
    paused = await client.pause_schedule(s.id, note="quiet")
    assert paused.paused and paused.pause_note == "quiet" and paused.next_run_at is None
    task = await client.trigger_schedule(s.id)
    assert task.schedule_id == s.id and task.scheduled_for == T0 and task.name == "sync"
    resumed = await client.resume_schedule(s.id, catchup="latest")
    assert not resumed.paused

    clock.advance(3600)
    filled = await client.backfill_schedule(
        s.id, start=T0, end=T0 + timedelta(minutes=2), rate_per_second=4
    )
    assert (filled.created, filled.existing) == (2, 1)  # T0 itself was triggered
    assert filled.items[2].run_at - filled.items[1].run_at == timedelta(seconds=0.25)

    revisions = (await client.list_revisions(s.id)).items
    assert [r.action for r in revisions] == ["resume", "pause", "update", "create"]
    assert revisions[0].actor == "dev-mode"
    only = await client.list_ticks(s.id, outcome=["backfilled", "triggered"])
    assert sorted(t.outcome for t in only.items) == ["backfilled", "backfilled", "triggered"]

    deleted = await client.delete_schedule(s.id)
    assert deleted.deleted and deleted.cancelled_tasks == 3
    with pytest.raises(ApiNotFound):
        await client.get_schedule(s.id)


async def test_validation_errors_name_the_field(client: AsyncClient) -> None:
    with pytest.raises(ApiValidationError) as info:
        await client.create_schedule(cron="0 25 * * *", task={"target": worker_target()})
    assert info.value.field == "cron"
    with pytest.raises(ApiValidationError) as info:
        await client.create_schedule(every="PT1H", task={"target": {"type": "http", "url": "nope"}})
    assert info.value.field == "task.target.url"
