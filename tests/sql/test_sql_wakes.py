"""A task created through the SQL API reaches a worker's waiting long poll at the commit of the
transaction that made it, woken by the NOTIFY the function sent (polls here wake on the store's
signal only, so a poll that returns early was woken by it)."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest
from fastapi import FastAPI
from sql_helpers import MAX_PAYLOAD_BYTES, Roles

from duetime.lifecycle import lease as leasing
from duetime.store.postgres.backend import PostgresStore


async def test_a_commit_hands_the_task_to_a_waiting_long_poll(
    store: PostgresStore,
    roles: Roles,
    node: FastAPI,
    api: tuple[httpx.AsyncClient, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(leasing, "POLL_SLICE_SECONDS", 3600.0)
    client, tenant = api
    role = await roles.make()
    await store.sql_grant(tenant, role, max_payload_bytes=MAX_PAYLOAD_BYTES)
    conn = await roles.connect(role)
    try:
        await client.post("/v1/queues/jobs/lease", json={"worker_id": "w", "wait_seconds": 0})
        poll = asyncio.ensure_future(
            client.post("/v1/queues/jobs/lease", json={"worker_id": "w", "wait_seconds": 20})
        )
        deadline = time.monotonic() + 10
        while sum(node.state.services.leases._waiting.values()) < 1:
            assert time.monotonic() < deadline, "the poll never waited"
            await asyncio.sleep(0.005)
        async with conn.transaction():
            made = await conn.fetchrow("SELECT * FROM duetime.create_task_v1(queue => 'jobs')")
            await asyncio.sleep(0.3)
            assert not poll.done()  # nothing is visible, nor announced, before the commit
        committed = time.monotonic()
        resp = await asyncio.wait_for(poll, 15)
        assert time.monotonic() - committed < 10
    finally:
        await conn.close()
    assert resp.status_code == 200, resp.text
    (got,) = resp.json()["leases"]
    assert got["task"]["id"] == str(made["id"]) and got["attempt"] == 1
