"""The keyed rate limit's claim, as rules once for both backends (SPEC §7 "Keyed flow
control"); the backends only read and write what these decide.

A queue with a keyed rate limit keeps a token bucket per key (``flow_buckets``: a row only
while the key's bucket is not full). Its claim, inside the queue's lock (PostgreSQL) or the
one writer's transaction (SQLite):

1. lists the queue's keys with ready work, each with its first ready task in claim order, its
   bucket and (with ``max_concurrency_per_key``) its running tasks — a skip scan of the ready
   flow index, one probe per key, starting after where this node's last claim of the queue
   stopped and at most :func:`scan_cap` keys, so a claim costs the keys it can use, not every
   key with a backlog, and every key is reached in turn (:func:`next_cursor`);
2. gives each key what it may start now (:func:`plan_takes`): its bucket's whole tokens, less
   its running tasks under ``max_concurrency_per_key``; the key ``""`` (tasks without a value
   for the key) only the queue's own limits; the ``room`` keys whose first tasks come first in
   claim order;
3. takes up to that many of each key's first tasks (a key that may take one: its first task
   as step 1 read it), the best ``room`` of them in claim order;
4. writes back what it left in the buckets it took from (:func:`bucket_writes`).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from duetime.store.core.hot import bucket_capacity, bucket_tokens, next_token_in
from duetime.types import FlowRules

SCAN_MIN = 256
"""A claim reads at least this many keys with ready work (or all of them)."""
MIN_REFILL_SECONDS = 0.01
"""A node's claimers are woken for a key's next token at most this often: with many keys
their tokens fall due all the time, and one claim serves every key due by then."""


def scan_cap(room: int) -> int:
    """How many keys with ready work one claim of ``room`` reads at most."""
    return max(SCAN_MIN, 4 * room)


@dataclass(frozen=True, slots=True)
class KeyHead:
    """A key with ready work: its first ready task (``head``: the backend's handle on it; its
    priority and due time), its bucket (``tokens`` None: full) and its running tasks (None: no
    per-key concurrency limit)."""

    key: str
    priority: int
    due_at: datetime
    tokens: float | None
    tokens_at: datetime | None
    running: int | None
    head: Any = None


@dataclass(frozen=True, slots=True)
class KeyTake:
    """How many of a key's first tasks a claim may take, and its bucket's level before
    (None: the key ``""``, bound by no bucket). A take of one is the key's ``head``, which the
    claim leases as it is, without reading the key's tasks again."""

    key: str
    take: int
    level: float | None
    head: Any = None


def _elapsed(since: datetime | None, at: datetime) -> float:
    return 0.0 if since is None else (at - since).total_seconds()


def plan_takes(
    heads: Iterable[KeyHead],
    room: int,
    at: datetime,
    rate: float,
    burst: int | None,
    per_key: int | None,
) -> tuple[list[KeyTake], float | None]:
    """What each key may start at ``at`` (see the module), for the first ``room`` keys that may
    start one, by their first tasks' claim order; and the seconds until the soonest next token
    of a key that has ready work and none (None: no key waits for one)."""
    eligible: list[tuple[KeyHead, int, float | None]] = []
    wait: float | None = None
    for head in heads:
        level: float | None = None
        if head.key == "":
            allow = room
        else:
            level = bucket_tokens(head.tokens, _elapsed(head.tokens_at, at), rate, burst)
            allow = math.floor(level)
            if allow < 1:
                soon = next_token_in(level, rate)
                wait = soon if wait is None else min(wait, soon)
            if per_key is not None:
                allow = min(allow, per_key - (head.running or 0))
        if allow > 0:
            eligible.append((head, min(allow, room), level))
    # Each key listed has a ready task, so the first ``room`` keys in claim order hold enough
    # for the claim; each may give its whole allowance, the best ``room`` of them win.
    eligible.sort(key=lambda e: (-e[0].priority, e[0].due_at))
    takes = [KeyTake(head.key, allow, level, head.head) for head, allow, level in eligible[:room]]
    return takes, wait


def bucket_writes(
    takes: Sequence[KeyTake], taken: Counter[str], at: datetime, rate: float, burst: int | None
) -> tuple[list[tuple[str, float, datetime]], float | None]:
    """The buckets a claim leaves, ``(key, tokens, full_at)`` for each key it took from, and
    the seconds until the soonest next token of those it emptied (None: none emptied)."""
    capacity = bucket_capacity(rate, burst)
    writes: list[tuple[str, float, datetime]] = []
    wait: float | None = None
    for t in takes:
        n = taken.get(t.key, 0)
        if t.level is None or n <= 0:
            continue
        left = t.level - n
        writes.append((t.key, left, at + timedelta(seconds=(capacity - left) / rate)))
        if left < 1:
            soon = next_token_in(left, rate)
            wait = soon if wait is None else min(wait, soon)
    return writes, wait


def refill_after(*waits: float | None) -> float | None:
    """When to wake this node's claimers for the next token (None: no key waits for one)."""
    found = [w for w in waits if w is not None]
    return max(MIN_REFILL_SECONDS, min(found)) if found else None


def next_cursor(heads: Sequence[KeyHead], cap: int) -> str | None:
    """Where the next claim of the queue starts its list of keys: after the last key this one
    read when it stopped at ``cap``, else from the first key again."""
    return heads[-1].key if len(heads) >= cap else None


def bucket_now(
    tokens: float, tokens_at: datetime, now: datetime, flow: FlowRules
) -> tuple[float, datetime | None]:
    """A key's bucket level at ``now`` and when it next holds a whole token (None: now)."""
    assert flow.key_rate is not None
    level = bucket_tokens(tokens, _elapsed(tokens_at, now), flow.key_rate, flow.key_burst)
    if level >= 1:
        return level, None
    return level, now + timedelta(seconds=next_token_in(level, flow.key_rate))
