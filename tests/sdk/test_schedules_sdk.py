"""The SDK's schedule calls against the real API (create_app over httpx.ASGITransport) on a real
SQLite store whose time is pinned; and the ``duetime schedule`` commands through the sync Client."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from duetime import cli
from duetime.api.app import create_app
from duetime.clock import FakeClock
from duetime.config import Settings
from duetime.engine.leader import Leader
from duetime.engine.materializer import Materializer
from duetime.sdk import ApiNotFound, ApiValidationError, AsyncClient, Client, worker_target
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


# -- the CLI, through the sync Client over the same app ------------------------------------------


@pytest.fixture
def cli_app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[CliRunner]:
    clock = FakeClock(T0)
    store = store_from_url(f"sqlite:///{tmp_path / 'cli.db'}", clock=clock)

    async def start() -> None:
        await store.open()
        await store.migrate()

    asyncio.run(start())
    app = create_app(Settings(), store)
    monkeypatch.setattr(
        cli.common,
        "client_factory",
        lambda url, key: Client(url, key, transport=httpx.ASGITransport(app=app)),
    )
    yield CliRunner()
    asyncio.run(store.close())


def run(runner: CliRunner, *args: str) -> object:
    result = runner.invoke(cli.app, ["schedule", *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_schedule_commands(cli_app: CliRunner) -> None:
    made = run(
        cli_app, "create", "--cron", "30 2 * * *", "--timezone", "America/New_York",
        "--worker", "--name", "nightly", "--payload", '{"k": 1}', "--label", "team=ops",
    )  # fmt: skip
    assert isinstance(made, dict)
    sid = made["id"]
    assert made["task"]["labels"] == {"team": "ops"} and made["task"]["payload"] == {"k": 1}
    listed = run(cli_app, "list")
    assert isinstance(listed, dict) and [s["id"] for s in listed["items"]] == [sid]
    assert isinstance(got := run(cli_app, "get", sid), dict) and got["cron"] == "30 2 * * *"
    up = run(cli_app, "upcoming", sid, "--after", "2030-03-09T12:00:00Z", "--count", "1")
    assert up == {"items": [{"at": "2030-03-10T03:00:00-04:00", "note": up["items"][0]["note"]}]}  # type: ignore[index]
    assert isinstance(p := run(cli_app, "pause", sid, "--note", "hold"), dict) and p["paused"]
    assert isinstance(t := run(cli_app, "trigger", sid), dict) and t["schedule_id"] == sid
    assert isinstance(r := run(cli_app, "resume", sid), dict) and not r["paused"]
    assert isinstance(u := run(cli_app, "update", sid, "--jitter", "9"), dict)
    assert u["jitter_seconds"] == 9
    ticks = run(cli_app, "ticks", sid, "--outcome", "triggered")
    assert isinstance(ticks, dict) and [x["outcome"] for x in ticks["items"]] == ["triggered"]
    revs = run(cli_app, "revisions", sid)
    assert isinstance(revs, dict) and revs["items"][0]["action"] == "update"
    filled = run(
        cli_app, "backfill", sid, "--start", "2029-12-25T00:00:00Z",
        "--end", "2029-12-31T23:59:00Z", "--rate", "10",
    )  # fmt: skip
    assert isinstance(filled, dict) and filled["created"] == 7
    assert isinstance(d := run(cli_app, "delete", sid), dict) and d["deleted"] is True
    missing = cli_app.invoke(cli.app, ["schedule", "get", sid])
    assert missing.exit_code == 3 and "error:" in missing.output


def test_schedule_create_usage_errors(cli_app: CliRunner) -> None:
    no_task = cli_app.invoke(cli.app, ["schedule", "create", "--every", "PT1M"])
    assert no_task.exit_code == 2 and "--target-url" in no_task.output
    both = cli_app.invoke(
        cli.app, ["schedule", "create", "--every", "PT1M", "--worker", "--task", "{}"]
    )
    assert both.exit_code == 2
    bad = cli_app.invoke(cli.app, ["schedule", "create", "--every", "PT0M", "--worker"])
    assert bad.exit_code == 6 and "every" in bad.output


def test_cli_schedule_choices_are_checked_before_any_call(cli_app: CliRunner) -> None:
    bad = cli_app.invoke(
        cli.app, ["schedule", "create", "--every", "PT1M", "--worker", "--overlap", "sometimes"]
    )
    assert bad.exit_code == 2 and "sometimes" in bad.output
    good = cli_app.invoke(
        cli.app, ["schedule", "create", "--every", "PT1M", "--worker", "--overlap", "skip"]
    )
    assert good.exit_code == 0, good.output
    assert json.loads(good.stdout)["overlap"] == "skip"
