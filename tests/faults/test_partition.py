"""One node is cut off from PostgreSQL by a loopback TCP proxy during a burst, while the other
keeps going: first the proxy stalls (connections stay open, no byte passes: a partition that TCP
cannot see) longer than a lease, then it drops every connection and refuses new ones; each time
it heals. The stalled node's late completions are refused by their expired leases, the other node
delivers what it held, and every accepted task ends exactly once."""

from __future__ import annotations

import time
from urllib.parse import urlsplit, urlunsplit

import httpx

from duetime.bench.harness import wait_until
from duetime.testing.faultnodes import RETRY, WORKER_QUEUE, Processes
from duetime.testing.faultrun import create_all, receiver_attempts, spread, verify, wait_settled
from duetime.testing.tcpproxy import TcpProxy

HOOKS = 2000
JOBS = 1000


def _through(proxy: TcpProxy, url: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(
        parts._replace(netloc=f"{parts.username or 'postgres'}@127.0.0.1:{proxy.port}")
    )


def test_one_node_partitioned_from_postgres(pg_url: str, procs: Processes) -> None:
    parts = urlsplit(pg_url)
    proxy = TcpProxy(parts.hostname or "127.0.0.1", parts.port or 5432).start()
    try:
        receiver = procs.receiver()
        a = procs.node(pg_url, "a")
        b = procs.node(_through(proxy, pg_url), "b")
        procs.worker(b.url)
        hook = {"type": "http", "url": f"{receiver.url}/hook"}
        common = {"retry": RETRY, "timeout_seconds": 2}
        bodies = spread(HOOKS, hook, start_in=2, over=8, **common) + spread(
            JOBS, {"type": "worker"}, start_in=2, over=8, name="noop", queue=WORKER_QUEUE, **common
        )
        accepted = create_all([a.url, b.url], bodies)
        time.sleep(3)

        proxy.stall()  # b holds leases it cannot complete; they expire (2 s + 1 s grace)
        time.sleep(5)
        proxy.restore()
        time.sleep(1.5)
        proxy.cut()  # now every connection of b is dropped and new ones refused
        during = httpx.get(f"{b.url}/readyz", timeout=30)
        assert during.status_code == 503, during.text
        assert httpx.get(f"{a.url}/readyz", timeout=10).status_code == 200
        time.sleep(2)
        proxy.restore()

        wait_settled(pg_url, 90, procs.logs)
        wait_until(lambda: httpx.get(f"{b.url}/readyz").status_code == 200, 30, "b ready")
        deliveries = receiver_attempts(receiver.url)
        deliveries.update(procs.handled())
        report = verify("one node partitioned", pg_url, accepted, deliveries)
        assert report.statuses == {"succeeded": HOOKS + JOBS}, report.summary()
    finally:
        proxy.close()
