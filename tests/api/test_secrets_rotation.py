"""``duetime secrets rotate`` on both stores: after a new key is put first in the ring, every
stored credential — task targets, schedule templates, notification targets, named credentials,
values sealed by earlier versions' single key, and credentials stored in plain before sealing
existed — is sealed again with the new key, online and in batches, so the old key can go; a run
cut short is finished by running it again."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from api_helpers import make_tenant
from cryptography.fernet import Fernet
from typer.testing import CliRunner

from duetime import cli
from duetime.api.app import create_app
from duetime.config import Settings
from duetime.delivery import rotation
from duetime.delivery.sealing import TargetSealer
from duetime.secrets.keyring import KeyRing
from duetime.secrets.sealed import key_ids
from duetime.store import Store
from duetime.types import NewTask

OLD, NEW = Fernet.generate_key().decode(), Fernet.generate_key().decode()
PLAIN = ["Bearer task-tok-a1", "Bearer tmpl-tok-b2", "Bearer harm-tok-c3", "cred-tok-d4"]
NODE_TEXT = ["cert-key-g7", "sign-key-h8"]  # a client certificate's key, a signing key's
LEGACY = ["Bearer legacy-tok-e5", "legacy-guest-f6"]


@pytest.fixture
async def api(store: Store, tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    """The API of a node whose ring holds the old key only."""
    settings = Settings(admin_token="test-admin-token", secret_keys=OLD, data_dir=tmp_path)
    transport = httpx.ASGITransport(app=create_app(settings, store))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8080") as c:
        made = await make_tenant(c, "acme")
        c.headers.update(made.headers)
        yield c


async def _fill(api: httpx.AsyncClient, store: Store) -> str:
    """Credentials everywhere under the old key, and two rows from before key rings: one in
    plain, one sealed by the single key of earlier versions. Returns the tenant id."""
    hook = {"type": "http", "url": "https://hook.example/"}
    for _ in range(5):  # more than a batch
        resp = await api.post(
            "/v1/tasks", json={"target": {**hook, "headers": {"Authorization": PLAIN[0]}}}
        )
        assert resp.status_code == 201, resp.text
    tenant: str = (await api.get("/v1/tenant")).json()["id"]
    template = {**hook, "headers": {"Authorization": PLAIN[1]}}
    resp = await api.post("/v1/schedules", json={"every": "PT1H", "task": {"target": template}})
    assert resp.status_code == 201, resp.text
    harm = {**hook, "headers": {"Authorization": PLAIN[2]}}
    resp = await api.put(
        "/v1/tenant/notifications", json={"events": ["task.dead_lettered"], "target": harm}
    )
    assert resp.status_code == 200, resp.text
    resp = await api.put(
        "/v1/credentials/billing",
        json={"kind": "header", "header": "X-Api-Key", "value": PLAIN[3]},
    )
    assert resp.status_code == 201, resp.text
    # What the node seals for itself (no tenant): a TLS client certificate's private key and an
    # OIDC signing key's private half.
    node = TargetSealer(lambda: KeyRing([OLD]))
    await store.client_certificate_put(
        tenant,
        "edge",
        "-----BEGIN CERTIFICATE-----\n",
        node.seal_text(NODE_TEXT[0]),
        "ab" * 32,
        "CN=edge",
        datetime(2030, 1, 1, tzinfo=UTC),
    )
    assert await store.signing_key_add(
        "kid-old", 1, "ES256", {"kty": "EC"}, node.seal_text(NODE_TEXT[1]), 0
    )
    v1 = "dtenc1." + Fernet(OLD).encrypt(LEGACY[1].encode()).decode()
    await store.task_create_many(
        [
            NewTask(tenant_id=tenant, target={**hook, "headers": {"authorization": LEGACY[0]}}),
            NewTask(
                tenant_id=tenant,
                target={
                    "type": "amqp",
                    "url": f"amqp://guest:{v1}@mq.example/",
                    "routing_key": "q",
                },
            ),
        ]
    )
    return tenant


def _rotate(db: str, *args: str) -> tuple[int, dict[str, Any]]:
    result = CliRunner().invoke(
        cli.app,
        ["secrets", "rotate", "--db", db, *args],
        env={"DUETIME_SECRET_KEYS": f"{NEW},{OLD}"},
    )
    return result.exit_code, orjson.loads(result.stdout)


async def test_rotate_seals_every_stored_credential_with_the_new_key(
    api: httpx.AsyncClient,
    store: Store,
    store_url: str,
    stored: Callable[[], Awaitable[str]],
) -> None:
    tenant = await _fill(api, store)
    before = await stored()
    assert KeyRing([OLD]).current_id in key_ids(before) and "dtenc1." in before
    assert LEGACY[0].removeprefix("Bearer ") in before

    code, report = await asyncio.to_thread(_rotate, store_url, "--batch", "2")
    assert code == 0, report
    new_id = KeyRing([NEW]).current_id
    assert report["key_id"] == new_id and report["complete"]
    assert report["resealed"] == {
        "tasks": 7,
        "schedules": 1,
        "notifications": 1,
        "credentials": 1,
        "signing_keys": 1,
        "client_certificates": 1,
    }

    after = await stored()
    assert key_ids(after) == {new_id}, "nothing is left under the old key, or unsealed"
    for secret in PLAIN + LEGACY + NODE_TEXT:
        assert secret.removeprefix("Bearer ") not in after
    # The new key alone now opens every stored credential.
    newest = TargetSealer(lambda: KeyRing([NEW]))
    tasks = (await api.get("/v1/tasks?limit=100")).json()["items"]
    opened = [newest.open((await store.task_get(tenant, t["id"])).target, tenant) for t in tasks]  # type: ignore[union-attr]
    found = orjson.dumps(opened).decode()
    assert all(secret in found for secret in (PLAIN[0], *LEGACY))
    [credential] = await store.credential_list(tenant)
    assert PLAIN[3] in KeyRing([NEW]).open(tenant, credential.secret)
    certificate = await store.client_certificate_get(tenant, "edge")
    assert certificate is not None and newest.open_text(certificate.private_key) == NODE_TEXT[0]
    [key] = await store.signing_key_list()
    assert newest.open_text(key.private_key) == NODE_TEXT[1]

    code, again = await asyncio.to_thread(_rotate, store_url)
    assert code == 0 and set(again["resealed"].values()) == {0}, "a second run has nothing to do"


async def test_an_interrupted_rotation_is_finished_by_running_it_again(
    api: httpx.AsyncClient,
    store: Store,
    stored: Callable[[], Awaitable[str]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    await _fill(api, store)
    sealer = TargetSealer(lambda: KeyRing([NEW, OLD]))
    real = store.sealed_replace
    writes = 0

    async def dies_after_three(row: Any, new: str) -> bool:
        nonlocal writes
        if writes == 3:
            raise ConnectionError("node killed mid-rotation")
        writes += 1
        return await real(row, new)

    monkeypatch.setattr(store, "sealed_replace", dies_after_three)
    with pytest.raises(ConnectionError):
        await rotation.rotate(store, sealer, batch=2)
    half = key_ids(await stored())
    assert {KeyRing([NEW]).current_id, KeyRing([OLD]).current_id} <= half, "half done"
    monkeypatch.setattr(store, "sealed_replace", real)
    report = await rotation.rotate(store, sealer, batch=2)
    assert report.complete and report.resealed["tasks"] == 7 - 3
    assert key_ids(await stored()) == {KeyRing([NEW]).current_id}


async def test_a_value_no_key_opens_is_counted_and_left_alone(
    api: httpx.AsyncClient, store: Store, stored: Callable[[], Awaitable[str]]
) -> None:
    await _fill(api, store)
    report = await rotation.rotate(store, TargetSealer(lambda: KeyRing([NEW])), batch=50)
    assert not report.complete
    assert report.unopened["tasks"] == 6 and report.unopened["credentials"] == 1
    assert report.resealed["tasks"] == 1  # the one stored in plain is sealed all the same
    assert KeyRing([OLD]).current_id in key_ids(await stored())


def test_rotate_refuses_to_run_without_the_nodes_key_ring(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli.app,
        [
            "secrets",
            "rotate",
            "--db",
            f"sqlite:///{tmp_path / 'x.db'}",
            "--data-dir",
            str(tmp_path),
        ],
        env={},
    )
    assert result.exit_code == 1 and "no key ring" in result.output
    assert not (tmp_path / "secret.key").exists() and not (tmp_path / "x.db").exists()
