"""Helpers of the outbound identity tests (imported as ``identity_helpers``): the app served on a
loopback port in the test's own event loop, a loopback webhook receiver, and a claim-deliver step
through the real webhook deliverer."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx
import uvicorn
from aiohttp import web
from cryptography.fernet import Fernet
from fastapi import FastAPI

from duetime.api.app import create_app
from duetime.clock import FakeClock
from duetime.config import Settings
from duetime.delivery.base import Delivery, Outcome
from duetime.delivery.registry import target_validator
from duetime.delivery.webhook import WebhookDeliverer
from duetime.store import Store
from duetime.target_types import PUSH_TYPES
from duetime.types import ClaimRequest, Lease

ADMIN_TOKEN = "identity-test-admin-token-0123456789abcdef"
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


def real_now_clock() -> FakeClock:
    """A fake clock that starts at the real time: JWT libraries check ``iat``/``exp`` against
    the real clock."""
    return FakeClock(datetime.now(UTC).replace(microsecond=0))


def free_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


@dataclass
class Served:
    """The app on a loopback port: ``url``, ``client`` (httpx over the port), ``app``."""

    url: str
    client: httpx.AsyncClient
    app: FastAPI
    settings: Settings

    async def tenant(self, name: str = "acme") -> dict[str, str]:
        """A tenant's id and Bearer headers."""
        made = await self.client.post("/v1/admin/tenants", json={"name": name}, headers=ADMIN)
        assert made.status_code == 201, made.text
        body = made.json()
        return {"id": body["id"], "Authorization": f"Bearer {body['api_key']}"}


@contextlib.asynccontextmanager
async def served(store: Store, clock: FakeClock, **settings: Any) -> AsyncIterator[Served]:
    """``create_app`` over ``store`` under uvicorn on 127.0.0.1 (``public_url`` is that
    address unless given), in this event loop, checking targets as a node does."""
    sock = free_socket()
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    settings.setdefault("public_url", url)
    config = Settings(
        admin_token=ADMIN_TOKEN,
        allow_private_targets=True,
        secret_key=Fernet.generate_key().decode(),
        **settings,
    )
    app = create_app(config, store, validate_target=target_validator(config), clock=clock)
    server = uvicorn.Server(
        uvicorn.Config(app, log_level="warning", lifespan="off", access_log=False)
    )
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            assert not serving.done(), "the app did not start"
            await asyncio.sleep(0.01)
        async with httpx.AsyncClient(base_url=url, timeout=10) as client:
            yield Served(url, client, app, config)
    finally:
        server.should_exit = True
        await serving
        sock.close()


@dataclass
class Receiver:
    """A loopback webhook receiver: ``seen`` holds each request's headers and body; ``on``
    (when set) runs on each request and its return value is kept in ``results``."""

    url: str = ""
    seen: list[tuple[dict[str, str], bytes]] = field(default_factory=list)
    results: list[Any] = field(default_factory=list)
    on: Callable[[dict[str, str]], Awaitable[Any]] | None = None


@contextlib.asynccontextmanager
async def receiver() -> AsyncIterator[Receiver]:
    found = Receiver()

    async def hook(request: web.Request) -> web.Response:
        headers = {k.lower(): v for k, v in request.headers.items()}
        found.seen.append((headers, await request.read()))
        if found.on is not None:
            found.results.append(await found.on(headers))
        return web.json_response({"ok": True})

    app = web.Application()
    app.router.add_post("/hook", hook)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    sock = free_socket()
    site = web.SockSite(runner, sock)
    await site.start()
    found.url = f"http://127.0.0.1:{sock.getsockname()[1]}/hook"
    try:
        yield found
    finally:
        await runner.cleanup()


async def claim(store: Store, task_id: str) -> Lease:
    """Claim the push task ``task_id`` as the dispatcher would."""
    leases = await store.task_claim(
        ClaimRequest(worker_id="dispatcher", limit=10, target_types=PUSH_TYPES)
    )
    assert [lease.task.id for lease in leases] == [task_id]
    return leases[0]


async def deliver(deliverer: WebhookDeliverer, lease: Lease) -> Outcome:
    return await deliverer.deliver(Delivery(lease.task, lease.attempt))
