"""The SQLite store's keyed flow control: creates with flow rules (each task decided by
:func:`duetime.store.core.flow.decide`, then inserted) and the claim of a queue with a keyed rate
limit (the rules of :mod:`duetime.store.core.keyed`), both inside the one writer's
transaction: nobody acts in between, so no ledger row needs a lock."""

from __future__ import annotations

import heapq
import sqlite3
from collections import Counter
from collections.abc import Callable, MutableMapping, Sequence
from typing import Any

from duetime.ids import new_ids
from duetime.store.core import flow, keyed
from duetime.store.core import hot as rules
from duetime.store.sql import load
from duetime.store.sqlite import driver
from duetime.store.sqlite.rows import from_micros, to_micros
from duetime.types import Lease, NewTask, TaskCreated

Q = {name: q.text for name, q in load(__package__ or "", "sqlite", "flow_claim.sql").items()}

CreateMany = Callable[
    [sqlite3.Connection, int, Sequence[NewTask], Sequence[str]], list[TaskCreated]
]
"""The store's plain create on a connection, under the ids given (``sqlite/hot.py``)."""
ClaimRowids = Callable[[dict[str, Any], list[int]], list[Lease]]
"""Leases the rows given (``task_claim_rowids``), in claim order."""


def create_flowing(
    conn: sqlite3.Connection, now: int, tasks: Sequence[NewTask], create: CreateMany
) -> list[TaskCreated]:
    """Create ``tasks`` in input order, each decided by its flow rules before it is inserted
    by ``create``."""
    done: list[TaskCreated] = []
    for new in tasks:
        rules.first_of_each_key([new])  # the target's type is checked before anything runs
        (task_id,) = new_ids(1)
        decided = flow.Decided(new, None)
        if new.flow is not None:
            decided = driver.run(conn, now, flow.decide(new, task_id))
        if decided.new is None:
            assert decided.existing is not None
            done.append(TaskCreated(decided.existing, False, decided.notes))
            continue
        (result,) = create(conn, now, [decided.new], [task_id])
        if result.created:
            result = TaskCreated(result.task, True, decided.notes)
        elif decided.holds:
            driver.run(conn, now, flow.repoint(new, decided.holds, result.task.id))
        done.append(result)
    return done


def claim_flow(
    conn: sqlite3.Connection,
    now: int,
    params: dict[str, Any],
    queue: dict[str, Any],
    take: int,
    cursors: MutableMapping[tuple[str, str], str],
    claim_rowids: ClaimRowids,
) -> tuple[list[Lease], float | None]:
    """Claim up to ``take`` of a queue with a keyed rate limit (``queue``: its row); the leases,
    and when to wake claimers for a key's next token (None: no key waits for one)."""
    rate, burst, per_key = queue["key_rate"], queue["key_burst"], queue["max_concurrency_per_key"]
    one = {**params, "tenant_id": queue["tenant_id"], "queue": queue["name"]}
    slot = (queue["tenant_id"], queue["name"])
    cap = keyed.scan_cap(take)
    heads = _heads(conn, one, cursors.get(slot), cap, per_key)
    # Said to have ready work, yet no key: tasks that came without a flow key.
    if not heads and conn.execute(Q["flow_keys_fill_queue"], {**one, "limit": take}).rowcount:
        heads = _heads(conn, one, None, cap, per_key)
    cursor = keyed.next_cursor(heads, cap)
    if cursor is None:
        cursors.pop(slot, None)
    else:
        cursors[slot] = cursor
    at = from_micros(now)
    takes, waiting = keyed.plan_takes(heads, take, at, rate, burst, per_key)
    picks: list[tuple[int, int, int, str, int, str]] = []
    for t in takes:
        if t.take == 1:  # the key's first task, as read
            picks.append((*t.head, t.key))
            continue
        for rowid, priority, due_at, created_at, task_id in conn.execute(
            Q["flow_key_pick"], {**one, "key": t.key, "n": t.take}
        ):
            picks.append((-priority, due_at, created_at, task_id, rowid, t.key))
    best = heapq.nsmallest(take, picks)
    leases = claim_rowids(one, [rowid for *_, rowid, _ in best]) if best else []
    taken = Counter(lease.task.flow_key or "" for lease in leases)
    writes, emptied = keyed.bucket_writes(takes, taken, at, rate, burst)
    for key, tokens, full_at in writes:
        conn.execute(
            Q["flow_bucket_put"],
            {**one, "key": key, "tokens": tokens, "now": now, "full_at": to_micros(full_at)},
        )
    return leases, keyed.refill_after(waiting, emptied)


def _heads(
    conn: sqlite3.Connection,
    one: dict[str, Any],
    cursor: str | None,
    cap: int,
    per_key: int | None,
) -> list[keyed.KeyHead]:
    """Up to ``cap`` keys with ready work after ``cursor``, then from the first key on."""
    heads = _read_heads(conn, one, cursor, None, cap, per_key)
    if len(heads) < cap and cursor is not None:
        heads += _read_heads(conn, one, None, cursor, cap - len(heads), per_key)
    return heads


def _read_heads(
    conn: sqlite3.Connection,
    one: dict[str, Any],
    after: str | None,
    upto: str | None,
    cap: int,
    per_key: int | None,
) -> list[keyed.KeyHead]:
    heads: list[keyed.KeyHead] = []
    while len(heads) < cap:
        step = {**one, "after": after, "upto": upto}
        query = Q["flow_key_first"] if after is None else Q["flow_key_next"]
        found = conn.execute(query, step).fetchone()
        if found is None:
            break
        key, priority, due_at, rowid, created_at, task_id = found
        bucket = conn.execute(Q["flow_bucket_get"], {**one, "key": key}).fetchone()
        running = None
        if per_key is not None and key:
            running = conn.execute(Q["flow_key_running"], {**one, "key": key}).fetchone()[0]
        heads.append(
            keyed.KeyHead(
                key,
                priority,
                from_micros(due_at),
                None if bucket is None else bucket[0],
                None if bucket is None else from_micros(bucket[1]),
                running,
                (-priority, due_at, created_at, task_id, rowid),
            )
        )
        after = key
    return heads
