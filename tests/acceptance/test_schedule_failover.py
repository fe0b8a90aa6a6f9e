"""Two real nodes on PostgreSQL run per-second schedules; the leader is killed with SIGKILL. The
other node takes over from the stored cursors: no occurrence is missed or doubled."""

from __future__ import annotations

import collections
import itertools
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from duetime.bench.harness import NodeOptions, Proc, running, start_node, start_receiver

pytestmark = pytest.mark.acceptance

ENV = {
    "DUETIME_LEADER_TTL_SECONDS": "2",
    "DUETIME_POLL_INTERVAL_SECONDS": "0.2",
    "DUETIME_LEASE_GRACE_SECONDS": "1",
    "DUETIME_DISPATCH_CONCURRENCY": "16",
}


def _ts(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def _pages(url: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    cursor = None
    while True:
        query = {**params, "limit": 1000, **({"cursor": cursor} if cursor else {})}
        page = httpx.get(url, params=query, timeout=30).json()
        items.extend(page["items"])
        cursor = page.get("next_cursor")
        if not cursor:
            return items


def _is_leader(node: Proc) -> bool:
    metrics = httpx.get(f"{node.url}/metrics", timeout=5).text
    return any(line.startswith("duetime_is_leader 1") for line in metrics.splitlines())


def _consecutive(instants: list[datetime], first: datetime, last: datetime) -> None:
    expected = int((last - first).total_seconds()) + 1
    window = sorted(i for i in instants if first <= i <= last)
    assert len(window) == len(set(window)) == expected, (
        f"{expected} occurrences expected in [{first}, {last}], got {len(window)} "
        f"({len(set(window))} distinct)"
    )
    assert all(b - a == timedelta(seconds=1) for a, b in itertools.pairwise(window))


def test_sigkill_the_leader_loses_and_doubles_no_occurrence(pg_url: str, tmp_path: Path) -> None:
    receiver = start_receiver(tmp_path)
    a = start_node(tmp_path, NodeOptions(db=pg_url, env=ENV), "a")
    b = start_node(tmp_path, NodeOptions(db=pg_url, env=ENV), "b")
    with running(receiver, a, b):
        ahead = httpx.post(
            f"{a.url}/v1/schedules",
            json={"every": "PT1S", "task": {"target": {"type": "worker"}, "name": "ahead"}},
            timeout=10,
        )
        assert ahead.status_code == 201, ahead.text
        gated = httpx.post(
            f"{a.url}/v1/schedules",
            json={
                "every": "PT1S",
                "overlap": "skip",  # made only when due: the fail-over gap really matters
                "task": {
                    "target": {"type": "http", "url": f"{receiver.url}/hook"},
                    "timeout_seconds": 2,
                    "retry": {"max_attempts": 1},
                },
            },
            timeout=10,
        )
        assert gated.status_code == 201, gated.text
        created = _ts(ahead.json()["created_at"]).replace(microsecond=0)
        time.sleep(3)
        leader, survivor = (a, b) if _is_leader(a) else (b, a)
        assert _is_leader(leader), "one node must lead"
        leader.kill()
        killed_at = datetime.now(UTC)
        time.sleep(6)  # the lease (2 s) expires, the survivor takes over and catches up
        assert _is_leader(survivor), survivor.log()[-3000:]
        last = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=2)
        assert last - killed_at > timedelta(seconds=2)
        first = created + timedelta(seconds=2)  # both schedules exist by then

        tasks = _pages(f"{survivor.url}/v1/tasks", {"schedule_id": ahead.json()["id"]})
        _consecutive([_ts(t["scheduled_for"]) for t in tasks], first, last)

        sid = gated.json()["id"]
        ticks = _pages(f"{survivor.url}/v1/schedules/{sid}/ticks", {})
        per_instant = collections.Counter(_ts(t["at"]) for t in ticks)
        assert all(n == 1 for n in per_instant.values()), "an instant has two ledger rows"
        assert {t["outcome"] for t in ticks} <= {"fired", "skipped_overlap"}, ticks[:5]
        _consecutive(list(per_instant), first, last)
        fired = [t for t in ticks if t["outcome"] == "fired" and _ts(t["at"]) <= last]
        assert fired and all(t["task_id"] for t in fired)
        # The schedule keeps firing while the test reads: compare up to ``last`` only.
        made = _pages(f"{survivor.url}/v1/tasks", {"schedule_id": sid})
        made = [t for t in made if _ts(t["scheduled_for"]) <= last]
        assert sorted(t["id"] for t in made) == sorted(t["task_id"] for t in fired)
