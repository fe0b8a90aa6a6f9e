"""SQLite's disk fills up during a burst (the database on a small tmpfs, then a filler file takes
the rest). The single node refuses creates with a clear problem (507, ``store-full``, with
Retry-After), keeps serving reads and stays up; when space returns it takes creates again and
finishes every task it had accepted — none lost, none doubled."""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from duetime.bench.harness import wait_until
from duetime.testing.faultnodes import RETRY, Processes
from duetime.testing.faultrun import create_all, receiver_attempts, spread, verify, wait_settled

HOOKS = 2000
LATE = 200  # created while the disk is full (refused), then again once space is back


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    """A 24 MiB tmpfs (mounting needs root, as in CI), unmounted after the nodes stopped."""
    if os.geteuid() != 0:
        pytest.skip("the disk-full fault mounts a small tmpfs: run as root (CI does)")
    where = tmp_path / "disk"
    where.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(where)], check=True)
    try:
        yield where
    finally:
        if subprocess.run(["umount", str(where)], check=False).returncode != 0:
            subprocess.run(["umount", "-l", str(where)], check=False)


def _fill(path: Path) -> int:
    """Write ``path`` until the filesystem has no byte left; returns the bytes written."""
    written = 0
    with path.open("wb", buffering=0) as out:
        for size in (1 << 20, 1 << 12, 1):
            block = b"\0" * size
            with contextlib.suppress(OSError):
                while True:
                    written += out.write(block)
    stats = os.statvfs(path)
    assert stats.f_bavail == 0, "the filler did not fill the disk"
    return written


def test_sqlite_disk_full_refuses_creates_and_recovers(tiny_disk: Path, procs: Processes) -> None:
    db = tiny_disk / "duetime.db"
    receiver = procs.receiver()
    node = procs.node(f"sqlite:///{db}", "solo", {"DUETIME_DISPATCH_PROCESSES": "0"})
    hook = {"type": "http", "url": f"{receiver.url}/hook"}
    common = {"retry": RETRY, "timeout_seconds": 2}
    accepted = create_all([node.url], spread(HOOKS, hook, start_in=1.5, over=4, **common))
    time.sleep(2.5)  # the burst is being delivered

    filler = tiny_disk / "filler"
    _fill(filler)
    # SQLite still has room in its write-ahead log: creates succeed until that is used up too.
    pad = "x" * 4096
    refused: list[httpx.Response] = []
    late: list[dict[str, object]] = []
    with httpx.Client(timeout=30) as api:
        for _ in range(100):
            late = spread(LATE, hook, start_in=0, over=1, payload={"pad": pad}, **common)
            answer = api.post(f"{node.url}/v1/tasks/batch", json={"tasks": late})
            if answer.status_code != 201:
                refused.append(answer)
                break
            accepted += [t["id"] for t in answer.json()["items"]]
        assert refused, "the disk never filled up"
        for _ in range(2):
            time.sleep(0.5)
            refused.append(api.post(f"{node.url}/v1/tasks/batch", json={"tasks": late}))
    for answer in refused:
        assert answer.status_code == 507, answer.text
        assert answer.headers["content-type"].startswith("application/problem+json")
        assert "retry-after" in answer.headers
        problem = answer.json()
        assert problem["type"].endswith("store-full") and "space" in problem["detail"]
    assert httpx.get(f"{node.url}/healthz", timeout=10).status_code == 200
    listed = httpx.get(f"{node.url}/v1/tasks", params={"limit": 10}, timeout=30)
    assert listed.status_code == 200, listed.text  # reads go on
    time.sleep(2)  # deliveries whose completions cannot be written meanwhile

    filler.unlink()
    accepted += create_all([node.url], late, patience=30)
    wait_settled(str(db), 90, procs.logs)
    wait_until(lambda: httpx.get(f"{node.url}/readyz").status_code == 200, 10, "ready")
    assert node.popen.poll() is None, "the node died"
    report = verify(
        "SQLite disk full", str(db), accepted, receiver_attempts(receiver.url), refused=len(refused)
    )
    assert report.statuses == {"succeeded": len(accepted)}, report.summary()
