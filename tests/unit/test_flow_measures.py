"""The flow-control measures (:mod:`duetime.bench.flow_measures`) and the receiver paths they
read (``/delay/MS``, ``/hang``, ``/_stats`` of :mod:`duetime.bench.receiver`)."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import httpx
import orjson
import pytest

from duetime.bench import flow_measures as fm
from duetime.bench.flow_scenarios import serial_tasks
from duetime.bench.receiver import open_receiver


def _rec(task: str, at: float, end: float | None, path: str = "/hook") -> dict[str, Any]:
    return {"task_id": task, "at": at, "end": end, "path": path}


def test_max_overlap_counts_requests_in_flight_at_once() -> None:
    assert fm.max_overlap([]) == 0
    assert fm.max_overlap([(0, 1), (1, 2), (2, 3)]) == 1  # each starts as the last is answered
    assert fm.max_overlap([(0, 2), (1, 3), (1.5, 1.6), (2.5, None)]) == 3
    assert fm.max_overlap([(0, None), (5, None)]) == 2  # hanging requests stay in flight


def test_in_flight_at_samples_the_same_count() -> None:
    spans: list[fm.Interval] = [(0, 2), (1, 3), (2.5, None)]
    assert fm.in_flight_at(spans, [-1, 0, 1.5, 2, 2.7, 100]) == [0, 1, 2, 1, 2, 1]


def test_window_counts_finds_the_fewest_and_most_starts() -> None:
    steady = [i / 8 for i in range(240)]  # 8 per second for 30 s (exact in binary)
    windows = fm.window_counts(steady, 10.0)
    assert windows.count > 200 and windows.low == windows.high == 80
    bursty = [0.0] * 50 + steady  # a full bucket at the start
    assert fm.window_counts(bursty, 10.0).high == 130
    assert fm.window_counts(bursty, 10.0).low == 80
    gap = [t for t in steady if not 12 <= t < 14]  # two seconds without a start
    assert fm.window_counts(gap, 10.0).low == 64
    assert fm.window_counts([0.0, 5.0], 10.0).count == 0  # shorter than one window


def test_rate_bounds_follow_the_spec_bar() -> None:
    assert fm.rate_bounds(20, 20) == (200 - 40, 200 + 40)
    assert fm.default_burst(0.5) == 1 and fm.default_burst(20) == 20 and fm.default_burst(2.5) == 3


def test_bucket_excess_is_what_a_bucket_would_not_allow() -> None:
    steady = [i / 8 for i in range(80)]  # 8 per second
    assert fm.bucket_excess(steady, 8.0, 1) == 0  # each start spends the token that just came
    assert fm.bucket_excess([0.0] * 8 + steady, 8.0, 8) <= 1  # a full bucket, then the rate
    assert fm.bucket_excess([0.0] * 20 + steady, 8.0, 8) == 13  # 12 too many, plus the first
    two_buckets = sorted(steady + [t + 0.01 for t in steady])  # two nodes, a bucket each
    assert fm.bucket_excess(two_buckets, 8.0, 8) > 60


def test_serial_check_catches_order_overlap_and_missing() -> None:
    good = [_rec("a1", 0, 1), _rec("a2", 1, 2), _rec("b1", 0.5, 1.5), _rec("b2", 1.6, 2)]
    check = fm.serial_check(good, {"a": ["a1", "a2"], "b": ["b1", "b2"]})
    assert (check.out_of_order, check.overlaps, check.missing) == (0, 0, 0)
    assert check.most_keys_at_once == 2  # keys ran side by side
    bad = [_rec("a2", 0, 1), _rec("a1", 0.5, 2), _rec("a2", 3, 4)]  # a retry is not a start
    check = fm.serial_check(bad, {"a": ["a1", "a2", "a3"]})
    assert (check.out_of_order, check.overlaps, check.missing) == (1, 1, 1)


def test_drain_rate_needs_every_answer() -> None:
    assert fm.drain_rate([(0, 0.5), (0.5, 1.0)]) == 2.0
    assert math.isnan(fm.drain_rate([(0, 0.5), (0.5, None)]))


def test_serial_tasks_order_by_priority_due_then_creation() -> None:
    bodies, order = serial_tasks("http://127.0.0.1:1", "q", keys=3, per_key=10, handler_ms=5)
    assert sorted(i for ids in order.values() for i in ids) == list(range(30))
    for key, indexes in order.items():
        ranks = [
            (-bodies[i]["priority"], bodies[i]["run_at"], i)
            for i in indexes
            if bodies[i]["concurrency_key"] == key
        ]
        assert ranks == sorted(ranks) and len(ranks) == len(indexes)
    ties = {(b["concurrency_key"], b["priority"], b["run_at"]) for b in bodies}
    assert len(ties) < len(bodies), "creation order must break some ties"


@pytest.fixture
async def receiver() -> Any:
    server = await open_receiver()
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.close()


def test_slot_gaps_pair_each_answer_with_the_arrival_that_took_its_slot() -> None:
    # Two slots: arrivals at 0, 0 fill them; the answer at 1.0 frees one, taken at 1.25; the
    # answer at 2.0 frees the other, taken at 2.5. The last two answers free nothing taken.
    spans: list[fm.Interval] = [(0, 1.0), (0, 2.0), (1.25, 3.0), (2.5, 3.5)]
    assert fm.slot_gaps(spans, 2) == [0.25, 0.5]
    assert fm.slot_gaps(spans, 4) == []


async def _stats_until(client: httpx.AsyncClient, receiver: str, inflight: int) -> Any:
    """The receiver's counters once ``inflight`` requests are open (polled; no fixed sleep)."""
    for _ in range(500):
        stats = (await client.get(f"{receiver}/_stats")).json()
        if stats["inflight"] == inflight:
            return stats
        await asyncio.sleep(0.01)
    raise AssertionError(f"the receiver never had {inflight} requests open: {stats}")


async def test_receiver_delays_hangs_and_counts_in_flight(receiver: str) -> None:
    # The hanging request is open before the delayed ones start and is dropped by the client
    # once they are answered, so the overlap does not depend on how fast connections open.
    async with httpx.AsyncClient(timeout=10) as client, httpx.AsyncClient(timeout=10) as hanger:
        hang = asyncio.ensure_future(
            hanger.post(f"{receiver}/hang", headers={"duetime-task-id": "h"})
        )
        await _stats_until(client, receiver, 1)
        delayed = [
            client.post(f"{receiver}/delay/300", headers={"duetime-task-id": f"d{i}"})
            for i in range(3)
        ]
        answers = await asyncio.gather(*delayed)
        assert [r.status_code for r in answers] == [204] * 3
        assert not hang.done()  # /hang never answers
        hang.cancel()
        with pytest.raises(asyncio.CancelledError):
            await hang
        await hanger.aclose()
        stats = await _stats_until(client, receiver, 0)  # the receiver sees the close
        body = (await client.get(f"{receiver}/_records")).content
    records = [orjson.loads(line) for line in body.splitlines()]
    assert stats == {"requests": 4, "inflight": 0, "max_inflight": 4}  # /_stats is not counted
    by_task = {r["task_id"]: r for r in records}
    for i in range(3):
        took = by_task[f"d{i}"]["end"] - by_task[f"d{i}"]["at"]
        assert 0.29 <= took < 5.0 and by_task[f"d{i}"]["path"] == "/delay/300"
    assert by_task["h"]["end"] >= max(by_task[f"d{i}"]["end"] for i in range(3))
    assert fm.max_overlap(fm.intervals(records)) == 4
    assert len(fm.intervals(records, "/delay/")) == 3
