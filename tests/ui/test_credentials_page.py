"""The Credentials view: the tenant's named credentials by name, kind and fingerprint — never a
value, nothing of another tenant's — and a task's target with its credentials as *** and a
fingerprint."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from cryptography.fernet import Fernet
from ui_helpers import ADMIN_TOKEN, BASE, Tenant, make_tenant, page

from duetime.api.app import create_app
from duetime.config import Settings
from duetime.store import Store


@pytest.fixture
async def keyed(store: Store, tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    """The dashboard's app with a key ring of its own."""
    settings = Settings(
        admin_token=ADMIN_TOKEN, secret_keys=Fernet.generate_key().decode(), data_dir=tmp_path
    )
    transport = httpx.ASGITransport(app=create_app(settings, store))
    async with httpx.AsyncClient(transport=transport, base_url=BASE) as c:
        yield c


async def test_credentials_show_names_and_fingerprints_only(keyed: httpx.AsyncClient) -> None:
    acme: Tenant = await make_tenant(keyed, "acme")
    globex: Tenant = await make_tenant(keyed, "globex")
    empty = await page(keyed, acme, "/ui/credentials")
    assert "This tenant has no named credentials" in empty
    assert 'href="/ui/credentials" class="on" aria-current="page"' in empty  # in the nav
    made = await keyed.put(
        "/v1/credentials/billing-api",
        json={"kind": "header", "header": "Authorization", "value": "Bearer ui-tok-9f9f"},
        headers=acme.bearer,
    )
    assert made.status_code == 201, made.text
    await keyed.put(
        "/v1/credentials/theirs",
        json={"kind": "basic", "username": "u", "password": "ui-pw-8e8e"},
        headers=globex.bearer,
    )
    html = await page(keyed, acme, "/ui/credentials")
    assert "billing-api" in html and made.json()["fingerprint"] in html
    assert "ui-tok-9f9f" not in html and "theirs" not in html and "dtenc" not in html

    task = await keyed.post(
        "/v1/tasks",
        json={"target": {"type": "http", "url": "https://hook.example/?sig=ui-sig-7d7d"}},
        headers=acme.bearer,
    )
    assert task.status_code == 201, task.text
    detail = await page(keyed, acme, f"/ui/tasks/{task.json()['id']}")
    assert "ui-sig-7d7d" not in detail and "dtenc" not in detail
    assert re.search(r"sig=\*\*\*[0-9a-f]{8}", detail)
