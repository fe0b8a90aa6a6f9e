"""Two real nodes on PostgreSQL; one is killed with SIGKILL mid-run. Every task still succeeds,
none is lost, every repeated delivery is explained by a lease that expired, and the audit trail
holds every task's story once (written behind or moved: the survivor moves what is pending)."""

from __future__ import annotations

import asyncio
import collections
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from duetime.bench.harness import NodeOptions, receiver_records, running, start_node, start_receiver
from duetime.store.postgres.schema import connect as pg_connect
from duetime.testing.faultrun import receiver_attempts, verify

pytestmark = pytest.mark.acceptance

TASKS = 3000


def _all_tasks(base: str, status: str | None = None) -> list[dict[str, object]]:
    items: list[dict[str, object]] = []
    cursor = None
    while True:
        params: dict[str, str | int] = {"limit": 1000}
        if status:
            params["status"] = status
        if cursor:
            params["cursor"] = cursor
        page = httpx.get(f"{base}/v1/tasks", params=params, timeout=30).json()
        items.extend(page["items"])
        cursor = page.get("next_cursor")
        if not cursor:
            return items


def test_sigkill_one_node_loses_nothing(pg_url: str, tmp_path: Path) -> None:
    env = {
        "DUETIME_LEASE_GRACE_SECONDS": "1",
        "DUETIME_LEADER_TTL_SECONDS": "2",
        "DUETIME_POLL_INTERVAL_SECONDS": "0.2",
        "DUETIME_DISPATCH_CONCURRENCY": "64",
    }
    receiver = start_receiver(tmp_path)
    a = start_node(tmp_path, NodeOptions(db=pg_url, env=env), "a")
    b = start_node(tmp_path, NodeOptions(db=pg_url, env=env), "b")
    with running(receiver, a, b):
        # Far enough ahead that creating the tasks ends before the first is due.
        start = datetime.now(UTC) + timedelta(seconds=4)
        ids: list[str] = []
        for chunk in range(0, TASKS, 1000):
            tasks = [
                {
                    "target": {"type": "http", "url": f"{receiver.url}/hook"},
                    "payload": {"n": chunk + i},
                    # spread over ~3 s so the kill lands mid-run
                    "run_at": (start + timedelta(milliseconds=chunk + i)).isoformat(),
                    "timeout_seconds": 2,
                    "retry": {"max_attempts": 10, "initial_delay_seconds": 0.2, "jitter": 0},
                }
                for i in range(1000)
            ]
            made = httpx.post(f"{a.url}/v1/tasks/batch", json={"tasks": tasks}, timeout=60)
            assert made.status_code == 201, made.text
            ids.extend(t["id"] for t in made.json()["items"])
        time.sleep(max(0.0, (start - datetime.now(UTC)).total_seconds()) + 1.2)
        before_kill = int(httpx.get(f"{receiver.url}/_count").text)
        a.kill()
        assert 0 < before_kill < TASKS, f"the kill must land mid-run ({before_kill} delivered)"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            left = [t for t in _all_tasks(b.url) if t["status"] != "succeeded"]
            if not left:
                break
            time.sleep(0.5)
        assert not left, f"{len(left)} tasks not succeeded, e.g. {left[:3]}\n{b.log()[-3000:]}"

        records = receiver_records(receiver.url)
        per_task = collections.Counter(str(r["task_id"]) for r in records)
        assert set(per_task) == set(ids), "a task was never delivered"
        repeated = [t for t, n in per_task.items() if n > 1]
        for task_id in repeated:
            attempts = httpx.get(f"{b.url}/v1/tasks/{task_id}/attempts", timeout=10).json()
            outcomes = [x["outcome"] for x in attempts["items"]]
            assert "lease_expired" in outcomes, (task_id, outcomes)
            hook_ids = {r["webhook_id"] for r in records if r["task_id"] == task_id}
            assert len(hook_ids) == 1, "webhook-id changed between deliveries of one task"
        # fencing: exactly one accepted success per task
        for task in _all_tasks(b.url, "succeeded")[:200]:
            attempts = httpx.get(f"{b.url}/v1/tasks/{task['id']}/attempts", timeout=10).json()
            assert [x["outcome"] for x in attempts["items"]].count("succeeded") == 1
        # The fault suite's invariants, the audit trail's included: whatever the killed node
        # had written behind, or was moving into history, is there once (ADR 0008) ...
        verify("node killed", pg_url, ids, receiver_attempts(receiver.url))
        # ... and the survivor, the leader now, moves what is left pending.
        deadline = time.monotonic() + 30
        while (pending := asyncio.run(_pending(pg_url))) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert pending == 0, f"{pending} audit rows still pending\n{b.log()[-3000:]}"
        verify("node killed, history moved", pg_url, ids, receiver_attempts(receiver.url))


async def _pending(url: str) -> int:
    conn = await pg_connect(url)
    try:
        return int(await conn.fetchval("SELECT count(*) FROM history_pending"))
    finally:
        await conn.close()
