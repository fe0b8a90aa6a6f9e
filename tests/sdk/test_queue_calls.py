"""Queue calls of the SDK and the ``duetime queue`` CLI against the real API, with the store's
time pinned by the test's FakeClock: the SDK calls on the stores ``--store`` names, the CLI on
SQLite (its blocking client runs its own event loop, which a PostgreSQL pool opened on the test's
loop cannot serve)."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Iterator

import httpx
import orjson
import pytest
from typer.testing import CliRunner

from duetime import cli
from duetime.api.app import create_app
from duetime.clock import FakeClock
from duetime.config import Settings
from duetime.sdk import ApiValidationError, AsyncClient, Client, QueueInfo, worker_target
from duetime.store import Store, store_from_url

BASE = "http://127.0.0.1:8080"  # dev mode answers loopback hosts only


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


async def test_flow_limits_round_trip_and_clear(transport: httpx.ASGITransport) -> None:
    async with AsyncClient(BASE, transport=transport) as client:
        limited = await client.put_queue(
            "mail",
            max_concurrency=4,
            rate_limit_per_second=5.0,
            burst=10,
            max_concurrency_per_key=1,
            retention={"failed": "P30D"},
        )
        expected = (4, 5.0, 10, 1, {"failed": "P30D"})
        assert (
            limited.max_concurrency,
            limited.rate_limit_per_second,
            limited.burst,
            limited.max_concurrency_per_key,
            limited.retention,
        ) == expected
        assert limited.tokens == 10.0, "a new rate starts from a full bucket"
        read = await client.get_queue("mail")
        assert read.model_dump(exclude={"counts"}) == limited.model_dump(exclude={"counts"})
        [listed] = [q for q in await client.list_queues() if q.name == "mail"]
        assert (listed.rate_limit_per_second, listed.burst, listed.tokens) == (5.0, 10, 10.0)

        cleared = await client.put_queue("mail")  # PUT replaces: every left-out setting resets
        assert cleared.configured and not cleared.paused
        assert (cleared.max_concurrency, cleared.rate_limit_per_second, cleared.burst) == (
            None,
            None,
            None,
        )
        assert cleared.max_concurrency_per_key is None and cleared.tokens is None
        assert cleared.retention == {}

        with pytest.raises(ApiValidationError) as refused:
            await client.put_queue("mail", burst=3)  # a burst sizes a rate's bucket
        assert refused.value.field == "burst"
        with pytest.raises(ApiValidationError):
            await client.put_queue("mail", rate_limit_per_second=0)
        with pytest.raises(ApiValidationError):
            await client.put_queue("mail", max_concurrency_per_key=0)


async def test_held_by_and_tokens_say_what_keeps_tasks_waiting(
    transport: httpx.ASGITransport, clock: FakeClock
) -> None:
    async with AsyncClient(BASE, transport=transport) as client:
        for _ in range(3):
            await client.create_task(target=worker_target(), queue="rated")
        await client.put_queue("rated", rate_limit_per_second=0.5, burst=2)
        assert (await client.get_queue("rated")).held_by == ()  # two tokens: nothing holds
        leased = await client.lease_tasks("rated", worker_id="w", max_tasks=3, wait_seconds=0)
        assert len(leased) == 2, "the bucket held two starts"
        held = await client.get_queue("rated")
        assert held.tokens == 0.0 and held.held_by == ("rate_limit_per_second",)
        clock.advance(1.0)  # half a token at 0.5/s
        assert (await client.get_queue("rated")).tokens == 0.5
        clock.advance(1.0)
        refilled = await client.get_queue("rated")
        assert refilled.tokens == 1.0 and refilled.held_by == ()
        paused = await client.put_queue("rated", paused=True, rate_limit_per_second=0.5, burst=2)
        assert paused.held_by == ("paused",)
        assert paused.tokens == 1.0, "the same rate and burst keep the bucket as it was"

        for _ in range(2):
            await client.create_task(
                target=worker_target(), queue="serial", concurrency_key="customer-1"
            )
        await client.put_queue("serial", max_concurrency_per_key=1)
        assert len(await client.lease_tasks("serial", worker_id="w", wait_seconds=0)) == 1
        serial = await client.get_queue("serial")
        assert serial.held_by == ("max_concurrency_per_key",) and serial.tokens is None
        assert (await client.lease_tasks("serial", worker_id="w", wait_seconds=0)) == []
        [busy] = [q for q in await client.list_queues() if q.name == "serial"]
        assert busy.held_by == ("max_concurrency_per_key",)


def test_queue_info_parses_what_an_older_server_sends() -> None:
    old = QueueInfo.model_validate(
        {"name": "q", "configured": True, "paused": False, "max_concurrency": 2, "running": 1}
    )
    assert old.tokens is None and old.held_by == () and old.retention is None
    assert old.rate_limit_per_second is None and old.max_concurrency_per_key is None
    new = QueueInfo.model_validate({"name": "q", "tokens": 1.5, "held_by": ["paused"]})
    assert new.tokens == 1.5 and new.held_by == ("paused",)


def test_sync_put_queue_takes_the_same_arguments() -> None:
    sync = inspect.signature(Client.put_queue).parameters
    assert list(sync) == list(inspect.signature(AsyncClient.put_queue).parameters)
    assert {"rate_limit_per_second", "burst", "max_concurrency_per_key"} <= set(sync)


@pytest.fixture
async def sqlite_store(sqlite_url: str, clock: FakeClock) -> AsyncIterator[Store]:
    s = store_from_url(sqlite_url, clock=clock)
    await s.open()
    await s.migrate()
    try:
        yield s
    finally:
        await s.close()


@pytest.fixture
def cli_transport(sqlite_store: Store) -> httpx.ASGITransport:
    return httpx.ASGITransport(app=create_app(Settings(), sqlite_store))  # dev mode


@pytest.fixture
def cli_client(cli_transport: httpx.ASGITransport) -> Iterator[None]:
    """Route the CLI's SDK client through the in-process app."""

    original = cli.common.client_factory

    def factory(url: str, api_key: str | None) -> Client:
        return Client(BASE, api_key, transport=cli_transport)

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


