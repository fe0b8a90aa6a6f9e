"""Notifications end to end on both stores, with a loopback receiver: the settings API, signed
events delivered through the engine as recorded tasks, and the digest that keeps an outage of
many dead letters to a few bodies."""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from standardwebhooks.webhooks import Webhook
from tests.observe.receivers import Received, receiver

from duetime.api.app import create_app
from duetime.config import Settings
from duetime.engine.engine import Engine
from duetime.node.wiring import build_deliverers
from duetime.notify.events import QUEUE
from duetime.sdk import ApiNotFound, ApiValidationError, AsyncClient, http_target
from duetime.store import Store, store_from_url

ADMIN = "n" * 40
BASE = "http://duetime.test"
WINDOW = 1.5


@pytest.fixture
async def live(store_url: str) -> AsyncIterator[tuple[httpx.AsyncClient, Engine]]:
    settings = Settings(
        admin_token=ADMIN,
        allow_private_targets=True,
        poll_interval_seconds=0.05,
        notify_window_seconds=WINDOW,
        node_id="notify-node",
    )
    store: Store = store_from_url(store_url)
    await store.open()
    await store.migrate()
    engine = Engine(store, settings, build_deliverers(settings, store))
    await engine.start()
    transport = httpx.ASGITransport(app=create_app(settings, store))
    try:
        async with httpx.AsyncClient(transport=transport, base_url=BASE) as client:
            yield client, engine
    finally:
        await engine.stop(2)
        await store.close()


async def tenant(api: httpx.AsyncClient, name: str) -> tuple[dict[str, str], str, str]:
    """(auth headers, signing secret, id) of a new tenant."""
    made = await api.post(
        "/v1/admin/tenants", json={"name": name}, headers={"authorization": f"Bearer {ADMIN}"}
    )
    assert made.status_code == 201, made.text
    headers = {"authorization": f"Bearer {made.json()['api_key']}"}
    found = (await api.get("/v1/tenant", headers=headers)).json()
    return headers, found["signing_secrets"][0]["secret"], found["id"]


async def until(check: Any, what: str, within: float = 20.0) -> None:
    deadline = asyncio.get_running_loop().time() + within
    while not await check():
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


def bodies(got: Received, event_type: str) -> list[dict[str, Any]]:
    return [r["body"] for r in got.on("/notify") if r["body"]["type"] == event_type]


async def test_settings_api(live: tuple[httpx.AsyncClient, Engine]) -> None:
    api, _ = live
    auth, _, _ = await tenant(api, "acme")
    path = "/v1/tenant/notifications"
    assert (await api.get(path, headers=auth)).status_code == 404
    target = {"type": "http", "url": "http://127.0.0.1:9/notify"}
    put = await api.put(
        path, headers=auth, json={"events": ["task.dead_lettered"], "target": target}
    )
    assert put.status_code == 200, put.text
    got = (await api.get(path, headers=auth)).json()
    assert got["events"] == ["task.dead_lettered"] and got["target"]["url"] == target["url"]
    for bad, field in (
        ({"events": ["target.nope"], "target": target}, "events.0"),
        ({"events": [], "target": target}, "events"),
        ({"events": ["task.dead_lettered"] * 2, "target": target}, "events"),
        ({"events": ["task.dead_lettered"], "target": {"type": "worker"}}, "target"),
        ({"events": ["task.dead_lettered"], "target": target, "extra": 1}, "extra"),
    ):
        refused = await api.put(path, headers=auth, json=bad)
        assert refused.status_code == 422, bad
        assert field in refused.text, (field, refused.text)
    assert (await api.get(path, headers=auth)).json() == got  # refusals changed nothing
    assert (await api.delete(path, headers=auth)).status_code == 204
    assert (await api.get(path, headers=auth)).status_code == 404
    assert (await api.delete(path, headers=auth)).status_code == 404


