"""Two real nodes on PostgreSQL run a three-level workflow (a root, a fan-out of 1,000 and a
fan-in, webhooks carrying their parents' results); one node is killed with SIGKILL mid-run. No
node is lost, none runs twice except after a lease that expired — checked from the database —
and every child saw its parents' results."""

from __future__ import annotations

import asyncio
import collections
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from duetime.bench.harness import NodeOptions, receiver_records, running, start_node, start_receiver
from duetime.store.postgres.schema import connect as pg_connect

pytestmark = pytest.mark.acceptance

FANOUT = 1000


async def _attempts(url: str, ids: list[str]) -> dict[str, list[str]]:
    conn = await pg_connect(url)
    try:
        rows = await conn.fetch(
            "SELECT task_id::text AS id, outcome FROM attempts WHERE task_id = ANY($1::uuid[]) "
            "ORDER BY task_id, number",
            ids,
        )
    finally:
        await conn.close()
    found: dict[str, list[str]] = collections.defaultdict(list)
    for row in rows:
        found[row["id"]].append(row["outcome"])
    return found


def test_sigkill_mid_workflow_loses_no_node_and_runs_none_twice(
    pg_url: str, tmp_path: Path
) -> None:
    env = {
        "DUETIME_LEASE_GRACE_SECONDS": "1",
        "DUETIME_LEADER_TTL_SECONDS": "2",
        "DUETIME_POLL_INTERVAL_SECONDS": "0.2",
        "DUETIME_DISPATCH_CONCURRENCY": "64",
        "DUETIME_ALLOW_PRIVATE_TARGETS": "true",
    }
    receiver = start_receiver(tmp_path)
    a = start_node(tmp_path, NodeOptions(db=pg_url, env=env), "a")
    b = start_node(tmp_path, NodeOptions(db=pg_url, env=env), "b")
    with running(receiver, a, b):
        slow = {"type": "http", "url": f"{receiver.url}/body/delay/150"}
        fast = {"type": "http", "url": f"{receiver.url}/body/echo"}
        nodes: list[dict[str, Any]] = [{"ref": "root", "target": fast}]
        nodes += [
            {"ref": f"part-{i}", "depends_on": ["root"], "target": slow, "payload": i}
            for i in range(FANOUT)
        ]
        nodes.append({"ref": "sink", "depends_on": [f"part-{i}" for i in range(FANOUT)]})
        body = {
            "name": "crash",
            "defaults": {
                "target": fast,
                "parents_in_body": True,
                "timeout_seconds": 2,
                "retry": {"max_attempts": 10, "initial_delay_seconds": 0.2, "jitter": 0},
            },
            "nodes": nodes,
        }
        made = httpx.post(f"{a.url}/v1/workflows", json=body, timeout=60)
        assert made.status_code == 201, made.text
        wf = made.json()
        ids = {n["ref"]: n["task_id"] for n in wf["nodes"]}
        deadline = time.monotonic() + 30
        while int(httpx.get(f"{receiver.url}/_count").text) < 200:
            assert time.monotonic() < deadline, "the fan-out did not start"
            time.sleep(0.05)
        a.kill()
        delivered = int(httpx.get(f"{receiver.url}/_count").text)
        assert delivered < FANOUT, f"the kill must land mid-run ({delivered} delivered)"

        end = time.monotonic() + 90
        found: dict[str, Any] = {}
        while time.monotonic() < end:  # the survivor answers the wait when every node ended
            found = httpx.get(
                f"{b.url}/v1/workflows/{wf['id']}", params={"wait": 30}, timeout=40
            ).json()
            if found["status"] != "running":
                break
        assert found["status"] == "succeeded", (found.get("counts"), b.log()[-3000:])

        attempts = asyncio.run(_attempts(pg_url, list(ids.values())))
        assert set(attempts) == set(ids.values()), "a node never ran"
        for task_id, outcomes in attempts.items():
            assert outcomes.count("succeeded") == 1, (task_id, outcomes)
            if len(outcomes) > 1:  # run again only because its lease expired
                assert "lease_expired" in outcomes, (task_id, outcomes)

        records = receiver_records(receiver.url)
        bodies: dict[str, dict[str, Any]] = {}
        for r in records:
            if r["body"] is not None:
                bodies[str(r["task_id"])] = r["body"]  # type: ignore[assignment]
        for i in (0, 500, FANOUT - 1):
            seen = bodies[ids[f"part-{i}"]]
            assert seen["payload"] == i
            (parent,) = seen["parents"]
            assert parent["ref"] == "root" and parent["result"] == {"echo": ids["root"]}
        sink = bodies[ids["sink"]]
        assert len(sink["parents"]) == FANOUT
        assert all(p["result"] == {"echo": p["id"]} for p in sink["parents"])
        assert [p["ref"] for p in sink["parents"][:2]] == ["part-0", "part-1"]
