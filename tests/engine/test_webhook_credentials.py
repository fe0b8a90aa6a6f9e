"""Credentials through the whole node: created over the API (sealed when stored), opened by the
dispatcher's webhook deliverer when it sends, and nowhere in plain after: a receiver on loopback
gets the right ``Authorization`` from a named header credential, a named Basic credential and a
URL's user info (sent as Basic auth), the sealed headers and query values as given; a missing
credential fails the attempt at once, naming it; a receiver that echoes a credential back does
not get it into the store."""

from __future__ import annotations

import asyncio
import base64
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiohttp import web
from cryptography.fernet import Fernet
from multidict import CIMultiDict

from duetime.api.app import create_app
from duetime.clock import SystemClock
from duetime.config import Settings
from duetime.engine.engine import Engine
from duetime.node.wiring import build_deliverers, build_target_validator
from duetime.store import store_from_url

ADMIN = "test-admin-token"


@dataclass
class Receiver:
    base: str = ""
    got: list[tuple[str, CIMultiDict[str]]] = field(default_factory=list)

    def on(self, path: str) -> list[CIMultiDict[str]]:
        return [headers for p, headers in self.got if p == path]


@pytest.fixture
async def receiver(dials: list[Any]) -> AsyncIterator[Receiver]:
    rec = Receiver()

    async def ok(request: web.Request) -> web.Response:
        rec.got.append((request.path_qs, CIMultiDict(request.headers)))
        return web.json_response({"ok": True})

    async def echo(request: web.Request) -> web.Response:
        rec.got.append((request.path_qs, CIMultiDict(request.headers)))
        said = request.headers.get("Authorization", "")
        return web.json_response({"refused": said}, status=401)

    app = web.Application()
    app.router.add_post("/ok", ok)
    app.router.add_post("/echo", echo)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    rec.base = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"  # type: ignore[union-attr]
    try:
        yield rec
    finally:
        await runner.cleanup()


@pytest.fixture
async def node(store_url: str, tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    """A node over the test's store (either backend): the API in process, a running engine,
    private targets allowed (the receiver is on loopback), a tenant's key on the client."""
    settings = Settings(
        db=store_url,
        admin_token=ADMIN,
        allow_private_targets=True,
        secret_keys=Fernet.generate_key().decode(),
        data_dir=tmp_path,
        poll_interval_seconds=0.05,
        leader_ttl_seconds=3,
    )
    store = store_from_url(store_url, clock=SystemClock())
    await store.open()
    await store.migrate()
    engine = Engine(store, settings, build_deliverers(settings, store))
    await engine.start()
    app = create_app(settings, store, validate_target=build_target_validator(settings))
    try:
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1:8080"
        ) as client:
            made = await client.post(
                "/v1/admin/tenants",
                json={"name": "acme"},
                headers={"Authorization": f"Bearer {ADMIN}"},
            )
            client.headers["Authorization"] = f"Bearer {made.json()['api_key']}"
            yield client
    finally:
        await engine.stop(grace=2)
        await store.close()


async def ended(client: httpx.AsyncClient, task_id: str) -> dict[str, Any]:
    """The task once it has succeeded or failed (waits for the engine)."""
    for _ in range(500):
        body: dict[str, Any] = (await client.get(f"/v1/tasks/{task_id}")).json()
        if body["status"] in ("succeeded", "failed"):
            return body
        await asyncio.sleep(0.02)
    raise AssertionError(f"task {task_id} did not end: {body}")


async def send(client: httpx.AsyncClient, target: dict[str, Any]) -> dict[str, Any]:
    resp = await client.post(
        "/v1/tasks",
        json={"target": target, "retry": {"max_attempts": 3, "initial_delay_seconds": 0.05}},
    )
    assert resp.status_code == 201, resp.text
    return await ended(client, resp.json()["id"])


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


