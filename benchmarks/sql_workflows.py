"""Workflows requested through the SQL API (docs/benchmarks.md "Workflows through SQL"), in one
process on a fresh migrated PostgreSQL database: a producer's connection calls
``duetime.create_workflow_v1`` and commits; the node's intake (``duetime.api.sql_intake``, woken
by the commit's NOTIFY, as on a running node) makes the workflow.

- one at a time: from the return of the producer's commit to the request read as ``made``
  (polled every 0.2 ms from a second connection), against ``POST /v1/workflows`` of the same
  body through the node's app in process (ASGI, no socket) — what the route itself costs;
- a burst: ``--burst`` requests committed back to back, then the time until the last is made
  (workflows per second made by one intake).

The workflow is a chain of three worker nodes.

::

    .venv/bin/python benchmarks/sql_workflows.py [--samples 200] [--burst 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import time

import asyncpg
import httpx
import orjson

from duetime.api.app import create_app
from duetime.api.sql_intake import WorkflowIntake
from duetime.bench.runs import as_role, machine, percentile, scratch_database
from duetime.clock import SystemClock
from duetime.config import Settings
from duetime.store.postgres.backend import PostgresStore

BODY = {
    "defaults": {"target": {"type": "worker"}, "queue": "wf"},
    "nodes": [
        {"ref": "a", "payload": {"n": 1}},
        {"ref": "b", "depends_on": ["a"]},
        {"ref": "c", "depends_on": ["b"]},
    ],
}
TOKEN = "bench-admin-token"


def _figures(name: str, ms: list[float]) -> str:
    return f"{name}: p50 {percentile(ms, 50):.2f} ms, p99 {percentile(ms, 99):.2f} ms"


async def _made(reader: asyncpg.Connection, request_id: object) -> None:
    while True:
        state = await reader.fetchval(
            "SELECT state FROM duetime.workflow_request_v1($1)", request_id
        )
        if state != "pending":
            assert state == "made", state
            return
        await asyncio.sleep(0.0002)


async def main(samples: int, burst: int) -> None:
    async with scratch_database("dt_sql_wf") as (url, role):
        await _measure(url, role, samples, burst)


async def _measure(url: str, role: str, samples: int, burst: int) -> None:
    store = PostgresStore(url)
    try:
        await store.open()
        await store.migrate()
        app = create_app(Settings(admin_token=TOKEN), store)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://duetime.test") as api:
            made = await api.post(
                "/v1/admin/tenants", json={"name": "bench"},
                headers={"Authorization": f"Bearer {TOKEN}"},
            )  # fmt: skip
            tenant = made.json()["id"]
            api.headers["Authorization"] = f"Bearer {made.json()['api_key']}"
            await store.sql_grant(tenant, role, max_payload_bytes=262144)
            producer = await asyncpg.connect(as_role(url, role))
            reader = await asyncpg.connect(as_role(url, role))
            intake = WorkflowIntake(store, app.state.services.creator, SystemClock())
            running = asyncio.ensure_future(intake.run())
            body = orjson.dumps(BODY).decode()
            try:
                http: list[float] = []
                sql: list[float] = []
                for _ in range(samples):
                    t0 = time.perf_counter()
                    resp = await api.post("/v1/workflows", content=body)
                    assert resp.status_code == 201, resp.text
                    http.append((time.perf_counter() - t0) * 1000)
                    found = await producer.fetchrow(
                        "SELECT id FROM duetime.create_workflow_v1($1::jsonb)", body
                    )
                    assert found is not None
                    t0 = time.perf_counter()
                    await _made(reader, found["id"])
                    sql.append((time.perf_counter() - t0) * 1000)
                t0 = time.perf_counter()
                last = None
                for _ in range(burst):
                    last = await producer.fetchval(
                        "SELECT id FROM duetime.create_workflow_v1($1::jsonb)", body
                    )
                committed = time.perf_counter() - t0
                await _made(reader, last)
                total = time.perf_counter() - t0
            finally:
                intake.stop()
                await running
                await producer.close()
                await reader.close()
        print(machine())
        print(_figures(f"POST /v1/workflows in process, 3 nodes ({samples})", http))
        print(_figures(f"SQL request's commit -> made, 3 nodes ({samples})", sql))
        print(
            f"burst of {burst} requests: committed in {committed:.2f} s, all made after "
            f"{total:.2f} s ({burst / total:,.0f} workflows/s)"
        )
    finally:
        await store.close()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--samples", type=int, default=200)
    ap.add_argument("--burst", type=int, default=1000)
    args = ap.parse_args()
    asyncio.run(main(args.samples, args.burst))
