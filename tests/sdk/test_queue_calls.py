"""Queue calls of the SDK against the real API, with the store's time pinned by the test's
FakeClock, on the stores ``--store`` names (the ``duetime queue`` commands: tests/cli)."""

from __future__ import annotations

import inspect

import httpx
import pytest

from duetime.api.app import create_app
from duetime.clock import FakeClock
from duetime.config import Settings
from duetime.sdk import ApiValidationError, AsyncClient, Client, QueueInfo, worker_target
from duetime.store import Store

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
