"""The cold tier holds no credential on either store: a month of history exported to Parquet (a
schedule's revisions, with a credential changed; one written by an earlier version with a broker
URL sealed under its single key) and the tasks retention retires show credentials only as ***
and a fingerprint — nothing in the archive is to be opened, and it outlives every key."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

pytest.importorskip("pyarrow")

import pyarrow.parquet as pq
from cryptography.fernet import Fernet

from duetime.api.app import create_app
from duetime.clock import FakeClock
from duetime.config import Settings
from duetime.engine.history import HistoryConfig, HistoryMaintenance
from duetime.engine.leader import Leader
from duetime.history.archive import Archive
from duetime.history.retention import RetentionPolicy
from duetime.schedule.config import config_to_json
from duetime.store import Store
from duetime.types import (
    AttemptOutcome,
    ClaimRequest,
    Completion,
    NewSchedule,
    ScheduleConfig,
    TargetType,
    TaskStatus,
)

JAN = datetime(2030, 1, 10, tzinfo=UTC)
MAR = datetime(2030, 3, 20, tzinfo=UTC)
KEY = Fernet.generate_key().decode()
SECRETS = ("Bearer arch-tok-11aa", "Bearer arch-tok-22bb", "task-key-33cc", "v1-guest-44dd")


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(JAN)


@pytest.fixture
async def api(store: Store, tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    settings = Settings(admin_token="test-admin-token", secret_keys=KEY, data_dir=tmp_path)
    transport = httpx.ASGITransport(app=create_app(settings, store))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8080") as c:
        made = await c.post(
            "/v1/admin/tenants",
            json={"name": "acme"},
            headers={"Authorization": "Bearer test-admin-token"},
        )
        c.headers["Authorization"] = f"Bearer {made.json()['api_key']}"
        yield c


async def test_exported_history_and_retired_tasks_hold_no_credential(
    api: httpx.AsyncClient, store: Store, clock: FakeClock, tmp_path: Path
) -> None:
    tenant = (await api.get("/v1/tenant")).json()["id"]
    hook = {"type": "http", "url": "https://hook.example/"}
    resp = await api.post(
        "/v1/schedules",
        json={
            "every": "PT1H",
            "task": {"target": {**hook, "headers": {"Authorization": SECRETS[0]}}},
        },
    )
    assert resp.status_code == 201, resp.text
    changed = {**hook, "headers": {"Authorization": SECRETS[1]}}
    resp = await api.patch(f"/v1/schedules/{resp.json()['id']}", json={"task": {"target": changed}})
    assert resp.status_code == 200, resp.text
    # A revision an earlier version wrote: its broker URL sealed under the single key.
    v1 = "dtenc1." + Fernet(KEY).encrypt(SECRETS[3].encode()).decode()
    old = ScheduleConfig(
        every="PT1H", task={"target": {"type": "amqp", "url": f"amqp://u:{v1}@mq/"}}
    )
    await store.schedule_create(
        NewSchedule(
            tenant_id=tenant,
            config=old,
            anchor_at=JAN,
            materialized_until=JAN,
            actor="api",
            revision=config_to_json(old),
        )
    )
    resp = await api.post(
        "/v1/tasks", json={"target": {**hook, "headers": {"X-Api-Key": SECRETS[2]}}}
    )
    assert resp.status_code == 201, resp.text
    [lease] = await store.task_claim(
        ClaimRequest(
            worker_id="w", limit=1, tenant_id=tenant, target_types=frozenset({TargetType.HTTP})
        )
    )
    await store.task_complete_many(
        [
            Completion(
                task_id=lease.task.id, lease_id=lease.lease_id, outcome=AttemptOutcome.FAILED,
                started_at=clock.now(), duration_ms=1.0, error="HTTP 401", http_status=401,
                retry_delay_seconds=None, worker="w", status=TaskStatus.FAILED,
            )
        ]
    )  # fmt: skip

    clock.set(MAR)
    cold = Archive(str(tmp_path / "archive"))
    leader = Leader(store, "node-a", ttl_seconds=10, clock=clock)
    leader.is_leader = True
    config = HistoryConfig(defaults=RetentionPolicy(86400.0, 86400.0, 86400.0), hot_days=30)
    await HistoryMaintenance(store, leader, clock, config, cold).run_once()
    assert await store.task_get(tenant, lease.task.id) is None, "retired into the archive"

    files = sorted((tmp_path / "archive").rglob("*.parquet"))
    assert any(f.name.startswith("tasks-") for f in files) and any(
        f.name == "history.parquet" for f in files
    )
    exported = "\n".join(str(pq.read_table(f).to_pylist()) for f in files)
    for secret in SECRETS:
        assert secret.removeprefix("Bearer ") not in exported
    assert "dtenc" not in exported, "nothing sealed: the archive outlives every key"
    assert "***" in exported
