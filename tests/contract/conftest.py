"""A real duetime API server on loopback, once per selected store, for the contract tests.

The server runs uvicorn in a thread with its own event loop (the store's connections belong to
that loop), on a socket bound to 127.0.0.1 by the OS's choice of port.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import httpx
import pytest
import uvicorn
from contract_server import ADMIN_TOKEN, Server
from cryptography.fernet import Fernet

from duetime.api.app import create_app
from duetime.config import Settings
from duetime.store import store_from_url

PG_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/test"


async def _pg_database(template: str) -> str:
    import os

    admin = os.environ.get("DUETIME_TEST_PG_URL", PG_ADMIN_URL)
    name = f"duetime_c_{uuid.uuid4().hex[:12]}"
    conn = await asyncpg.connect(admin, timeout=5)
    try:
        await conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    finally:
        await conn.close()
    return f"{admin.rpartition('/')[0]}/{name}"


@pytest.fixture(scope="module")
def server(
    store_backend: str, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    """The server on ``store_backend``: each backend ``--store`` selects (tests/conftest.py)."""
    if store_backend == "postgres":
        template = request.getfixturevalue("pg_template")
        url = asyncio.run(_pg_database(template))
    else:
        url = f"sqlite:///{Path(tmp_path_factory.mktemp('contract')) / 'duetime.db'}"
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    # A key ring of its own: fuzzed targets carry credentials, sealed with it.
    settings = Settings(
        admin_token=ADMIN_TOKEN,
        max_payload_bytes=4096,
        secret_keys=Fernet.generate_key().decode(),
    )
    holder: dict[str, uvicorn.Server] = {}
    started = threading.Event()

    async def main() -> None:
        store = store_from_url(url)
        await store.open()
        await store.migrate()
        try:
            app = create_app(settings, store)
            config = uvicorn.Config(app, log_level="warning", lifespan="off", access_log=False)
            holder["server"] = uvicorn.Server(config)
            started.set()
            await holder["server"].serve(sockets=[sock])
        finally:
            await store.close()

    thread = threading.Thread(target=lambda: asyncio.run(main()), daemon=True)
    thread.start()
    assert started.wait(30), "the contract server did not start"
    base = f"http://127.0.0.1:{port}"
    with httpx.Client(base_url=base, timeout=10) as client:
        deadline = time.monotonic() + 30  # a loaded machine may take seconds to start it
        while True:
            try:
                if client.get("/healthz").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "the contract server never answered /healthz"
            threading.Event().wait(0.05)
        resp = client.post(
            "/v1/admin/tenants",
            json={"name": "contract"},
            headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
        )
        assert resp.status_code == 201, resp.text
        api_key = resp.json()["api_key"]
    try:
        yield Server(base, api_key)
    finally:
        holder["server"].should_exit = True
        thread.join(30)
        sock.close()
