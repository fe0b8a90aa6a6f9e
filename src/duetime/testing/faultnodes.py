"""Real processes for one fault-suite test: ``duetime serve`` nodes with short leases and
leadership, webhook receivers, any loopback HTTP helper process, and SDK worker processes
(:mod:`duetime.testing.faultworker`) — all stopped together at the end."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from duetime.bench.harness import (
    NodeOptions,
    Proc,
    _spawn,
    free_port,
    start_node,
    start_receiver,
    wait_http,
)
from duetime.testing.faultworker import handled

# Short leases and leadership so that expired ones are reaped within the test's time; one
# dispatcher process per node: several nodes share the two cores of a CI machine.
NODE_ENV = {
    "DUETIME_LEASE_GRACE_SECONDS": "1",
    "DUETIME_LEADER_TTL_SECONDS": "2",
    "DUETIME_POLL_INTERVAL_SECONDS": "0.2",
    "DUETIME_DISPATCH_CONCURRENCY": "64",
    "DUETIME_DISPATCH_PROCESSES": "1",
    "DUETIME_LOG_LEVEL": "info",
}

# Every retry comes back quickly, and a task has attempts enough to ride out any fault here.
RETRY = {"max_attempts": 20, "initial_delay_seconds": 0.2, "max_delay_seconds": 1, "jitter": 0}

WORKER_QUEUE = "faults"


class Processes:
    """Starts nodes, receivers and workers for one test; stops every one at the end."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.procs: list[Proc] = []
        self.workers: list[subprocess.Popen[bytes]] = []
        self.handled_path = workdir / "handled.txt"

    def node(self, db: str, name: str, env: dict[str, str] | None = None) -> Proc:
        proc = start_node(self.workdir, NodeOptions(db=db, env={**NODE_ENV, **(env or {})}), name)
        self.procs.append(proc)
        return proc

    def receiver(self) -> Proc:
        proc = start_receiver(self.workdir)
        self.procs.append(proc)
        return proc

    def spawn(self, module: str, *args: str, name: str) -> Proc:
        """Any ``python -m module args`` that serves HTTP at the free port passed first."""
        port = free_port()
        proc = _spawn(
            [sys.executable, "-m", module, str(port), *args],
            os.environ,
            self.workdir / f"{name}-{port}.log",
            f"http://127.0.0.1:{port}",
        )
        self.procs.append(proc)
        wait_http(proc.url + "/_count", proc=proc.popen)
        return proc

    def worker(self, node_url: str, concurrency: int = 32, lease_seconds: float = 3.0) -> None:
        """An SDK worker process leasing ``WORKER_QUEUE`` from ``node_url``."""
        log = (self.workdir / f"worker-{len(self.workers)}.log").open("wb")
        self.workers.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "duetime.testing.faultworker",
                    node_url,
                    str(self.handled_path),
                    WORKER_QUEUE,
                    str(concurrency),
                    str(lease_seconds),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        )

    def handled(self) -> dict[str, list[int]]:
        """Attempt numbers run per task id, over every worker of this test."""
        return handled(self.handled_path)

    def logs(self, tail: int = 3000) -> str:
        """The last ``tail`` characters of every process log, for a failure message."""
        return "\n".join(f"--- {p.log_path.name}\n{p.log()[-tail:]}" for p in self.procs)

    def stop(self) -> None:
        for worker in self.workers:
            worker.terminate()
        for worker in self.workers:
            try:
                worker.wait(15)
            except subprocess.TimeoutExpired:
                worker.kill()
        for proc in reversed(self.procs):
            proc.stop(5)
