"""Keyed flow control through the SDK against the real API (dev mode, in process): a queue's
rules and keys, a create answered by a uniqueness window or a debounce (``created`` and
``flow``), a handle's own ``unique``, and a window whose task has left the hot store."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import httpx
import pytest

from duetime.api.app import create_app
from duetime.clock import FakeClock
from duetime.config import Settings
from duetime.errors import UniqueHeld
from duetime.history.retention import RetentionPolicy
from duetime.sdk import AsyncClient, Worker, WorkerConfig, worker_target
from duetime.store import Store

BASE = "http://127.0.0.1:8080"  # dev mode answers loopback hosts only


@pytest.fixture
def transport(store: Store) -> httpx.ASGITransport:
    return httpx.ASGITransport(app=create_app(Settings(), store))  # dev mode


async def test_queue_rules_and_a_create_answered_by_them(
    transport: httpx.ASGITransport, clock: FakeClock
) -> None:
    async with AsyncClient(BASE, transport=transport) as client:
        info = await client.put_queue(
            "orders",
            key_limit={"key": "payload.customer", "rate": "1/s"},
            unique={"key": "payload.order", "period": "PT1H"},
            debounce={"key": "labels.user", "period": "PT5S"},
        )
        assert info.key_limit == {"key": "payload.customer", "rate": "1/s"}
        assert info.unique is not None and info.unique["period"] == "PT1H"
        made = await asyncio.gather(
            *(
                client.create_task(
                    target=worker_target(), queue="orders", payload={"order": 1, "customer": "c"}
                )
                for _ in range(5)
            )
        )
        assert sorted(t.created for t in made) == [False, False, False, False, True]
        assert {t.id for t in made} == {made[0].id}
        assert sorted(t.flow["unique"] for t in made if t.flow) == ["created"] + ["existing"] * 4
        assert made[0].flow_key == "c"
        first = await client.create_task(
            target=worker_target(), queue="orders", labels={"user": "u"}, payload={"n": 1}
        )
        again = await client.create_task(
            target=worker_target(), queue="orders", labels={"user": "u"}, payload={"n": 2}
        )
        assert (first.flow, again.flow) == ({"debounce": "created"}, {"debounce": "absorbed"})
        assert again.id == first.id and again.absorbed == 1 and again.payload == {"n": 2}
        keyed = await client.get_queue("orders")
        assert keyed.keys is not None and [k["key"] for k in keyed.keys] == ["c"]  # one ready


async def test_a_handles_own_window_and_a_window_past_retention(
    transport: httpx.ASGITransport, clock: FakeClock, store: Store
) -> None:
    async with AsyncClient(BASE, transport=transport) as client:
        worker = Worker(client=client, queues=["reports"], config=WorkerConfig())

        @worker.task(unique={"key_from": "payload.day", "period": "P10D"})
        async def report(day: str) -> None:  # pragma: no cover - never run here
            return None

        first = await report.defer_async({"day": "2030-01-01"})
        again = await report.defer_async({"day": "2030-01-01"})
        assert first.created and not again.created and again.id == first.id
        (lease,) = await client.lease_tasks("reports", worker_id="w", wait_seconds=0)
        await client.complete_lease(lease.lease_id)
        clock.advance(timedelta(days=2).total_seconds())
        day = RetentionPolicy(succeeded=86400, failed=86400, cancelled=86400)
        assert await store.task_retention_sweep(day, limit=10) == 1
        with pytest.raises(UniqueHeld) as held:
            await report.defer_async({"day": "2030-01-01"})
        assert held.value.task_id == first.id
