"""What a flow-control measurement reads from a receiver's records (SPEC §6 "queue limits" and
"fairness", §7): how many requests were in flight at once, whether a concurrency key's tasks ran
one at a time and in order, and how many started in each window of a rate limit.

Pure functions over the receiver's records (:mod:`duetime.bench.receiver`: ``at`` is when a
request arrived, ``end`` when it was answered, ``None`` while it hangs), shared by the
``queue-limits`` and ``fairness`` benchmarks and the acceptance tests.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

Interval = tuple[float, float | None]
"""A request's arrival and answer times (unix seconds); no answer yet: ``None``."""


def intervals(records: Iterable[Mapping[str, Any]], path: str = "") -> list[Interval]:
    """The (arrival, answer) of every record whose path starts with ``path``."""
    return [
        (float(r["at"]), None if r.get("end") is None else float(r["end"]))
        for r in records
        if str(r.get("path", "")).startswith(path)
    ]


def first_records(records: Iterable[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """Each task's first delivery among ``records``, by task id (a retry is a later record)."""
    first: dict[str, Mapping[str, Any]] = {}
    for r in records:
        first.setdefault(str(r["task_id"]), r)
    return first


def max_overlap(spans: Iterable[Interval]) -> int:
    """The most requests in flight at once. A request answered at the instant another arrives
    does not overlap it (the next one may start once the last is answered)."""
    events: list[tuple[float, int]] = []
    for start, end in spans:
        events.append((start, 1))
        events.append((math.inf if end is None else end, -1))
    events.sort()  # at equal times the end (-1) sorts before the start (+1)
    running = most = 0
    for _, step in events:
        running += step
        most = max(most, running)
    return most


def in_flight_at(spans: Sequence[Interval], instants: Iterable[float]) -> list[int]:
    """How many requests were in flight at each of ``instants``."""
    starts = sorted(s for s, _ in spans)
    ends = sorted(math.inf if e is None else e for _, e in spans)
    return [bisect.bisect_right(starts, t) - bisect.bisect_right(ends, t) for t in instants]


@dataclass(frozen=True)
class Windows:
    """Counts of starts in sliding windows of ``width`` seconds that lie wholly within the
    measured span (from the first start to the last)."""

    width: float
    count: int
    """How many windows were evaluated (0: the span is shorter than ``width``)."""
    low: int
    high: int


def window_counts(starts: Iterable[float], width: float) -> Windows:
    """Starts per window ``[b, b + width)``, over every ``b`` from the first start to the last
    start minus ``width`` (so each window lies where starts were still being made).

    The count only changes where ``b`` passes a start or ``b + width`` reaches one, so evaluating
    every window that begins at a start or ends at one finds the exact fewest and most."""
    times = sorted(starts)
    if not times or times[-1] - times[0] < width:
        return Windows(width, 0, 0, 0)
    first, last_begin = times[0], times[-1] - width
    counts = [
        bisect.bisect_left(times, t + width) - bisect.bisect_left(times, t)
        for t in times
        if t <= last_begin
    ]
    counts.extend(  # the windows ending at a start (right edge exact: the start itself)
        bisect.bisect_left(times, t) - bisect.bisect_left(times, t - width)
        for t in times
        if first <= t - width <= last_begin
    )
    return Windows(width, len(counts), min(counts), max(counts))


def rate_bounds(rate: float, burst: int, width: float = 10.0) -> tuple[float, float]:
    """SPEC §6's bar for a token bucket of ``rate`` per second and capacity ``burst``: the starts
    in any window of ``width`` seconds lie within rate x width ± (burst + 10 %)."""
    nominal = rate * width
    slack = burst + 0.1 * nominal
    return nominal - slack, nominal + slack


def bucket_excess(starts: Iterable[float], rate: float, burst: int) -> float:
    """The most starts any window held beyond what a token bucket of ``rate`` per second and
    capacity ``burst`` allows in it (``burst + rate x its length``): 0 or less when the bucket
    held. Over windows from the i-th start to the j-th, that is (j - i + 1) - burst -
    rate (t_j - t_i), found in one pass as the largest (j - rate t_j) - min_{i<=j} (i - rate t_i).
    """
    best, lowest = -math.inf, math.inf
    for j, t in enumerate(sorted(starts)):
        lowest = min(lowest, j - rate * t)
        best = max(best, (j - rate * t) - lowest + 1 - burst)
    return best


def default_burst(rate: float) -> int:
    """The bucket's capacity when ``burst`` is not set: max(1, ceil(rate))."""
    return max(1, math.ceil(rate))


@dataclass(frozen=True)
class SerialCheck:
    """How a set of concurrency keys ran (``max_concurrency_per_key`` 1)."""

    keys: int
    tasks: int
    out_of_order: int
    """Keys whose tasks did not start in the expected order."""
    overlaps: int
    """Times a key's task started before the key's previous task was answered."""
    missing: int
    """Expected tasks the receiver never saw."""
    most_keys_at_once: int
    """The most requests in flight at once over all keys (> 1: keys ran in parallel)."""


def serial_check(
    records: Iterable[Mapping[str, Any]], expected: Mapping[str, Sequence[str]]
) -> SerialCheck:
    """Check that each key's tasks (``expected``: key → task ids in the order they must run)
    ran one at a time and in that order, from each task's first delivery."""
    first = first_records(records)
    out_of_order = overlaps = missing = 0
    spans: list[Interval] = []
    for ids in expected.values():
        seen = [first[i] for i in ids if i in first]
        missing += len(ids) - len(seen)
        ran = sorted(seen, key=lambda r: float(r["at"]))
        if [str(r["task_id"]) for r in ran] != [i for i in ids if i in first]:
            out_of_order += 1
        for before, after in itertools.pairwise(ran):
            if before["end"] is None or float(after["at"]) < float(before["end"]):
                overlaps += 1
        spans.extend(intervals(ran))
    return SerialCheck(
        keys=len(expected),
        tasks=sum(len(ids) for ids in expected.values()),
        out_of_order=out_of_order,
        overlaps=overlaps,
        missing=missing,
        most_keys_at_once=max_overlap(spans),
    )


def drain_rate(spans: Sequence[Interval]) -> float:
    """Requests answered per second, from the first arrival to the last answer (``nan`` when
    some request was never answered)."""
    if not spans or any(e is None for _, e in spans):
        return math.nan
    first = min(s for s, _ in spans)
    last = max(e for _, e in spans if e is not None)
    return len(spans) / (last - first) if last > first else math.inf


def slot_gaps(spans: Sequence[Interval], slots: int) -> list[float]:
    """Seconds from each answer to the arrival that took its slot, sorted: with ``slots`` at
    most in flight, the k-th answer frees the slot the (k + ``slots``)-th arrival takes (both in
    time order). A drain's time beyond its handlers is in these gaps (the claim's round trip,
    the completion's commit, the wake-up)."""
    starts = sorted(s for s, _ in spans)
    ends = sorted(e for _, e in spans if e is not None)
    return sorted(starts[k + slots] - end for k, end in enumerate(ends[: len(starts) - slots]))
