"""A node's wall clock jumps an hour forward during a burst, then two hours back (libfaketime
on that node's process, as an NTP step would: the monotonic clock runs on undisturbed). On
PostgreSQL the store's clock is the time authority (SPEC §1): the jumped node fires nothing
early, steals no live lease, and every accepted task ends exactly once."""

from __future__ import annotations

import time
from datetime import datetime
from email.utils import parsedate_to_datetime
from pathlib import Path

import httpx
import orjson
import pytest

from duetime.bench.harness import wait_until
from duetime.testing.faultnodes import RETRY, WORKER_QUEUE, Processes
from duetime.testing.faultrun import create_all, receiver_attempts, spread, verify, wait_settled

HOOKS = 2000
JOBS = 1000
LIBS = (
    "/usr/lib/x86_64-linux-gnu/faketime",
    "/usr/lib/aarch64-linux-gnu/faketime",
    "/usr/lib/faketime",
)


def _libfaketime() -> str:
    for folder in LIBS:
        lib = Path(folder) / "libfaketimeMT.so.1"
        if lib.exists():
            return str(lib)
    pytest.fail(
        "libfaketime is not installed: apt-get install faketime (scripts/test does it as root)",
        pytrace=False,
    )


def _skew(url: str) -> float:
    """Seconds the node's wall clock is ahead of ours, from its ``Date`` header."""
    answer = httpx.get(f"{url}/healthz", timeout=10)
    return parsedate_to_datetime(answer.headers["date"]).timestamp() - time.time()


def test_a_node_clock_jumps_an_hour(pg_url: str, procs: Processes, tmp_path: Path) -> None:
    offset = tmp_path / "faketime"
    offset.write_text("+0\n")
    jumped = {
        "LD_PRELOAD": _libfaketime(),
        "FAKETIME_TIMESTAMP_FILE": str(offset),
        "FAKETIME_CACHE_DURATION": "1",  # the file is read again every second
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",  # a wall-clock step; monotonic time never jumps
    }
    receiver = procs.receiver()
    a = procs.node(pg_url, "a", jumped)
    b = procs.node(pg_url, "b")
    procs.worker(a.url)
    hook = {"type": "http", "url": f"{receiver.url}/hook"}
    common = {"retry": RETRY, "timeout_seconds": 2}
    bodies = spread(HOOKS, hook, start_in=3, over=6, **common) + spread(
        JOBS, {"type": "worker"}, start_in=3, over=6, name="noop", queue=WORKER_QUEUE, **common
    )
    accepted = create_all([a.url, b.url], bodies)
    run_at = {
        t: datetime.fromisoformat(body["run_at"]).timestamp()
        for t, body in zip(accepted, bodies, strict=True)
    }
    time.sleep(3.5)
    offset.write_text("+1h\n")
    wait_until(lambda: 3000 < _skew(a.url) < 4200, 5, "a's clock to jump forward")
    time.sleep(1)
    offset.write_text("-1h\n")
    wait_until(lambda: -4200 < _skew(a.url) < -3000, 5, "a's clock to jump back")

    wait_settled(pg_url, 60, procs.logs)
    records = [orjson.loads(line) for line in httpx.get(receiver.url + "/_records").content.split()]
    # The receiver's clock is the machine's real one, as is PostgreSQL's.
    early = [r for r in records if r["at"] < run_at[r["task_id"]] - 0.05]
    assert not early, f"{len(early)} deliveries before their run_at, e.g. {early[:3]}"
    deliveries = receiver_attempts(receiver.url)
    deliveries.update(procs.handled())
    report = verify("node clock jumped +1h then -1h", pg_url, accepted, deliveries)
    assert report.statuses == {"succeeded": HOOKS + JOBS}, report.summary()
