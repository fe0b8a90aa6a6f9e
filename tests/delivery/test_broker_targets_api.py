"""Broker targets through the whole node: created over the API, chosen by the deliverer registry,
published by the running engine to the real brokers; passwords never shown; a target type whose
extra is missing refused at create time."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from broker_helpers import unique
from nats.js.api import StreamConfig
from yarl import URL

from duetime.api.app import create_app
from duetime.clock import SystemClock
from duetime.config import Settings
from duetime.delivery import registry
from duetime.engine.engine import Engine
from duetime.node.wiring import build_deliverers, build_target_validator
from duetime.store import Store, store_from_url
from duetime.types import TargetType


@pytest.fixture
async def node(sqlite_url: str, tmp_path: Path) -> AsyncIterator[tuple[httpx.AsyncClient, Store]]:
    """A dev-mode node (private targets allowed): the API in-process and a running engine; its
    data directory (where the key that seals broker credentials is made) is the test's."""
    settings = Settings(
        db=sqlite_url, data_dir=tmp_path, poll_interval_seconds=0.1, leader_ttl_seconds=3
    )
    store = store_from_url(sqlite_url, clock=SystemClock())
    await store.open()
    await store.migrate()
    engine = Engine(store, settings, build_deliverers(settings, store))
    await engine.start()
    app = create_app(settings, store, validate_target=build_target_validator(settings))
    try:
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1:8080"
        ) as client:
            yield client, store
    finally:
        await engine.stop(grace=2)
        await store.close()


async def wait_status(client: httpx.AsyncClient, task_id: str, status: str) -> dict[str, Any]:
    body: dict[str, Any] = {}
    for _ in range(300):
        body = (await client.get(f"/v1/tasks/{task_id}")).json()
        if body["status"] == status:
            return body
        await asyncio.sleep(0.02)
    raise AssertionError(f"task {task_id} is {body.get('status')}, not {status}: {body}")


def test_every_broker_type_is_served_here() -> None:
    assert registry.served_types() == {
        TargetType.HTTP,
        TargetType.AMQP,
        TargetType.NATS,
        TargetType.REDIS,
    }


async def test_tasks_reach_all_three_brokers_and_passwords_stay_hidden(
    node: tuple[httpx.AsyncClient, Store],
    rabbit: Any,
    jetstream: Any,
    redis_client: Any,
    amqp_url: str,
    nats_url: str,
    redis_url: str,
) -> None:
    client, store = node
    queue = unique("q")
    await rabbit.queue_declare(queue, auto_delete=False)
    stream = unique("s").replace("-", "_")
    await jetstream.add_stream(StreamConfig(name=stream, subjects=[f"{stream}.>"]))
    key = unique("k")
    try:
        targets = {
            "amqp": {"type": "amqp", "url": amqp_url, "routing_key": queue},
            "nats": {"type": "nats", "url": nats_url, "subject": f"{stream}.due"},
            "redis": {"type": "redis", "url": redis_url, "stream": key},
        }
        ids = {}
        for kind, target in targets.items():
            resp = await client.post(
                "/v1/tasks", json={"target": target, "payload": {"kind": kind}}
            )
            assert resp.status_code == 201, resp.text
            ids[kind] = resp.json()["id"]
        for task_id in ids.values():
            await wait_status(client, task_id, "succeeded")
        msg = await rabbit.basic_get(queue, no_ack=True)
        assert msg.body == b'{"kind":"amqp"}'
        assert (await jetstream.stream_info(stream)).state.messages == 1
        [(_, entry)] = await redis_client.xrange(key)
        assert entry[b"duetime-task-id"] == ids["redis"].encode()
        # The shown URL hides the password the stored one keeps (guest:guest here), showing its
        # fingerprint instead.
        shown = URL((await client.get(f"/v1/tasks/{ids['amqp']}")).json()["target"]["url"])
        assert re.fullmatch(r"\*\*\*[0-9a-f]{8}", shown.password or "")
        assert shown.with_password(None) == URL(amqp_url).with_password(None)
        listed = (await client.get("/v1/tasks")).json()["items"]
        assert all(":guest@" not in t["target"].get("url", "") for t in listed)
        # The store holds it sealed (duetime.delivery.sealing), and yet it was delivered above.
        stored = await store.task_get("default", ids["amqp"])  # dev mode's one tenant
        assert stored is not None
        assert ":guest@" not in stored.target["url"] and ":dtenc2." in stored.target["url"]
    finally:
        await rabbit.queue_delete(queue)
        await jetstream.delete_stream(stream)
        await redis_client.delete(key)


