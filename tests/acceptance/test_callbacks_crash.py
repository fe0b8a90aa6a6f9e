"""Two real nodes on PostgreSQL deliver a burst of failing tasks, each with an ``on_failure``
callback, for a tenant that asked for dead-letter notifications; one node is killed with
SIGKILL mid-burst. Every expected callback and notification arrives at least once, and none
arrives without its cause (a task of the burst that failed)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from duetime.bench.harness import NodeOptions, receiver_records, running, start_node, start_receiver

pytestmark = pytest.mark.acceptance

TASKS = 400
ADMIN = "acceptance-admin-token-of-32-chars-at-least"


def test_sigkill_during_a_failing_burst_loses_no_callback_nor_notification(
    pg_url: str, tmp_path: Path
) -> None:
    env = {
        "DUETIME_ADMIN_TOKEN": ADMIN,
        "DUETIME_LEASE_GRACE_SECONDS": "1",
        "DUETIME_LEADER_TTL_SECONDS": "2",
        "DUETIME_POLL_INTERVAL_SECONDS": "0.2",
        "DUETIME_DISPATCH_CONCURRENCY": "32",
        "DUETIME_NOTIFY_WINDOW_SECONDS": "1",
        "DUETIME_ALLOW_PRIVATE_TARGETS": "true",
    }
    receiver = start_receiver(tmp_path)
    a = start_node(tmp_path, NodeOptions(db=pg_url, env=env), "a")
    b = start_node(tmp_path, NodeOptions(db=pg_url, env=env), "b")
    with running(receiver, a, b):
        admin = {"authorization": f"Bearer {ADMIN}"}
        made = httpx.post(f"{a.url}/v1/admin/tenants", json={"name": "burst"}, headers=admin)
        auth = {"authorization": f"Bearer {made.json()['api_key']}"}
        quiet = httpx.post(f"{a.url}/v1/admin/tenants", json={"name": "quiet"}, headers=admin)
        quiet_auth = {"authorization": f"Bearer {quiet.json()['api_key']}"}
        settings = {
            "events": ["task.dead_lettered"],
            "target": {"type": "http", "url": f"{receiver.url}/body/notify"},
        }
        put = httpx.put(f"{a.url}/v1/tenant/notifications", json=settings, headers=auth)
        assert put.status_code == 200, put.text
        # Refused (410: no retry, and a healthy answer for the origin's circuit), slowly
        # enough that the kill lands mid-burst.
        failing = {"type": "http", "url": f"{receiver.url}/status/410/100"}
        refused = {"type": "http", "url": f"{receiver.url}/status/410"}
        callback = {"target": {"type": "http", "url": f"{receiver.url}/body/callback"}}
        ids: set[str] = set()
        for start in range(0, TASKS, 200):
            tasks = [
                {
                    "target": refused if (start + i) % 2 else failing,
                    "queue": "burst",
                    "timeout_seconds": 2,
                    "retry": {"max_attempts": 1},
                    "on_failure": callback,
                }
                for i in range(200)
            ]
            resp = httpx.post(f"{a.url}/v1/tasks/batch", json={"tasks": tasks}, headers=auth)
            assert resp.status_code == 201, resp.text
            ids.update(t["id"] for t in resp.json()["items"])
        other = httpx.post(f"{a.url}/v1/tasks", json={"target": refused}, headers=quiet_auth)
        assert other.status_code == 201
        deadline = time.monotonic() + 30
        while int(httpx.get(f"{receiver.url}/_count").text) < TASKS // 4:
            assert time.monotonic() < deadline, "the burst did not start"
            time.sleep(0.02)
        a.kill()

        def arrived() -> tuple[dict[str, int], dict[str, dict[str, Any]]]:
            records = receiver_records(receiver.url)
            callbacks: dict[str, int] = {}
            notes: dict[str, dict[str, Any]] = {}
            for r in records:
                body: Any = r["body"]
                if r["path"] == "/body/callback":
                    callbacks[body["task_id"]] = callbacks.get(body["task_id"], 0) + 1
                    assert body["status"] == "failed" and body["callback"] == "on_failure"
                elif r["path"] == "/body/notify":
                    notes[body["id"]] = body  # at least once: a repeat carries the same id
            return callbacks, notes

        end = time.monotonic() + 60
        while True:
            callbacks, notes = arrived()
            told = sum(n["count"] for n in notes.values())
            if (set(callbacks) >= ids and told >= TASKS) or time.monotonic() > end:
                break
            time.sleep(0.5)
        assert set(callbacks) == ids, (len(set(callbacks)), len(ids), b.log()[-3000:])
        assert told == TASKS, (told, [n["count"] for n in notes.values()])
        for note in notes.values():
            assert note["type"] == "task.dead_lettered" and note["tenant_id"] != ""
            assert {item["task_id"] for item in note["items"]} <= ids  # none without a cause
            assert note["items_omitted"] == note["count"] - len(note["items"])
        listed = httpx.get(
            f"{b.url}/v1/tasks", params={"queue": "burst", "limit": 1000}, headers=auth
        ).json()["items"]
        burst = [t for t in listed if t["id"] in ids]
        assert {t["status"] for t in burst} == {"failed"} and len(burst) == TASKS
        # The callbacks are tasks too (on the ended task's queue), delivered and recorded.
        made = [t for t in listed if t["labels"].get("duetime.callback") == "on_failure"]
        assert {t["labels"]["duetime.callback_of"] for t in made} == ids
