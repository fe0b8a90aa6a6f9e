"""A workflow requested through the SQL API by a real producer connection reaches a real
``duetime serve`` node on PostgreSQL at the commit: the node makes it (webhook nodes included,
checked by the node as POST /v1/workflows checks them) and runs it to its end, each child seeing
its parent's result."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

import asyncpg
import httpx
import orjson
import pytest

from duetime.bench.harness import NodeOptions, receiver_records, running, start_node, start_receiver
from duetime.bench.runs import as_role
from duetime.store.postgres.schema import connect as pg_connect

pytestmark = pytest.mark.acceptance


async def test_a_committed_request_is_made_and_run_by_the_node(pg_url: str, tmp_path: Path) -> None:
    env = {"DUETIME_ALLOW_PRIVATE_TARGETS": "true", "DUETIME_POLL_INTERVAL_SECONDS": "5"}
    receiver = start_receiver(tmp_path)
    node = start_node(tmp_path, NodeOptions(db=pg_url, env=env))
    role = f"dt_wf_{uuid.uuid4().hex[:10]}"
    owner = await pg_connect(pg_url)
    with running(receiver, node):
        async with httpx.AsyncClient(base_url=node.url, timeout=40) as client:
            assert (await client.get("/v1/tasks")).status_code == 200  # the dev tenant made
        await owner.execute(f"CREATE ROLE {role} LOGIN")
        try:
            await owner.execute("SELECT sql_api_grant($1, 'default')", role)
            producer = await asyncpg.connect(as_role(pg_url, role))
            try:
                echo = {"type": "http", "url": f"{receiver.url}/body/echo"}
                body = {
                    "name": "from-sql",
                    "defaults": {"target": echo, "parents_in_body": True},
                    "nodes": [
                        {"ref": "first", "payload": {"n": 1}},
                        {"ref": "second", "depends_on": ["first"]},
                    ],
                }
                async with producer.transaction():
                    made = await producer.fetchrow(
                        "SELECT * FROM duetime.create_workflow_v1($1::jsonb)",
                        orjson.dumps(body).decode(),
                    )
                committed = time.monotonic()
                assert made is not None and made["created"]
                while True:
                    state = await producer.fetchrow(
                        "SELECT * FROM duetime.workflow_request_v1($1)", made["id"]
                    )
                    assert state is not None
                    if state["state"] != "pending" or time.monotonic() - committed > 20:
                        break
                    await asyncio.sleep(0.01)
                # Woken by the commit's NOTIFY, not by the intake's 5-second poll.
                assert time.monotonic() - committed < 4
                async with httpx.AsyncClient(base_url=node.url, timeout=40) as client:
                    ended = (await client.get(f"/v1/workflows/{made['id']}?wait=30")).json()
            finally:
                await producer.close()
        finally:
            await owner.execute(f"DROP OWNED BY {role}")
            await owner.execute(f"DROP ROLE {role}")
            await owner.close()
        records = receiver_records(receiver.url)
    assert state["state"] == "made" and state["workflow_id"] == made["id"]
    assert ended["status"] == "succeeded", ended
    by_ref = {n["ref"]: n for n in ended["nodes"]}
    second = by_ref["second"]["task_id"]
    delivered = [r for r in records if r.get("task_id") == second]
    assert delivered, records[:3]
    (parent,) = delivered[0]["body"]["parents"]  # type: ignore[index]
    assert parent["ref"] == "first" and parent["result"] == {"echo": by_ref["first"]["task_id"]}
