"""The SDK's named credential calls against the real API (create_app over httpx.ASGITransport)
on SQLite: typed requests in, the name, kind and fingerprint out (never a value); a target
naming one carries no secret; the sync client has the same calls."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from cryptography.fernet import Fernet

from duetime.api.app import create_app
from duetime.config import Settings
from duetime.sdk import (
    ApiNotFound,
    ApiValidationError,
    AsyncClient,
    BasicCredential,
    Client,
    HeaderCredential,
    http_target,
)
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
def app(store: Store, tmp_path: Path) -> object:
    return create_app(
        Settings(secret_keys=Fernet.generate_key().decode(), data_dir=tmp_path), store
    )


async def test_every_credential_call(app: object) -> None:
    async with AsyncClient(BASE, transport=httpx.ASGITransport(app=app)) as client:  # type: ignore[arg-type]
        made = await client.put_credential(
            "billing-api", HeaderCredential(header="X-Api-Key", value="sdk-key-7c7c")
        )
        assert made.created and made.kind == "header" and made.name == "billing-api"
        assert re.fullmatch(r"\*\*\*[0-9a-f]{8}", made.fingerprint)
        assert "sdk-key-7c7c" not in repr(HeaderCredential(header="X", value="sdk-key-7c7c"))
        replaced = await client.put_credential(
            "billing-api", BasicCredential(username="svc", password="sdk-pw-8d8d")
        )
        assert not replaced.created and replaced.kind == "basic"
        assert replaced.fingerprint != made.fingerprint
        assert [c.name for c in await client.list_credentials()] == ["billing-api"]
        assert (await client.get_credential("billing-api")).fingerprint == replaced.fingerprint
        task = await client.create_task(
            target=http_target("https://hook.example/", credential="billing-api")
        )
        assert task.target["auth"] == {"credential": "billing-api"}
        with pytest.raises(ApiValidationError):
            await client.put_credential("bad name!", HeaderCredential(header="A", value="v"))
        await client.delete_credential("billing-api")
        with pytest.raises(ApiNotFound):
            await client.get_credential("billing-api")


async def test_the_sync_client_has_the_credential_calls(app: object) -> None:
    def run() -> list[str]:
        with Client(BASE, transport=httpx.ASGITransport(app=app)) as client:  # type: ignore[arg-type]
            client.put_credential("a", HeaderCredential(header="Authorization", value="Bearer x1"))
            return [c.name for c in client.list_credentials()]

    assert await asyncio.to_thread(run) == ["a"]