def _run(*args: str, code: int = 0) -> dict[str, object]:
    result = CliRunner().invoke(cli.app, list(args))
    assert result.exit_code == code, (args, result.output)
    return orjson.loads(result.stdout) if code == 0 else {}


def test_queue_cli_set_flow_limits_then_get_shows_them(cli_client: None) -> None:
    _run("queue", "set", "reports", "--rate", "5", "--burst", "10", "--per-key", "1")
    got = _run("queue", "get", "reports")
    assert (got["rate_limit_per_second"], got["burst"], got["max_concurrency_per_key"]) == (
        5.0,
        10,
        1,
    )
    assert got["tokens"] == 10.0 and got["held_by"] == []
    assert got["max_concurrency"] is None and got["paused"] is False

    faster = _run("queue", "set", "reports", "--rate", "8")
    assert (faster["rate_limit_per_second"], faster["burst"]) == (8.0, 10)  # burst kept
    assert faster["max_concurrency_per_key"] == 1
    default_burst = _run("queue", "set", "reports", "--no-burst", "--max-concurrency", "3")
    assert (default_burst["burst"], default_burst["rate_limit_per_second"]) == (None, 8.0)
    assert default_burst["max_concurrency"] == 3 and default_burst["max_concurrency_per_key"] == 1
    _run("queue", "set", "reports", "--burst", "4")
    no_rate = _run("queue", "set", "reports", "--no-rate")
    assert (no_rate["rate_limit_per_second"], no_rate["burst"], no_rate["tokens"]) == (
        None,
        None,
        None,
    )
    assert no_rate["max_concurrency"] == 3 and no_rate["max_concurrency_per_key"] == 1
    no_key = _run("queue", "set", "reports", "--no-per-key")
    assert no_key["max_concurrency_per_key"] is None and no_key["max_concurrency"] == 3
    free = _run("queue", "set", "reports", "--no-max-concurrency")
    assert free["max_concurrency"] is None


def test_queue_cli_set_refuses_contradictions(cli_client: None) -> None:
    for args in (
        ["--rate", "5", "--no-rate"],
        ["--burst", "5", "--no-rate"],
        ["--burst", "5", "--no-burst"],
        ["--per-key", "1", "--no-per-key"],
        ["--max-concurrency", "1", "--unlimited"],
    ):
        _run("queue", "set", "reports", *args, code=2)
    refused = CliRunner().invoke(cli.app, ["queue", "set", "fresh", "--burst", "3"])
    assert refused.exit_code == 6 and "burst" in refused.output  # no rate to size
    refused = CliRunner().invoke(cli.app, ["queue", "set", "fresh", "--rate", "0"])
    assert refused.exit_code == 6 and "rate_limit_per_second" in refused.output


def test_queue_cli_pause_resume_keep_every_setting(
    cli_client: None, cli_transport: httpx.ASGITransport
) -> None:
    with Client(BASE, transport=cli_transport) as client:
        client.put_queue(
            "reports",
            max_concurrency=7,
            rate_limit_per_second=2.5,
            burst=6,
            max_concurrency_per_key=1,
            retention={"succeeded": "P3D"},
        )
    kept = {
        "max_concurrency": 7,
        "rate_limit_per_second": 2.5,
        "burst": 6,
        "max_concurrency_per_key": 1,
        "retention": {"succeeded": "P3D"},
    }
    paused = _run("queue", "pause", "reports")
    assert paused["paused"] is True and {k: paused[k] for k in kept} == kept
    resumed = _run("queue", "resume", "reports")
    assert resumed["paused"] is False and {k: resumed[k] for k in kept} == kept
    again = _run("queue", "set", "reports", "--paused")
    assert again["paused"] is True and {k: again[k] for k in kept} == kept


def test_queue_cli_list_table_shows_tokens_and_held_by(
    cli_client: None, cli_transport: httpx.ASGITransport
) -> None:
    with Client(BASE, transport=cli_transport) as client:
        client.create_task(target=worker_target(), queue="reports")
    _run("queue", "set", "reports", "--paused", "--rate", "2", "--burst", "3")
    table = CliRunner().invoke(cli.app, ["queue", "list", "-o", "table"])
    assert table.exit_code == 0, table.output
    header, row = table.stdout.splitlines()[:2]
    assert header.split() == [
        "NAME",
        "PAUSED",
        "MAX_CONCURRENCY",
        "RATE_LIMIT_PER_SECOND",
        "BURST",
        "MAX_CONCURRENCY_PER_KEY",
        "RUNNING",
        "OLDEST_DUE_LAG_SECONDS",
        "TOKENS",
        "HELD_BY",
    ]
    assert row.split() == ["reports", "true", "-", "2.0", "3", "-", "0", "0.0", "3.0", '["paused"]']
    listed = orjson.loads(CliRunner().invoke(cli.app, ["queue", "list"]).stdout)
    assert [(q["name"], q["tokens"], q["held_by"]) for q in listed] == [
        ("reports", 3.0, ["paused"])
    ]
