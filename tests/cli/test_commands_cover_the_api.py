"""The CLI covers the API: task update/batch, tenant get/rotate-secret, admin tenant and key
management, workers, leases and declarative schedules, against the real API on SQLite with an
admin token (so tenants are real)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from duetime import cli
from duetime.api.app import create_app
from duetime.config import Settings
from duetime.sdk import Client
from duetime.store import Store, store_from_url

BASE = "http://127.0.0.1:8080"
ADMIN = "a" * 40


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
def run(store: Store) -> Iterator[Any]:
    transport = httpx.ASGITransport(app=create_app(Settings(admin_token=ADMIN), store))
    original = cli.common.client_factory
    cli.common.client_factory = lambda url, key: Client(BASE, key, transport=transport)
    runner = CliRunner()

    def invoke(*args: str, key: str, code: int = 0) -> Any:
        result = runner.invoke(cli.app, [*args, "--api-key", key], env={})
        assert result.exit_code == code, (args, result.output)
        return json.loads(result.stdout) if code == 0 and result.stdout.strip() else None

    try:
        yield invoke
    finally:
        cli.common.client_factory = original


def test_every_api_area_has_commands(run: Any) -> None:
    made = run("admin", "tenant-create", "acme", key=ADMIN)
    key = made["api_key"]
    second = run("admin", "key-create", made["id"], key=ADMIN)
    assert second["tenant_id"] == made["id"]
    assert run("tenant", "get", key=key)["id"] == made["id"]
    rotated = run("tenant", "rotate-secret", "--overlap-seconds", "60", key=key)
    assert len(rotated["signing_secrets"]) == 2

    batch = json.dumps(
        [
            {"target": {"type": "worker"}, "name": "job", "payload": {"n": 1}},
            {"target": {"type": "worker"}, "name": "job", "delay_seconds": 3600},
        ]
    )
    items = run("task", "batch", batch, key=key)["items"]
    assert [t["status"] for t in items] == ["ready", "scheduled"]
    changed = run("task", "update", items[1]["id"], "--priority", "7", "--label", "a=b", key=key)
    assert changed["priority"] == 7 and changed["labels"] == {"a": "b"}
    run("task", "update", items[1]["id"], key=key, code=2)  # nothing to change: usage

    [lease] = run("lease", "take", "--worker-id", "cli-w", "--name", "job", key=key)["items"]
    assert lease["task"]["id"] == items[0]["id"]
    assert run("lease", "heartbeat", lease["lease_id"], key=key)["cancel_requested"] is False
    done = run("lease", "complete", lease["lease_id"], "--result", '{"ok": true}', key=key)
    assert done["status"] == "ok"
    run("lease", "heartbeat", lease["lease_id"], key=key, code=4)  # no longer current
    workers = run("workers", key=key)["items"]
    assert [w["worker_id"] for w in workers] == ["cli-w"]

    declared = ["schedule", "create", "--key", "nightly", "--cron", "0 2 * * *", "--worker"]
    first = run(*declared, key=key)
    again = run(*declared, key=key)
    assert first["id"] == again["id"] and again["created"] is False

    run("admin", "key-delete", second["id"], key=ADMIN)
    run("tenant", "get", key=second["api_key"], code=1)  # refused: 401


def test_quota_target_and_release_commands(run: Any) -> None:
    made = run("admin", "tenant-create", "quota-co", key=ADMIN)
    key = made["api_key"]
    listed = run("admin", "tenant-list", key=ADMIN)["items"]
    assert made["id"] in [t["id"] for t in listed]
    set_ = run(
        "admin", "tenant-set", made["id"], "--max-pending-tasks", "5", "--weight", "3", key=ADMIN
    )
    assert set_["quotas"]["max_pending_tasks"] == 5 and set_["quotas"]["weight"] == 3
    cleared = run("admin", "tenant-set", made["id"], "--clear", "max_pending_tasks", key=ADMIN)
    assert cleared["quotas"]["max_pending_tasks"] is None and cleared["quotas"]["weight"] == 3
    run("admin", "tenant-set", made["id"], "--clear", "nope", key=ADMIN, code=2)
    got = run("admin", "tenant-get", made["id"], key=ADMIN)
    assert got["usage"] == {"pending_tasks": 0, "schedules": 0}
    assert run("targets", key=key) == {"items": []}

    run("task", "create", "--target", '{"type": "worker"}', "--name", "job", key=key)
    [lease] = run("lease", "take", "--worker-id", "cli-w", "--name", "job", key=key)["items"]
    released = run("lease", "release", lease["lease_id"], key=key)
    assert released["status"] == "ok" and released["task_status"] == "ready"
    run("admin", "tenant-delete", made["id"], key=ADMIN, code=4)  # a task is not ended


def test_lease_complete_and_fail_take_logs(run: Any, tmp_path: Any) -> None:
    key = run("admin", "tenant-create", "logs-co", key=ADMIN)["api_key"]
    ids = [
        run("task", "create", "--target", '{"type": "worker"}', "--max-attempts", "1", key=key)[
            "id"
        ]
        for _ in range(2)
    ]
    leases = run("lease", "take", "--worker-id", "cli-w", "--max-tasks", "2", key=key)["items"]
    by_task = {x["task"]["id"]: x["lease_id"] for x in leases}
    done = run("lease", "complete", by_task[ids[0]], "--logs", "line 1\nline 2", key=key)
    assert done["task_status"] == "succeeded"
    traceback = tmp_path / "trace.txt"
    traceback.write_text("Traceback:\n  boom\n")
    failed = run(
        "lease", "fail", by_task[ids[1]], "--error", "boom", "--logs", f"@{traceback}", key=key
    )
    assert failed["task_status"] == "failed"
    logs = [run("task", "attempts", i, key=key)["items"][0]["logs"] for i in ids]
    assert logs == ["line 1\nline 2", "Traceback:\n  boom\n"]
