"""Task transactions the engine runs: promote, claim, complete, heartbeat, reap.

Every function runs on the store's database thread inside a write transaction the caller opened;
``now`` is the store's now in microseconds. Batches are one statement (claim, promote, heartbeat)
or one prepared statement run per item (complete), all in that single transaction.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from duetime.store.isolation import readable
from duetime.store.sqlite.dependencies import fail_dependents, release_dependents
from duetime.store.sqlite.queries import QUERIES as Q
from duetime.store.sqlite.rows import (
    dumps,
    from_micros,
    lease_from_row,
    seconds_to_micros,
    to_micros,
)
from duetime.store.sqlite.signals import Wakeups
from duetime.types import (
    AttemptOutcome,
    ClaimRequest,
    Completion,
    CompletionResult,
    Lease,
    TargetType,
    TaskStatus,
)


def task_promote_due(conn: sqlite3.Connection, now: int, limit: int, wake: Wakeups) -> int:
    """Move up to ``limit`` due scheduled/retrying tasks to ready, earliest due first."""
    if limit <= 0:
        return 0
    moved = conn.execute(Q["task_promote_due"], {"now": now, "limit": limit}).rowcount
    if moved:
        wake.ready = True
    return moved


def task_due_ids(conn: sqlite3.Connection, now: int, limit: int) -> list[str]:
    """The ids :func:`task_promote_due` would move, earliest due first."""
    if limit <= 0:
        return []
    return [row["id"] for row in conn.execute(Q["task_due_ids"], {"now": now, "limit": limit})]


def task_promote(conn: sqlite3.Connection, now: int, task_ids: Sequence[str], wake: Wakeups) -> int:
    """Move the tasks among ``task_ids`` that are still due scheduled/retrying ones to ready."""
    if not task_ids:
        return 0
    moved = conn.execute(Q["task_promote"], {"now": now, "ids": dumps(list(task_ids))}).rowcount
    if moved:
        wake.ready = True
    return moved


def task_next_due_at(conn: sqlite3.Connection, now: int) -> datetime | None:
    row = conn.execute(Q["task_next_due_at"]).fetchone()
    return None if row is None or row["due_at"] is None else from_micros(row["due_at"])


def task_claim(conn: sqlite3.Connection, now: int, request: ClaimRequest) -> list[Lease]:
    """Lease up to ``request.limit`` ready tasks: priority DESC, then due_at, then insertion."""
    if request.limit <= 0 or not request.target_types:
        return []
    params: dict[str, Any] = {
        "now": now,
        "lease_us": None
        if request.lease_seconds is None
        else seconds_to_micros(request.lease_seconds),
        "grace_us": seconds_to_micros(request.lease_grace_seconds),
        "worker_id": request.worker_id,
        "names": None if request.names is None else dumps(list(request.names)),
        "limit": request.limit,
        "tenant_id": request.tenant_id,
    }
    # Pick the statement whose WHERE matches a partial index (see 0001_init.sql).
    if TargetType.WORKER not in request.target_types:
        params["types"] = dumps(sorted(str(t) for t in request.target_types))
        params["queue"] = request.queue
        query = Q["task_claim_push"]
    elif (
        request.target_types == {TargetType.WORKER}
        and request.queue is not None
        and request.tenant_id is not None
    ):
        params["queue"] = request.queue
        query = Q["task_claim_worker_queue"]
    else:
        params["types"] = dumps(sorted(str(t) for t in request.target_types))
        params["queue"] = request.queue
        query = Q["task_claim_any"]
    rows = conn.execute(query, params).fetchall()
    # RETURNING order is unspecified: restore the claim order.
    rows.sort(key=lambda row: (-row["priority"], row["due_at"], row["claim_rowid"]))
    return [lease_from_row(row) for row in rows]


def task_complete_many(
    conn: sqlite3.Connection, now: int, completions: Sequence[Completion], wake: Wakeups
) -> list[CompletionResult]:
    """End attempts fenced by lease, write their attempt rows, then settle dependents.

    The batch runs as set-based UPDATEs in "rounds": round k holds the k-th completion of each
    task id, so within one statement a task appears once and repeats see the earlier outcome,
    exactly as if the completions ran one by one in input order.
    """
    rounds: list[list[int]] = []
    seen: dict[str, int] = {}
    for index, done in enumerate(completions):
        k = seen.get(done.task_id, 0)
        seen[done.task_id] = k + 1
        if k == len(rounds):
            rounds.append([])
        rounds[k].append(index)
    outcome: list[tuple[str, int, bool] | None] = [None] * len(completions)
    for members in rounds:
        batch = [_finish_item(completions[i]) for i in members]
        rows = conn.execute(Q["task_finish"], {"batch": dumps(batch), "now": now})
        accepted = {row["id"]: row for row in rows}
        for i in members:
            row = accepted.get(completions[i].task_id)
            if row is not None:
                outcome[i] = (row["status"], row["attempts"], bool(row["has_dependents"]))

    results: list[CompletionResult] = []
    attempts: list[tuple[Any, ...]] = []
    succeeded_parents: list[str] = []
    dead_parents: list[str] = []
    for done, settled in zip(completions, outcome, strict=True):
        if settled is None:  # stale lease: fenced off, nothing changed
            results.append(CompletionResult(done.task_id, done.lease_id, False, None))
            continue
        status = TaskStatus(settled[0])
        results.append(CompletionResult(done.task_id, done.lease_id, True, status))
        attempts.append(
            (
                done.task_id,
                settled[1],
                to_micros(done.started_at),
                now,
                str(done.outcome),
                done.error,
                done.http_status,
                float(done.duration_ms),
                done.worker,
            )
        )
        if status is TaskStatus.RETRYING:
            wake.due = True
        if settled[2]:
            if status is TaskStatus.SUCCEEDED:
                succeeded_parents.append(done.task_id)
            elif status is not TaskStatus.RETRYING:
                dead_parents.append(done.task_id)
    if attempts:
        conn.executemany(Q["attempt_insert"], attempts)
    for parent_id in succeeded_parents:
        release_dependents(conn, now, parent_id, wake)
    fail_dependents(conn, now, dead_parents)
    return results


def _finish_item(done: Completion) -> list[Any]:
    """One element of ``task_finish``'s :batch (see queries.sql)."""
    ok = done.outcome is AttemptOutcome.SUCCEEDED
    delay = done.retry_delay_seconds
    return [
        done.task_id,
        done.lease_id,
        ok,
        None if ok or delay is None else seconds_to_micros(max(0.0, delay)),
        done.result_json if ok else None,
        done.error,
        done.outcome is AttemptOutcome.LEASE_EXPIRED,
    ]


def task_heartbeat(
    conn: sqlite3.Connection, now: int, lease_ids: Sequence[str], extend_seconds: float
) -> dict[str, datetime]:
    """Extend each live lease (running, not yet expired); absent from the result = stale."""
    if not lease_ids:
        return {}
    rows = conn.execute(
        Q["task_heartbeat"],
        {
            "lease_ids": dumps(list(lease_ids)),
            "expires_at": now + seconds_to_micros(extend_seconds),
            "now": now,
        },
    )
    return {row["lease_id"]: from_micros(row["lease_expires_at"]) for row in rows}


def task_expired_leases(conn: sqlite3.Connection, now: int, limit: int) -> list[Lease]:
    """Running tasks whose lease expired by ``now``, oldest expiry first."""
    if limit <= 0:
        return []
    rows = conn.execute(Q["task_expired_leases"], {"now": now, "limit": limit})
    return readable(rows, lease_from_row, "task")
