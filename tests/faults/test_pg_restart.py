"""The PostgreSQL server itself goes down during a burst — crashed (``pg_ctl stop -m immediate``)
and, later, shut down cleanly — and comes back. A throwaway cluster of this test's own, since
the machine's shared server serves other tests. The nodes answer 503 meanwhile, reconnect by
themselves, and every accepted task ends exactly once."""

from __future__ import annotations

import time
from collections.abc import Callable

import httpx

from duetime.bench.harness import wait_until
from duetime.testing.faultnodes import RETRY, WORKER_QUEUE, Processes
from duetime.testing.faultrun import create_all, receiver_attempts, spread, verify, wait_settled
from duetime.testing.pgcluster import PgCluster

HOOKS = 2000
JOBS = 1000


def test_postgres_restarted_during_a_burst(
    pg_cluster: PgCluster, procs: Processes, migrated: Callable[[str], None]
) -> None:
    db = pg_cluster.create_database("faults")
    migrated(db)
    receiver = procs.receiver()
    a = procs.node(db, "a")
    b = procs.node(db, "b")
    procs.worker(a.url)
    hook = {"type": "http", "url": f"{receiver.url}/hook"}
    common = {"retry": RETRY, "timeout_seconds": 2}
    bodies = spread(HOOKS, hook, start_in=2, over=5, **common) + spread(
        JOBS, {"type": "worker"}, start_in=2, over=5, name="noop", queue=WORKER_QUEUE, **common
    )
    accepted = create_all([a.url, b.url], bodies)
    time.sleep(2.5)

    pg_cluster.stop("immediate")  # a crash: no goodbye to any session
    during = httpx.post(f"{a.url}/v1/tasks", json={"target": hook}, timeout=30)
    assert during.status_code == 503, during.text
    assert "retry-after" in during.headers
    time.sleep(1.5)
    pg_cluster.start()
    wait_until(lambda: httpx.get(f"{a.url}/readyz").status_code == 200, 30, "a ready again")
    time.sleep(0.5)
    pg_cluster.restart("fast")  # and a clean shutdown, sessions told to go

    wait_settled(db, 90, procs.logs)
    for node in (a, b):
        wait_until(
            lambda n=node: httpx.get(f"{n.url}/readyz").status_code == 200, 30, "nodes ready"
        )
    deliveries = receiver_attempts(receiver.url)
    deliveries.update(procs.handled())
    report = verify("PostgreSQL restarted", db, accepted, deliveries)
    assert report.statuses == {"succeeded": HOOKS + JOBS}, report.summary()
