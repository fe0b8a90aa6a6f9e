"""Fixtures of the fault suite: real ``duetime serve`` nodes on loopback ports, a loopback
webhook receiver, SDK worker processes, and a throwaway PostgreSQL cluster for the test that
restarts the server. Every test gets its own database (``pg_url``, or its own cluster)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from duetime.bench.harness import NodeOptions, Proc, start_node, start_receiver
from duetime.testing.faultworker import handled
from duetime.testing.pgcluster import PgCluster, PgUnavailable

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


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.faults)


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
        from duetime.bench.harness import _spawn, free_port, wait_http

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


@pytest.fixture
def procs(tmp_path: Path) -> Iterator[Processes]:
    running = Processes(tmp_path)
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
def pg_cluster() -> Iterator[PgCluster]:
    """A PostgreSQL cluster of this test's own, started; destroyed after."""
    try:
        cluster = PgCluster().init()
    except PgUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.destroy()


@pytest.fixture
def migrated() -> Callable[[str], None]:
    """Migrates the store at a URL (a database a test made itself)."""
    import asyncio

    from duetime.store import store_from_url

    async def run(url: str) -> None:
        store = store_from_url(url)
        await store.open()
        try:
            await store.migrate()
        finally:
            await store.close()

    return lambda url: asyncio.run(run(url))
