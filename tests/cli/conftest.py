"""Fixtures of the CLI tests: a ``CliRunner`` in an environment without the client's settings,
the real API in process (:func:`local_api`) and on loopback (:func:`live_api`)."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import uvicorn
from cli_helpers import LocalApi
from cryptography.fernet import Fernet
from typer.testing import CliRunner

from duetime import cli
from duetime.api.app import create_app
from duetime.bench.harness import wait_until
from duetime.clock import FakeClock
from duetime.config import Settings
from duetime.sdk import Client
from duetime.store import store_from_url

KEYS = Fernet.generate_key().decode()
"""The key ring of the CLI tests' APIs (so none makes a key file in the working directory)."""


@pytest.fixture
def runner(monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    for name in (
        "DUETIME_URL",
        "DUETIME_API_KEY",
        "DUETIME_API_KEY_FILE",
        "DUETIME_DB",
        "DUETIME_DATA_DIR",
    ):
        monkeypatch.delenv(name, raising=False)
    return CliRunner()


@pytest.fixture
def local_api(
    tmp_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> Iterator[LocalApi]:
    """The real API (dev mode, the test's clock) on SQLite, in process: every CLI command's
    client goes to it, whatever ``--url`` says. The CLI's blocking client runs its own event
    loop, which only SQLite's connections can serve (see :func:`live_api` for both stores)."""
    store = store_from_url(f"sqlite:///{tmp_path / 'cli.db'}", clock=clock)

    async def start() -> None:
        await store.open()
        await store.migrate()

    asyncio.run(start())
    transport = httpx.ASGITransport(app=create_app(Settings(secret_keys=KEYS), store))
    monkeypatch.setattr(
        cli.common, "client_factory", lambda url, key: Client(url, key, transport=transport)
    )
    try:
        yield LocalApi(store, transport)
    finally:
        asyncio.run(store.close())


@pytest.fixture
def live_api(store_url: str) -> Iterator[str]:
    """The real API (dev mode, no engine) on loopback, on each store ``--store`` selects: its
    URL. uvicorn runs in a thread with its own event loop, which the store's connections belong
    to, so the CLI reaches it over the network as it would a node."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    holder: dict[str, uvicorn.Server] = {}
    failed: list[BaseException] = []

    async def main() -> None:
        store = store_from_url(store_url)
        await store.open()
        await store.migrate()
        try:
            app = create_app(Settings(secret_keys=KEYS), store)
            config = uvicorn.Config(app, log_level="warning", lifespan="off", access_log=False)
            holder["server"] = uvicorn.Server(config)
            await holder["server"].serve(sockets=[sock])
        finally:
            await store.close()

    def run() -> None:
        try:
            asyncio.run(main())
        except BaseException as exc:  # handed to the test, which would otherwise only time out
            failed.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"

    def answers() -> bool:
        assert not failed, failed
        try:
            return httpx.get(f"{url}/readyz", timeout=2).is_success
        except httpx.TransportError:
            return False

    wait_until(answers, 30, "the API on loopback to answer /readyz")
    try:
        yield url
    finally:
        holder["server"].should_exit = True
        thread.join(30)
        sock.close()
