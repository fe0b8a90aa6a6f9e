"""A node with several dispatcher processes (``DUETIME_DISPATCH_PROCESSES``) on PostgreSQL: they
share the deliveries, their metrics reach the node's ``/metrics``, a dead one is started again,
and they never outlive the node — not even a node killed with SIGKILL."""

from __future__ import annotations

import os
import re
from pathlib import Path

import httpx
import pytest

from duetime.bench.harness import (
    NodeOptions,
    Proc,
    metric_total,
    receiver_records,
    running,
    start_node,
    start_receiver,
    wait_delivered,
    wait_until,
)

pytestmark = pytest.mark.acceptance

ENV = {
    "DUETIME_DISPATCH_PROCESSES": "3",
    "DUETIME_DISPATCH_CONCURRENCY": "30",
    "DUETIME_POLL_INTERVAL_SECONDS": "0.2",
    "DUETIME_LOG_LEVEL": "info",
}


def _running_pids(node: Proc) -> set[int]:
    """Pids of the dispatcher processes that said they run (from the node's log)."""
    return {int(p) for p in re.findall(r"dispatcher process \d+ \(pid (\d+)\) running", node.log())}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    if stat.exists():  # a zombie is dead for our purpose
        return stat.read_text().split(")")[1].split()[0] != "Z"
    return True


def _create(node: Proc, url: str, count: int) -> list[str]:
    tasks = [{"target": {"type": "http", "url": url}, "payload": {"n": n}} for n in range(count)]
    made = httpx.post(f"{node.url}/v1/tasks/batch", json={"tasks": tasks}, timeout=60)
    assert made.status_code == 201, made.text
    return [t["id"] for t in made.json()["items"]]


def test_processes_share_deliveries_and_report_metrics(pg_url: str, tmp_path: Path) -> None:
    receiver = start_receiver(tmp_path)
    node = start_node(tmp_path, NodeOptions(db=pg_url, env=ENV))
    with running(receiver, node):
        wait_until(lambda: len(_running_pids(node)) == 2, 30, "two dispatcher processes")
        ids = _create(node, f"{receiver.url}/hook", 900)
        wait_delivered(receiver.url, 900, timeout=30)
        records = receiver_records(receiver.url)
        assert sorted(str(r["task_id"]) for r in records) == sorted(ids), "one delivery each"

        workers: set[str] = set()
        for task_id in ids[:: len(ids) // 60]:
            attempts = httpx.get(f"{node.url}/v1/tasks/{task_id}/attempts", timeout=10).json()
            workers.update(a["worker"] for a in attempts["items"])
        assert len(workers) >= 2, f"one process did all the work: {workers}"
        node_ids = {w.split("/")[0] for w in workers}
        assert len(node_ids) == 1 and all(re.fullmatch(r"[^/]+(/[12])?", w) for w in workers)

        # Attempts made in the dispatcher processes are counted by the node's /metrics.
        wait_until(
            lambda: metric_total(node.url, "duetime_attempts_total", 'outcome="succeeded"') == 900,
            10,
            "forwarded metrics",
        )

        pids = _running_pids(node)
        assert node.stop() == 0
        assert not [p for p in pids if _alive(p)], "a dispatcher process outlived SIGTERM"


def test_a_dead_process_is_restarted_and_none_outlives_a_killed_node(
    pg_url: str, tmp_path: Path
) -> None:
    receiver = start_receiver(tmp_path)
    node = start_node(tmp_path, NodeOptions(db=pg_url, env=ENV))
    with running(receiver, node):
        wait_until(lambda: len(_running_pids(node)) == 2, 30, "two dispatcher processes")
        first = _running_pids(node)
        victim = min(first)
        os.kill(victim, 9)
        wait_until(lambda: len(_running_pids(node) - first) == 1, 30, "a restarted process")
        assert "restarting in" in node.log()

        ids = _create(node, f"{receiver.url}/hook", 300)
        wait_delivered(receiver.url, 300, timeout=30)
        assert {str(r["task_id"]) for r in receiver_records(receiver.url)} == set(ids)

        live = {p for p in _running_pids(node) if _alive(p)}
        assert len(live) == 2
        node.kill()
        wait_until(
            lambda: not any(map(_alive, live)), 5, "dispatcher processes to die with the node"
        )
