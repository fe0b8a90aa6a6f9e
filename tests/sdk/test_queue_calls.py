"""Queue calls of the SDK and the ``duetime queue`` CLI against the real API on SQLite."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import httpx
import orjson
import pytest
from typer.testing import CliRunner

from duetime import cli
from duetime.api.app import create_app
from duetime.config import Settings
from duetime.sdk import ApiValidationError, AsyncClient, Client, worker_target
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


async def test_queue_settings_and_figures(transport: httpx.ASGITransport) -> None:
    async with AsyncClient(BASE, transport=transport) as client:
        await client.create_task(target=worker_target(), queue="mail")
        fresh = await client.get_queue("mail")
        assert not fresh.configured and not fresh.paused and fresh.counts["ready"] == 1
        paused = await client.put_queue("mail", paused=True, max_concurrency=3)
        assert paused.configured and paused.paused and paused.max_concurrency == 3
        leased = await client.lease_tasks("mail", worker_id="w", wait_seconds=0)
        assert leased == [], "a paused queue hands out nothing"
        await client.put_queue("mail", paused=False, max_concurrency=3)
        assert len(await client.lease_tasks("mail", worker_id="w", wait_seconds=0)) == 1
        names = [q.name for q in await client.list_queues()]
        assert "mail" in names
        with pytest.raises(ApiValidationError):
            await client.put_queue("mail", max_concurrency=0)


@pytest.fixture
def cli_client(transport: httpx.ASGITransport) -> Iterator[None]:
    """Route the CLI's SDK client through the in-process app."""

    original = cli.common.client_factory

    def factory(url: str, api_key: str | None) -> Client:
        return Client(BASE, api_key, transport=transport)

    cli.common.client_factory = factory
    try:
        yield
    finally:
        cli.common.client_factory = original


def test_queue_cli_pause_resume(cli_client: None) -> None:
    runner = CliRunner()
    paused = runner.invoke(cli.app, ["queue", "pause", "reports"])
    assert paused.exit_code == 0, paused.output
    assert orjson.loads(paused.stdout)["paused"] is True
    got = runner.invoke(cli.app, ["queue", "get", "reports"])
    assert orjson.loads(got.stdout)["paused"] is True
    resumed = runner.invoke(cli.app, ["queue", "resume", "reports"])
    assert orjson.loads(resumed.stdout)["paused"] is False
    bad = runner.invoke(cli.app, ["queue", "set", "reports", "--max-concurrency", "0"])
    assert bad.exit_code == 6 and "max_concurrency" in bad.output


def test_queue_cli_set_changes_only_what_is_given(cli_client: None) -> None:
    runner = CliRunner()
    assert runner.invoke(cli.app, ["queue", "pause", "reports"]).exit_code == 0
    limited = runner.invoke(cli.app, ["queue", "set", "reports", "--max-concurrency", "5"])
    assert limited.exit_code == 0, limited.output
    shown = orjson.loads(limited.stdout)
    assert shown["max_concurrency"] == 5 and shown["paused"] is True  # still paused
    active = orjson.loads(runner.invoke(cli.app, ["queue", "set", "reports", "--active"]).stdout)
    assert active["paused"] is False and active["max_concurrency"] == 5  # limit kept
    free = orjson.loads(runner.invoke(cli.app, ["queue", "set", "reports", "--unlimited"]).stdout)
    assert free["max_concurrency"] is None and free["paused"] is False
    assert runner.invoke(cli.app, ["queue", "set", "reports"]).exit_code == 2
