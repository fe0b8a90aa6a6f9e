"""The leader is frozen (SIGSTOP) longer than its leadership lease, another node takes over, then
the frozen one resumes (SIGCONT): it must not act on its stale leadership — not one promoter,
reaper or materializer round before it has renewed.

Frozen, a process cannot notice anything; what it can do on waking is compare its monotonic clock
(which runs on while a process is stopped) with when its lease was last granted. The first test
pins that rule in-process with a fake clock; the second plays it with real processes."""

from __future__ import annotations

import os
import signal
import time

import httpx

from duetime.bench.harness import Proc, metric_total, wait_until
from duetime.clock import FakeClock
from duetime.engine.leader import Leader
from duetime.store import Store
from duetime.testing.faultnodes import RETRY, WORKER_QUEUE, Processes
from duetime.testing.faultrun import create_all, receiver_attempts, spread, verify, wait_settled

TTL = 2.0


async def test_a_leader_past_its_lease_does_not_believe_it_leads(
    store: Store, clock: FakeClock
) -> None:
    frozen = Leader(store, "node-a", ttl_seconds=TTL, clock=clock)
    assert await frozen.run_once() == 1 and frozen.is_leader
    clock.advance(TTL / 2)
    assert frozen.is_leader, "within its lease a leader leads"
    clock.advance(TTL)  # no renewal ran: the process was stopped
    other = Leader(store, "node-b", ttl_seconds=TTL, clock=clock)
    assert await other.run_once() == 1, "the lease expired in the store: another node takes it"
    assert not frozen.is_leader, "woken past its lease, the old leader acted on stale leadership"
    assert await frozen.run_once() == 0 and not frozen.is_leader


LEADER_WORK = ("duetime_promoted_total", "duetime_lease_expirations_total")


def _leader_work(node: Proc) -> float:
    return sum(metric_total(node.url, name, "") + _plain(node, name) for name in LEADER_WORK)


def _plain(node: Proc, name: str) -> float:
    """A counter without labels (``metric_total`` sums only labelled samples)."""
    text = httpx.get(node.url + "/metrics", timeout=10).text
    return sum(float(line.split()[1]) for line in text.splitlines() if line.startswith(name + " "))


def _leads(node: Proc) -> bool:
    return _plain(node, "duetime_is_leader") == 1


def test_frozen_leader_resumes_without_acting_on_stale_leadership(
    pg_url: str, procs: Processes
) -> None:
    receiver = procs.receiver()
    a = procs.node(pg_url, "a")
    wait_until(lambda: _leads(a), 10, "a leads")
    b = procs.node(pg_url, "b")
    procs.worker(b.url)
    hook = {"type": "http", "url": f"{receiver.url}/hook"}
    common = {"retry": RETRY, "timeout_seconds": 2}
    # Two waves with a quiet gap between: the leader is frozen in the gap (so that what it did
    # before is all counted) and woken while the second wave falls due (so a stale round would
    # find work to do).
    first = spread(1200, hook, start_in=2, over=2, **common) + spread(
        600, {"type": "worker"}, start_in=2, over=2, name="noop", queue=WORKER_QUEUE, **common
    )
    second = spread(1200, hook, start_in=8, over=3, **common) + spread(
        600, {"type": "worker"}, start_in=8, over=3, name="noop", queue=WORKER_QUEUE, **common
    )
    began = time.monotonic()
    accepted = create_all([b.url], first + second)
    time.sleep(max(0.0, began + 5.5 - time.monotonic()))  # the first wave is done
    assert _leads(a) and not _leads(b)
    before = _leader_work(a)
    os.kill(a.popen.pid, signal.SIGSTOP)
    try:
        wait_until(lambda: _leads(b), 10, "b takes over while a is frozen")
        time.sleep(max(0.0, began + 8.5 - time.monotonic()))  # into the second wave
    finally:
        os.kill(a.popen.pid, signal.SIGCONT)
    assert not _leads(a), "a woke believing it still leads"
    wait_settled(pg_url, 60, procs.logs)
    assert _leads(b) and not _leads(a)
    assert _leader_work(a) == before, "the woken leader promoted or reaped on stale leadership"
    deliveries = receiver_attempts(receiver.url)
    deliveries.update(procs.handled())
    report = verify("leader frozen past its lease", pg_url, accepted, deliveries)
    assert report.statuses == {"succeeded": len(accepted)}, report.summary()