async def test_a_refused_publish_is_retried_with_the_brokers_error(
    node: tuple[httpx.AsyncClient, Store], amqp_url: str
) -> None:
    client, _ = node
    target = {"type": "amqp", "url": amqp_url, "routing_key": unique("nobody-listens")}
    resp = await client.post(
        "/v1/tasks",
        json={
            "target": target,
            "retry": {"max_attempts": 2, "initial_delay_seconds": 0.05, "jitter": 0},
        },
    )
    assert resp.status_code == 201, resp.text
    task = await wait_status(client, resp.json()["id"], "failed")
    assert "returned unroutable: NO_ROUTE" in task["last_error"]
    attempts = (await client.get(f"/v1/tasks/{task['id']}/attempts")).json()["items"]
    assert [a["outcome"] for a in attempts] == ["failed", "failed"]


async def test_schedules_hide_broker_passwords_too(
    node: tuple[httpx.AsyncClient, Store],
) -> None:
    client, _ = node
    target = {"type": "redis", "url": "redis://:hunter2@127.0.0.1:6379/0", "stream": "s"}
    resp = await client.post("/v1/schedules", json={"every": "PT1H", "task": {"target": target}})
    assert resp.status_code == 201, resp.text
    assert "hunter2" not in resp.text
    schedule_id = resp.json()["id"]
    patched = await client.patch(
        f"/v1/schedules/{schedule_id}", json={"task": {"target": {**target, "stream": "t"}}}
    )
    assert patched.status_code == 200, patched.text
    revisions = await client.get(f"/v1/schedules/{schedule_id}/revisions")
    assert revisions.status_code == 200 and "hunter2" not in revisions.text
    assert re.search(r"redis://:\*\*\*[0-9a-f]{8}@127\.0\.0\.1:6379/0", revisions.text)


async def test_a_target_whose_extra_is_missing_is_a_422(
    node: tuple[httpx.AsyncClient, Store], monkeypatch: pytest.MonkeyPatch
) -> None:
    client, _ = node
    monkeypatch.setattr(registry, "_importable", lambda module: module != "nats")
    resp = await client.post(
        "/v1/tasks",
        json={"target": {"type": "nats", "url": "nats://127.0.0.1:4222", "subject": "a"}},
    )
    assert resp.status_code == 422, resp.text
    body = resp.json()
    assert body["field"] == "target.type"
    assert "pip install 'duetime[nats]'" in body["detail"]
    assert registry.served_types() == {TargetType.HTTP, TargetType.AMQP, TargetType.REDIS}


async def test_private_broker_urls_are_refused_at_create_outside_dev_mode(
    sqlite_url: str,
) -> None:
    settings = Settings(db=sqlite_url, admin_token="t")
    validate = build_target_validator(settings)
    from duetime.errors import ValidationError

    for target in (
        {"type": "amqp", "url": "amqp://10.0.0.1/", "routing_key": "q"},
        {"type": "nats", "url": "nats://localhost:4222", "subject": "a"},
        {"type": "redis", "url": "redis://[::1]:6379/0", "stream": "s"},
    ):
        with pytest.raises(ValidationError) as err:
            validate(target)
        assert err.value.field == "target.url"
        assert "DUETIME_ALLOW_PRIVATE_TARGETS=true" in err.value.detail
    lifted = build_target_validator(
        Settings(db=sqlite_url, admin_token="t", allow_private_targets=True)
    )
    lifted({"type": "amqp", "url": "amqp://10.0.0.1/", "routing_key": "q"})
