"""Webhook targets that misbehave during a burst, on two PostgreSQL nodes: targets that hang,
reset the connection, answer slowly (within and past the timeout), or answer garbage — bytes that
are not HTTP, a megabyte of headers, a body full of NUL bytes and invalid UTF-8. Each bad answer
is one failed or timed-out attempt with a clean error; the nodes keep delivering everyone else,
and every task ends exactly once (recovered, or failed after its attempts)."""

from __future__ import annotations

import collections

import httpx

from duetime.bench.harness import wait_until
from duetime.testing.faultnodes import Processes
from duetime.testing.faultrun import create_all, receiver_attempts, spread, verify, wait_settled

PER_MODE = 250
# Every mode shares one origin, half of them never recovering: with circuit breakers on, that
# origin would stay open (and its good tasks held) for growing cool-downs. This test is about
# each bad answer being one clean attempt, so the breaker is out of the way here; breakers have
# their own tests (tests/engine/test_circuits.py).
NO_BREAKER = {"DUETIME_CIRCUIT_FAILURE_THRESHOLD": "1000000"}
# (path, attempts) — bad=1: misbehaves on the first attempt only, then answers 204.
MODES = [
    ("hang?bad=1", 3),
    ("reset?bad=1", 3),
    ("slow?delay=0.3", 3),
    ("slow?delay=2.5&bad=1", 3),
    ("nonhttp?bad=1", 3),
    ("hugeheaders?bad=1", 3),
    ("nul?bad=1", 3),
    ("nul?status=200", 3),
    ("nul", 2),  # never recovers: fails after its attempts
    ("hang", 2),
]


def test_misbehaving_receivers_during_a_burst(pg_url: str, procs: Processes) -> None:
    bad = procs.spawn("duetime.testing.badreceiver", name="badreceiver")
    a = procs.node(pg_url, "a", NO_BREAKER)
    b = procs.node(pg_url, "b", NO_BREAKER)
    bodies = []
    for path, attempts in MODES:
        retry = {"max_attempts": attempts, "initial_delay_seconds": 0.2, "jitter": 0}
        target = {"type": "http", "url": f"{bad.url}/{path}"}
        bodies += spread(PER_MODE, target, start_in=1.5, over=3, retry=retry, timeout_seconds=1)
    accepted = create_all([a.url, b.url], bodies)
    modes = {task_id: MODES[n // PER_MODE][0] for n, task_id in enumerate(accepted)}

    wait_settled(pg_url, 90, procs.logs)
    for node in (a, b):  # not wedged: a healthy delivery still goes through at once
        made = httpx.post(
            f"{node.url}/v1/tasks", json={"target": {"type": "http", "url": f"{bad.url}/ok"}}
        )
        assert made.status_code == 201, made.text
        fresh = made.json()["id"]
        wait_until(
            lambda n=node, t=fresh: (
                httpx.get(f"{n.url}/v1/tasks/{t}").json()["status"] == "succeeded"
            ),
            15,
            "a healthy delivery after the bad ones",
        )
        accepted.append(fresh)
        modes[fresh] = "ok"

    deliveries = receiver_attempts(bad.url)
    report = verify("receivers misbehave", pg_url, accepted, deliveries)
    # An attempt is sent twice only when a reused connection closed without a byte of answer.
    resent_modes = {modes[t] for t, seen in deliveries.items() if len(seen) != len(set(seen))}
    assert resent_modes <= {"reset?bad=1"}, resent_modes
    statuses = collections.Counter()
    with httpx.Client(base_url=a.url, timeout=10) as api:
        for task_id, mode in modes.items():
            task = api.get(f"/v1/tasks/{task_id}").json()
            statuses[(mode, task["status"])] += 1
        # Recorded outside text is clean: no NUL or other control character reached a store.
        for task_id in [t for t, m in modes.items() if m.startswith("nul")][:20]:
            for attempt in api.get(f"/v1/tasks/{task_id}/attempts").json()["items"]:
                error = attempt.get("error") or ""
                assert not any(ord(c) < 32 for c in error), repr(error)
    always_bad = {"nul", "hang"}
    for (mode, status), count in statuses.items():
        expected = "failed" if mode in always_bad else "succeeded"
        assert status == expected, f"{count} tasks of {mode} ended {status}: {report.summary()}"