async def test_outage_sends_a_digest_signed_and_recorded(
    live: tuple[httpx.AsyncClient, Engine],
) -> None:
    api, engine = live
    auth, secret, harmed_id = await tenant(api, "harmed")
    quiet, _, _ = await tenant(api, "quiet")  # no settings: nothing is sent for it
    with receiver() as (base, got):
        put = await api.put(
            "/v1/tenant/notifications",
            headers=auth,
            json={
                "events": ["task.dead_lettered", "schedule.tick_missed"],
                "target": {"type": "http", "url": base + "/notify"},
            },
        )
        assert put.status_code == 200, put.text
        gone = {"type": "http", "url": base + "/gone"}  # 410: dead-lettered at once
        batch = {"tasks": [{"queue": "jobs", "target": gone} for _ in range(40)]}
        made = await api.post("/v1/tasks/batch", headers=auth, json=batch)
        assert made.status_code == 201, made.text
        ids = {t["id"] for t in made.json()["items"]}
        other = await api.post("/v1/tasks", headers=quiet, json={"target": gone})
        assert other.status_code == 201

        async def all_told() -> bool:
            return sum(b["count"] for b in bodies(got, "task.dead_lettered")) >= 40

        await until(all_told, "every dead letter to be told")
        # An event recorded in a transaction of its own (as a create refused over a quota).
        await engine.store.notification_record(
            harmed_id, "schedule.tick_missed", {"schedule_id": "sched-1", "missed": 3}
        )

        async def tick_told() -> bool:
            return bool(bodies(got, "schedule.tick_missed"))

        await until(tick_told, "the missed tick")
        requests = got.on("/notify")

    told = bodies(got, "task.dead_lettered")
    assert sum(b["count"] for b in told) == 40
    # An event, then at most one digest per window while dead letters keep coming, and the
    # last: not 40 bodies. (Under load the 40 deliveries to /gone may spread over seconds.)
    gone = [r["at"] for r in got.on("/gone")]
    windows = math.ceil((max(gone) - min(gone)) / WINDOW)
    assert len(told) <= 2 + windows, ([b["count"] for b in told], max(gone) - min(gone))
    digests = [b for b in told if b["digest"]]
    assert digests and all(len(b["items"]) <= 10 for b in told)
    for b in told:
        assert b["items_omitted"] == b["count"] - len(b["items"])
        assert {i["task_id"] for i in b["items"]} <= ids  # the quiet tenant's task is not here
        assert all(i["queue"] == "jobs" and "410" in i["error"] for i in b["items"])
    (tick,) = bodies(got, "schedule.tick_missed")
    assert tick["items"] == [{"schedule_id": "sched-1", "missed": 3}] and tick["count"] == 1
    # Signed per Standard Webhooks with the tenant's secret.
    for request in requests:
        Webhook(secret).verify(request["raw"], request["headers"])
    # Delivered through the engine: recorded tasks on the notifications queue, with attempts.
    recorded: list[dict[str, Any]] = []

    async def all_recorded() -> bool:  # the receiver answers before the completion is written
        listed = await api.get(f"/v1/tasks?queue={QUEUE}&limit=100", headers=auth)
        recorded[:] = listed.json()["items"]
        return {t["status"] for t in recorded} == {"succeeded"}

    await until(all_recorded, "the notification tasks to be recorded as succeeded")
    assert len(recorded) == len(requests)
    attempts = await api.get(f"/v1/tasks/{recorded[0]['id']}/attempts", headers=auth)
    assert attempts.json()["items"][0]["outcome"] == "succeeded"


async def test_sdk_calls(live: tuple[httpx.AsyncClient, Engine]) -> None:
    api, _ = live
    auth, _, _ = await tenant(api, "sdk")
    key = auth["authorization"].removeprefix("Bearer ")
    async with AsyncClient(BASE, key, transport=api._transport) as client:
        with pytest.raises(ApiNotFound):
            await client.get_notifications()
        made = await client.set_notifications(
            ["schedule.tick_missed"], http_target("http://127.0.0.1:9/hook")
        )
        assert made.events == ("schedule.tick_missed",)
        assert (await client.get_notifications()).target["url"] == "http://127.0.0.1:9/hook"
        with pytest.raises(ApiValidationError):
            await client.set_notifications(["nope"], http_target("http://127.0.0.1:9/hook"))
        await client.delete_notifications()
        with pytest.raises(ApiNotFound):
            await client.delete_notifications()
