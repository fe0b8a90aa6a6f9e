"""PostgreSQL drops every connection of every node (three here), again and again, during a burst
of webhook and worker tasks (``pg_terminate_backend`` on this test's database only: the server is
shared). The nodes reconnect by themselves; nothing is lost, doubled or left without an end."""

from __future__ import annotations

import asyncio
import time

import httpx

from duetime.store.postgres.schema import connect as pg_connect
from duetime.testing.faultnodes import RETRY, WORKER_QUEUE, Processes
from duetime.testing.faultrun import create_all, receiver_attempts, spread, verify, wait_settled

HOOKS = 2000
JOBS = 1000


async def _terminate_all(url: str) -> int:
    conn = await pg_connect(url, timeout=10)
    try:
        killed = await conn.fetchval(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        return int(killed)
    finally:
        await conn.close()


def test_every_connection_killed_during_a_burst(pg_url: str, procs: Processes) -> None:
    receiver = procs.receiver()
    a = procs.node(pg_url, "a")
    b = procs.node(pg_url, "b")
    c = procs.node(pg_url, "c")
    procs.worker(c.url)
    hook = {"type": "http", "url": f"{receiver.url}/hook"}
    common = {"retry": RETRY, "timeout_seconds": 2}
    bodies = spread(HOOKS, hook, start_in=2, over=4, **common) + spread(
        JOBS,
        {"type": "worker"},
        start_in=2,
        over=4,
        name="noop",
        queue=WORKER_QUEUE,
        **common,
    )
    accepted = create_all([a.url, b.url, c.url], bodies)
    time.sleep(2.5)  # the burst is being delivered
    killed = []
    for _ in range(3):
        killed.append(asyncio.run(_terminate_all(pg_url)))
        time.sleep(0.8)
    assert all(n > 0 for n in killed), f"no connection to kill: {killed}"

    wait_settled(pg_url, 90, procs.logs)
    for node in (a, b, c):
        assert httpx.get(f"{node.url}/readyz", timeout=10).status_code == 200
    deliveries = receiver_attempts(receiver.url)
    deliveries.update(procs.handled())
    report = verify("connections killed", pg_url, accepted, deliveries, killed=killed)
    assert report.statuses == {"succeeded": HOOKS + JOBS}, report.summary()