async def test_the_receiver_gets_each_credential_opened_and_nothing_is_kept_in_plain(
    node: httpx.AsyncClient,
    receiver: Receiver,
    stored: Callable[[], Awaitable[str]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    client = node
    put = await client.put(
        "/v1/credentials/billing-api",
        json={"kind": "header", "header": "Authorization", "value": "Bearer cred-tok-4d1e"},
    )
    assert put.status_code == 201, put.text
    put = await client.put(
        "/v1/credentials/legacy",
        json={"kind": "basic", "username": "svc", "password": "cred-pw-9b2f"},
    )
    assert put.status_code == 201, put.text

    named = await send(
        client,
        {
            "type": "http",
            "url": f"{receiver.base}/ok?from=named",
            "headers": {"Authorization": "Bearer replaced-by-credential"},
            "auth": {"credential": "billing-api"},
        },
    )
    assert named["status"] == "succeeded", named
    [headers] = receiver.on("/ok?from=named")
    assert headers.getall("Authorization") == ["Bearer cred-tok-4d1e"]

    by_basic = {
        "type": "http",
        "url": f"{receiver.base}/ok?from=basic",
        "auth": {"credential": "legacy"},
    }
    assert (await send(client, by_basic))["status"] == "succeeded"
    [headers] = receiver.on("/ok?from=basic")
    assert headers["Authorization"] == basic("svc", "cred-pw-9b2f")

    userinfo = receiver.base.replace("http://", "http://bob:url-pw-6a6a@")
    by_url = {"type": "http", "url": f"{userinfo}/ok?from=url"}
    assert (await send(client, by_url))["status"] == "succeeded"
    [headers] = receiver.on("/ok?from=url")
    assert headers["Authorization"] == basic("bob", "url-pw-6a6a")

    sealed = await send(
        client,
        {
            "type": "http",
            "url": f"{receiver.base}/ok?from=sealed&token=query-tok-3c3c",
            "headers": {"X-Api-Key": "api-key-8e8e", "X-Sig": "sig-7f7f"},
            "secret_headers": ["X-Sig"],
        },
    )
    assert sealed["status"] == "succeeded"
    [headers] = receiver.on("/ok?from=sealed&token=query-tok-3c3c")
    assert (headers["X-Api-Key"], headers["X-Sig"]) == ("api-key-8e8e", "sig-7f7f")

    echoed = await send(
        client,
        {"type": "http", "url": f"{receiver.base}/echo", "auth": {"credential": "billing-api"}},
    )
    assert echoed["status"] == "failed" and "cred-tok-4d1e" not in str(echoed)
    assert '"refused"' in (echoed["last_error"] or "") and "***" in echoed["last_error"]
    attempts = (await client.get(f"/v1/tasks/{echoed['id']}/attempts")).json()["items"]
    assert len(attempts) == 1  # a 401 is not retried
    assert "cred-tok-4d1e" not in str(attempts) and "***" in attempts[0]["response"]

    raw = await stored()
    # duetime's own lines (the receiver's access log is the receiver's business).
    logs = "\n".join(r.getMessage() for r in caplog.records if r.name.startswith("duetime"))
    assert "dead-lettered" in logs
    for secret in (
        "cred-tok-4d1e",
        "cred-pw-9b2f",
        "url-pw-6a6a",
        "query-tok-3c3c",
        "api-key-8e8e",
        "sig-7f7f",
        basic("bob", "url-pw-6a6a").split()[1],
    ):
        assert secret not in raw, f"{secret} stored in plain"
        assert secret not in logs, f"{secret} logged"


async def test_a_missing_credential_fails_the_attempt_at_once_naming_it(
    node: httpx.AsyncClient, receiver: Receiver
) -> None:
    task = await send(
        node, {"type": "http", "url": f"{receiver.base}/ok", "auth": {"credential": "nobody"}}
    )
    assert task["status"] == "failed" and task["attempts"] == 1
    assert "credential 'nobody' does not exist" in task["last_error"]
    assert receiver.got == [], "nothing is sent without its credential"
    # Put it, replay the task: it goes through.
    put = await node.put(
        "/v1/credentials/nobody", json={"kind": "header", "header": "X-Api-Key", "value": "k-1"}
    )
    assert put.status_code == 201
    assert (await node.post(f"/v1/tasks/{task['id']}/retry")).status_code == 200
    assert (await ended(node, task["id"]))["status"] == "succeeded"
    [headers] = receiver.on("/ok")
    assert headers["X-Api-Key"] == "k-1"
