"""The SDK against the real API (create_app) over httpx.ASGITransport, on a real SQLite store."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from duetime import errors
from duetime.api.app import create_app
from duetime.config import Settings
from duetime.sdk import (
    ApiConflict,
    ApiNotFound,
    ApiUnauthorized,
    ApiValidationError,
    AsyncClient,
    TaskSpec,
    http_target,
    worker_target,
)
from duetime.store import Store, store_from_url
from duetime.types import TaskStatus

ADMIN = "admin-token-for-tests"
BASE = "http://duetime.test"


@pytest.fixture
async def sqlite_store(sqlite_url: str) -> AsyncIterator[Store]:
    store = store_from_url(sqlite_url)
    await store.open()
    await store.migrate()
    try:
        yield store
    finally:
        await store.close()


@pytest.fixture
def transport(sqlite_store: Store) -> httpx.ASGITransport:
    settings = Settings(admin_token=ADMIN, allow_private_targets=True)
    return httpx.ASGITransport(app=create_app(settings, sqlite_store))


@pytest.fixture
async def admin(transport: httpx.ASGITransport) -> AsyncIterator[AsyncClient]:
    async with AsyncClient(BASE, ADMIN, transport=transport) as client:
        yield client


async def tenant_client(
    admin: AsyncClient, transport: httpx.ASGITransport, name: str
) -> AsyncClient:
    made = await admin.create_tenant(name)
    assert made.name == name and made.api_key.startswith("dt_")
    return AsyncClient(BASE, made.api_key, transport=transport)


async def test_task_life_through_the_sdk(
    admin: AsyncClient, transport: httpx.ASGITransport
) -> None:
    later = datetime.now(UTC) + timedelta(hours=1)
    async with await tenant_client(admin, transport, "billing") as client:
        fields: dict[str, Any] = {
            "target": http_target("http://127.0.0.1:9/hook", headers={"X-Thing": "1"}),
            "payload": {"n": 1},
            "run_at": later,
            "name": "send-report",
            "idempotency_key": "report-1",
            "retry": {"max_attempts": 3},
            "labels": {"team": "billing"},
        }
        task = await client.create_task(**fields)
        assert task.status is TaskStatus.SCHEDULED
        assert task.run_at == later.replace(microsecond=task.run_at.microsecond)
        assert task.run_at.tzinfo is not None
        assert task.retry.max_attempts == 3
        assert task.payload == {"n": 1}

        again = await client.create_task(**fields)  # the same request again
        assert again.id == task.id
        assert (task.created, again.created) == (True, False)
        with pytest.raises(ApiConflict) as clash:  # the key with other fields (SPEC §3)
            await client.create_task(
                target=http_target("http://127.0.0.1:9/hook"), idempotency_key="report-1"
            )
        assert task.id in str(clash.value)

        got = await client.get_task(task.id)
        assert got == task.model_copy(update={"created": None})

        moved = await client.update_task(task.id, priority=7, payload=None, labels={"t": "x"})
        assert (moved.priority, moved.payload, moved.labels) == (7, None, {"t": "x"})

        cancelled = await client.cancel_task(task.id)
        assert cancelled.status is TaskStatus.CANCELLED
        with pytest.raises(errors.Conflict) as conflict:
            await client.cancel_task(task.id)
        assert isinstance(conflict.value, ApiConflict)

        replayed = await client.retry_task(task.id)
        assert replayed.status is TaskStatus.READY
        assert (await client.list_attempts(task.id)).items == ()


async def test_batch_list_and_iterate(admin: AsyncClient, transport: httpx.ASGITransport) -> None:
    async with await tenant_client(admin, transport, "lister") as client:
        made = await client.create_tasks(
            [TaskSpec(target=worker_target(), name=f"job-{i}", queue="q") for i in range(7)]
        )
        assert [t.name for t in made] == [f"job-{i}" for i in range(7)]
        await client.create_task(target=worker_target(), name="other", queue="elsewhere")

        page = await client.list_tasks(queue="q", limit=3)
        assert len(page.items) == 3 and page.next_cursor is not None
        every = [t.id async for t in client.iter_tasks(queue="q", page_size=3)]
        assert sorted(every) == sorted(t.id for t in made)
        assert every == sorted(every, reverse=True)  # newest first, no repeats across pages

        ready = [t.id async for t in client.iter_tasks(status=["ready", "scheduled"])]
        assert len(ready) == 8


async def test_errors_from_the_real_api(admin: AsyncClient, transport: httpx.ASGITransport) -> None:
    async with (
        await tenant_client(admin, transport, "one") as one,
        await tenant_client(admin, transport, "two") as two,
    ):
        mine = await one.create_task(target=worker_target())
        with pytest.raises(errors.NotFound) as other_tenant:
            await two.get_task(mine.id)
        assert isinstance(other_tenant.value, ApiNotFound)
        assert other_tenant.value.status == 404

        with pytest.raises(ApiValidationError) as invalid:
            await one.create_task(target={"type": "http", "url": "ftp://x"})
        assert invalid.value.field == "target.url"
        assert invalid.value.status == 422

    async with AsyncClient(BASE, "dt_wrong", transport=transport) as stranger:
        with pytest.raises(errors.Unauthorized) as unauthorized:
            await stranger.get_tenant()
        assert isinstance(unauthorized.value, ApiUnauthorized)


async def test_tenant_and_key_administration(
    admin: AsyncClient, transport: httpx.ASGITransport
) -> None:
    made = await admin.create_tenant("keys")
    extra = await admin.create_api_key(made.id)
    assert extra.tenant_id == made.id
    async with AsyncClient(BASE, extra.api_key, transport=transport) as client:
        tenant = await client.get_tenant()
        assert (tenant.id, tenant.name) == (made.id, "keys")
        assert len(tenant.signing_secrets) == 1
        rotated = await client.rotate_signing_secret(overlap_seconds=60)
        assert len(rotated.signing_secrets) == 2
        assert rotated.signing_secrets[0].expires_at is not None
        assert rotated.signing_secrets[-1].secret.startswith("whsec_")

        await admin.delete_api_key(extra.id)
        with pytest.raises(errors.Unauthorized):
            await client.get_tenant()
    with pytest.raises(errors.NotFound):
        await admin.delete_api_key(extra.id)
    with pytest.raises(errors.NotFound):
        await admin.create_api_key("no-such-tenant")
    assert await admin.is_ready()


def test_sdk_models_cover_every_field_the_api_documents() -> None:
    from duetime.api import schemas
    from duetime.sdk import models

    pairs = [
        (models.Task, schemas.TaskOut),
        (models.Attempt, schemas.AttemptOut),
        (models.SigningSecret, schemas.SigningSecretOut),
        (models.TenantCreated, schemas.TenantCreatedOut),
        (models.ApiKeyCreated, schemas.ApiKeyOut),
    ]
    for sdk_model, api_model in pairs:
        assert set(api_model.model_fields) <= set(sdk_model.model_fields), sdk_model.__name__
    assert set(schemas.TenantOut.model_fields) <= set(models.Tenant.model_fields)
    # Same order too, so the CLI prints a task the way the API does.
    # (``created`` and ``flow`` are the SDK's own: they come from the create call's status code
    # and headers.)
    sdk_fields = [f for f in models.Task.model_fields if f not in ("created", "flow")]
    assert sdk_fields == list(schemas.TaskOut.model_fields)
    assert set(models.TaskSpec.model_fields) == set(schemas.TaskCreate.model_fields)
