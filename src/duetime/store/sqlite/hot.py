"""The SQLite store's create, claim and complete: the rules of :mod:`duetime.store.core.hot`
run as a few statements in the caller's write transaction (one writer: nobody acts in between,
and ``executemany`` writes a batch's rows for one prepared statement).

They stay functions on the connection, not plans: ``executemany`` and the claim's sort on
``rowid`` have no plan vocabulary, and schedules create tasks inside their own transaction.
"""

from __future__ import annotations

import functools
import heapq
import operator
import random
import re
import sqlite3
from collections import Counter
from collections.abc import Callable, Iterator, MutableMapping, Sequence
from typing import Any, TypeVar

from duetime.ids import new_ids
from duetime.store.core import hot as rules
from duetime.store.core import rows
from duetime.store.core.follow import settle
from duetime.store.core.outbox import dead_lettered
from duetime.store.core.plan import Woken
from duetime.store.ended import EndedFeed
from duetime.store.recorded import recordable
from duetime.store.sql import load
from duetime.store.sqlite import driver
from duetime.store.sqlite.driver import SqliteDecode as D
from duetime.store.sqlite.flow import claim_flow, create_flowing
from duetime.store.sqlite.rows import dumps, from_micros, retry_to_json, to_micros
from duetime.store.sqlite.signals import LocalSignal, Wakeups
from duetime.types import (
    AttemptOutcome,
    ClaimRequest,
    Completion,
    CompletionResult,
    Lease,
    NewTask,
    Task,
    TaskCreated,
    TaskStatus,
)

T = TypeVar("T")
Q = {name: q.text for name, q in load(__package__ or "", "sqlite", "hot_batch.sql").items()}
# executemany binds each row as a tuple to ?NNN (numbered in order of first use, as the loader
# numbers PostgreSQL's): SQLite reads a 27-column row from a tuple in ~3 µs, by name from a dict
# in ~10 µs (measured, docs/adr/0005-store-core.md).
_MANY = {
    name: (re.sub(r"\$(\d+)", r"?\1", q.text), operator.itemgetter(*q.names))
    for name, q in load(__package__ or "", "postgres", "hot_batch.sql").items()
    if name in ("task_insert", "task_dep_insert", "attempt_insert")
}


def _many(conn: sqlite3.Connection, name: str, rows: list[dict[str, Any]]) -> None:
    text, values = _MANY[name]
    conn.executemany(text, map(values, rows))


def _dicts(cursor: sqlite3.Cursor) -> list[dict[str, Any]]:
    """The rows as dicts: ``sqlite3.Row`` finds a key by scanning every column name."""
    names = [c[0] for c in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


# -- create ------------------------------------------------------------------------------------


def task_create_many(
    conn: sqlite3.Connection, now: int, tasks: Sequence[NewTask], ids: Sequence[str] = ()
) -> list[TaskCreated]:
    """Create ``tasks`` all or nothing; repeats of an idempotency key return the existing task.
    ``ids``: the new tasks' ids, one per task (default: new ones)."""
    fresh, slots = rules.first_of_each_key(tasks)
    known = _existing_by_idempotency_key(conn, fresh)
    wanted = list(dict.fromkeys(parent for new in fresh for parent in new.depends_on))
    found = conn.execute(Q["task_parent_states"], {"ids": dumps(wanted)}) if wanted else ()
    parents = rules.parent_statuses(fresh, {r[0]: (r[1], r[2]) for r in found})
    at = from_micros(now)
    made: list[TaskCreated] = []
    inserts: list[dict[str, Any]] = []
    edges: list[dict[str, str]] = []
    # One per task, used or not (an idempotent hit makes none).
    ids = list(ids) if ids else new_ids(len(fresh))
    for new, statuses, task_id in zip(fresh, parents, ids, strict=True):
        hit = known.get((new.tenant_id, new.idempotency_key or ""))
        if hit is not None:
            made.append(TaskCreated(task=hit, created=False))
            continue
        run_at = None if new.run_at is None else from_micros(to_micros(new.run_at))
        task, pending = rules.created(new, task_id, statuses, tuple(new.depends_on), run_at, at)
        inserts.append(_insert_row(new, task, pending, now))
        edges.extend({"parent_id": p, "child_id": task.id} for p in dict.fromkeys(new.depends_on))
        made.append(TaskCreated(task=task, created=True))
    _many(conn, "task_insert", inserts)
    if edges:
        _many(conn, "task_dep_insert", edges)
        marked = list(dict.fromkeys(edge["parent_id"] for edge in edges))
        conn.execute(Q["task_mark_has_dependents"], {"ids": dumps(marked)})
    return rules.in_input_order(slots, made)


def _existing_by_idempotency_key(
    conn: sqlite3.Connection, tasks: Sequence[NewTask]
) -> dict[tuple[str, str], Task]:
    keys: dict[str, list[str]] = {}
    for new in tasks:
        if new.idempotency_key is not None:
            keys.setdefault(new.tenant_id, []).append(new.idempotency_key)
    known: dict[tuple[str, str], Task] = {}
    for tenant_id, wanted in keys.items():
        params = {"tenant_id": tenant_id, "keys": dumps(wanted)}
        for row in _dicts(conn.execute(Q["task_find_by_idempotency_keys"], params)):
            known[tenant_id, row["idempotency_key"]] = rows.task(row, D)
    return known


def _insert_row(new: NewTask, task: Task, pending: int, now: int) -> dict[str, Any]:
    return {
        "id": task.id,
        "tenant_id": new.tenant_id,
        "name": new.name,
        "queue": new.queue,
        "status": task.status.value,
        "target_type": rules.target_type(new),
        "target": dumps(new.target),
        "payload": new.payload_json,
        "idempotency_key": new.idempotency_key,
        "priority": new.priority,
        "retry": retry_to_json(new.retry),
        "timeout_seconds": task.timeout_seconds,
        "depends_on": dumps(list(new.depends_on)),
        "pending_parents": pending,
        "concurrency_key": new.concurrency_key,
        "labels": dumps(dict(new.labels)),
        "schedule_id": new.schedule_id,
        "scheduled_for": None if new.scheduled_for is None else to_micros(new.scheduled_for),
        "run_at": to_micros(task.run_at),
        "now": now,
        "finished_at": None if task.finished_at is None else now,
        "last_error": task.last_error,
        "traceparent": new.traceparent,
        "request_hash": new.request_hash,
        "payload_ref": new.payload_ref,
        "flow_key": new.flow_key,
    }


# -- claim -------------------------------------------------------------------------------------


def task_claim(
    conn: sqlite3.Connection,
    now: int,
    request: ClaimRequest,
    refill: list[float] | None = None,
    cursors: MutableMapping[tuple[str, str], str] | None = None,
) -> list[Lease]:
    """Claim from queues without limits (paused and limited queues skipped), then from each
    limited queue within its room, in the same write transaction: nobody can claim in between.

    Push claims are shared across tenants with ready push work, by weight
    (:func:`~duetime.store.core.hot.claim_shares`), each tenant's share in its own priority and
    due order. A limited queue's room is the claim's room cut to ``max_concurrency`` less its
    running tasks and to its bucket's whole tokens; with ``max_concurrency_per_key`` the keyed
    claim picks, with a keyed rate limit the keyed claim (:func:`.flow.claim_flow`; ``cursors``
    keep where each queue's next one starts). When a bucket runs dry, the seconds until its next
    token are appended to ``refill`` (the caller wakes claimers then)."""
    kind = rules.claim_kind(request)
    if kind is None:
        return []
    rooms = conn.execute(Q["tenant_rooms"], {"tenant_id": request.tenant_id}).fetchall()
    request = rules.with_tenant_rooms(request, dict(rooms))
    params: dict[str, Any] = {
        "now": now,
        "lease_us": None if request.lease_seconds is None else _micros(request.lease_seconds),
        "grace_us": _micros(request.lease_grace_seconds),
        "worker_id": request.worker_id,
        "names": None if request.names is None else dumps(list(request.names)),
        "types": dumps(sorted(str(t) for t in request.target_types)),
        "queue": request.queue,
        "tenant_id": request.tenant_id,
        "limit": request.limit,
        "exclude": dumps(request.excluded_tenants),
    }
    held: set[tuple[str, str]] = set()
    if kind == "push":
        ready: list[rules.ReadyQueue] = []
        for tenant_id, queue, weight, is_held in _ready_push_queues(conn, params):
            if tenant_id in request.excluded_tenants:
                continue
            if is_held:
                held.add((tenant_id, queue))
            else:
                ready.append((tenant_id, queue, weight))
        tenants, queues = rules.ready_tenants(ready)
        shares = rules.claim_shares(request.limit, tenants, request.room_of)
        leases: list[Lease] = []
        taken: Counter[str] = Counter()
        for _ in range(rules.MAX_SHARE_ROUNDS):
            got: dict[str, int] = {}
            for tenant_id, share in shares:
                claimed_now = _claim_push(conn, params, tenant_id, queues[tenant_id], share)
                got[tenant_id] = len(claimed_now)
                leases.extend(claimed_now)
            if len(tenants) <= 1:
                break
            taken.update(got)
            shares, tenants = rules.next_shares(
                request.limit - len(leases), tenants, shares, got, taken, request.room_of
            )
            if not shares:
                break
        leases.sort(key=rules.claim_order)
    else:
        if request.tenant_id is not None:
            params["limit"] = rules.tenant_take(request, request.tenant_id, request.limit, {})
        leases = _claimed(conn.execute(Q[_CLAIM[kind]], params)) if params["limit"] else []
    room = request.limit - len(leases)
    if room <= 0:
        return leases
    limited = _dicts(conn.execute(Q["queue_limited"], params))
    if kind == "push":  # the dispatcher: only limited queues with ready push tasks
        limited = [q for q in limited if (q["tenant_id"], q["name"]) in held]
    random.shuffle(limited)  # no tenant's limited queue always goes first
    worker_only = rules.claim_targets(request) == "worker"
    by_tenant = Counter(lease.task.tenant_id for lease in leases)
    for q in limited:
        if room <= 0:
            break
        one = {"tenant_id": q["tenant_id"], "queue": q["name"]}
        take = rules.tenant_take(request, q["tenant_id"], room, by_tenant)
        if q["max_concurrency"] is not None:
            running = conn.execute(Q["queue_running"], one).fetchone()[0]
            take = min(take, q["max_concurrency"] - running)
        rate = q["rate_limit_per_second"]
        elapsed = 0.0 if q["tokens_at"] is None else (now - q["tokens_at"]) / 1e6
        take, tokens = rules.limited_room(take, q["tokens"], elapsed, rate, q["burst"])
        claimed: list[Lease] = []
        if take > 0 and q["key_rate"] is not None:
            claimed, wait = claim_flow(
                conn, now, params, q, take, {} if cursors is None else cursors, _rowids(conn)
            )
            if wait is not None and refill is not None:
                refill.append(wait)
        elif take > 0:
            if q["max_concurrency_per_key"] is not None:
                query, extra = Q["task_claim_keyed"], {"per_key": q["max_concurrency_per_key"]}
            else:
                query = Q["task_claim_limited_worker" if worker_only else "task_claim_limited"]
                extra = {}
            claimed = _claimed(conn.execute(query, {**params, **one, **extra, "limit": take}))
        if tokens is not None:
            left = tokens - len(claimed)
            conn.execute(Q["queue_tokens_put"], {**one, "tokens": left, "now": now})
            if left < 1 and refill is not None:
                refill.append(rules.next_token_in(left, rate))
        leases.extend(claimed)
        by_tenant[q["tenant_id"]] += len(claimed)
        room -= len(claimed)
    return leases


_CLAIM = {"worker": "task_claim_worker", "any": "task_claim_any"}


def _ready_push_queues(
    conn: sqlite3.Connection, params: dict[str, Any]
) -> Iterator[tuple[str, str, int, bool]]:
    """Each (tenant, queue) with ready push tasks: its tenant's weight and whether the queue
    holds them back (paused or limited), one index probe each (``ready_push_queue_next``)."""
    after = ("", "")
    while True:
        step = {**params, "after_tenant": after[0], "after_queue": after[1]}
        found = conn.execute(Q["ready_push_queue_next"], step).fetchone()
        if found is None:
            return
        tenant_id, queue, weight, held = found
        yield tenant_id, queue, weight, bool(held)
        after = (tenant_id, queue)


def _claim_push(
    conn: sqlite3.Connection, params: dict[str, Any], tenant_id: str, queues: list[str], n: int
) -> list[Lease]:
    """A tenant's share ``n`` of a push claim, in its priority and due order across ``queues``:
    one claim for one queue, else up to ``n`` picked from each and the best ``n`` of them."""
    one = {**params, "tenant_id": tenant_id, "limit": n}
    if len(queues) == 1:
        return _claimed(conn.execute(Q["task_claim_push"], {**one, "queue": queues[0]}))
    picks = [
        (-priority, due_at, rowid)
        for queue in queues
        for rowid, priority, due_at in conn.execute(
            Q["task_ready_push_pick"], {**one, "queue": queue}
        )
    ]
    best = [rowid for _, _, rowid in heapq.nsmallest(n, picks)]
    return _claimed(conn.execute(Q["task_claim_rowids"], {**one, "rowids": dumps(best)}))


def _rowids(conn: sqlite3.Connection) -> Callable[[dict[str, Any], list[int]], list[Lease]]:
    """Leases the rows given, for one tenant's queue (``task_claim_rowids``)."""

    def claim(one: dict[str, Any], rowids: list[int]) -> list[Lease]:
        return _claimed(conn.execute(Q["task_claim_rowids"], {**one, "rowids": dumps(rowids)}))

    return claim


def _claimed(cursor: sqlite3.Cursor) -> list[Lease]:
    found = _dicts(cursor)
    # RETURNING order is unspecified: restore the claim order.
    found.sort(key=lambda row: (-row["priority"], row["due_at"], row["claim_rowid"]))
    return [rows.lease(row, D) for row in found]


def _micros(seconds: float) -> int:
    return round(seconds * 1_000_000)


# -- complete ----------------------------------------------------------------------------------


def task_complete_many(
    conn: sqlite3.Connection,
    now: int,
    completions: Sequence[Completion],
    wake: Wakeups,
    wake_ends: bool = False,
) -> list[CompletionResult]:
    """End attempts fenced by lease, write their attempt rows, then settle what follows the
    ends (:func:`duetime.store.core.follow.settle`); with ``wake_ends``, the ids of the tasks
    that ended go into ``wake`` (someone waits for ends).

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
    ended: list[tuple[str, int, bool] | None] = [None] * len(completions)
    for members in rounds:
        batch = dumps([_finish_item(completions[i]) for i in members])
        found = conn.execute(Q["task_finish"], {"batch": batch, "now": now}).fetchall()
        accepted = {r[0]: (r[1], r[2], bool(r[3])) for r in found}
        # A limited queue's task stopped running: its next may start now (SPEC §7).
        wake.ready |= any(r[4] for r in found)
        for i in members:
            ended[i] = accepted.get(completions[i].task_id)
    results: list[CompletionResult] = []
    attempts: list[dict[str, Any]] = []
    followed: list[tuple[str, str]] = []
    ends: list[str] = []
    dead: list[str] = []
    for done, settled in zip(completions, ended, strict=True):
        if settled is None:  # stale lease: fenced off, nothing changed
            results.append(CompletionResult(done.task_id, done.lease_id, False, None))
            continue
        status = TaskStatus(settled[0])
        results.append(CompletionResult(done.task_id, done.lease_id, True, status))
        attempts.append(
            {
                "task_id": done.task_id,
                "number": settled[1],
                "started_at": to_micros(done.started_at),
                "now": now,
                "outcome": str(done.outcome),
                "error": done.error,
                "http_status": done.http_status,
                "duration_ms": float(done.duration_ms),
                "worker": done.worker,
                "logs": done.logs,
                "response": done.response,
            }
        )
        wake.due |= status is TaskStatus.RETRYING
        if status.terminal:
            if wake_ends:
                ends.append(done.task_id)
            if settled[2]:
                followed.append((done.task_id, status.value))
            if status is TaskStatus.FAILED:
                dead.append(done.task_id)
    if attempts:
        _many(conn, "attempt_insert", attempts)
    if followed:  # dependents and callbacks: the rule every ending shares
        woken = Woken()
        settled_ends = driver.run(conn, now, settle(followed), woken)
        wake.ready |= woken.ready
        wake.due |= woken.due
        if wake_ends:
            ends.extend(settled_ends.ended)
    if dead:  # durable notifications, in the transaction of the end
        driver.run(conn, now, dead_lettered(dead))
    if wake_ends:
        wake.ended.extend(ends)
    return results


def _finish_item(done: Completion) -> list[Any]:
    """One element of ``task_finish``'s :batch (see hot_batch.sql)."""
    retrying = done.status is TaskStatus.RETRYING
    delay = done.retry_delay_seconds or 0.0
    return [
        done.task_id,
        done.lease_id,
        done.status.value,
        _micros(max(0.0, delay)) if retrying else None,
        done.result_json if done.status is TaskStatus.SUCCEEDED else None,
        done.error,
        done.outcome is AttemptOutcome.LEASE_EXPIRED,
    ]


def _create(conn: sqlite3.Connection, now: int, batch: list[NewTask]) -> list[TaskCreated]:
    """A create: in one go, or task by task when one has flow rules."""
    if any(t.flow is not None for t in batch):
        return create_flowing(conn, now, batch, task_create_many)
    return task_create_many(conn, now, batch)


class SqliteHot:
    """Create, claim and complete of :class:`~duetime.store.sqlite.backend.SqliteStore` (which
    provides ``_write``: one write transaction on its database thread, and ``_fire``)."""

    ready_signal: LocalSignal
    due_signal: LocalSignal
    ended: EndedFeed

    @functools.cached_property
    def _flow_cursors(self) -> MutableMapping[tuple[str, str], str]:
        """Per (tenant, queue): where the next keyed claim starts its list of keys."""
        return {}

    async def _write(
        self, body: Callable[[sqlite3.Connection, int], T], *, integrity_retries: int = 0
    ) -> T:
        raise NotImplementedError

    def _fire(self, wake: Wakeups) -> None:
        raise NotImplementedError

    async def task_create_many(self, tasks: Sequence[NewTask]) -> list[TaskCreated]:
        if not tasks:
            return []
        batch = list(tasks)
        # Under BEGIN IMMEDIATE nobody can insert between our idempotency lookup and our insert,
        # but should a unique index still fire, a re-run finds the winner as an idempotent hit.
        made = await self._write(lambda conn, now: _create(conn, now, batch), integrity_retries=2)
        rules.announce_created(made, self.ready_signal, self.due_signal)
        return made

    async def task_create_claimed(
        self, tasks: Sequence[NewTask], claim: ClaimRequest
    ) -> tuple[list[TaskCreated], list[Lease]]:
        """Create ``tasks`` and claim for ``claim`` in one write transaction (see
        :class:`~duetime.store.protocols.CreateHandoff`). Limited queues and tasks with parents
        too: every SQLite claim already runs in the one writer's transaction."""
        if not tasks:
            return [], []
        batch = list(tasks)
        refill: list[float] = []

        def body(conn: sqlite3.Connection, now: int) -> tuple[list[TaskCreated], list[Lease]]:
            made = _create(conn, now, batch)
            return made, task_claim(conn, now, claim, refill, self._flow_cursors)

        made, leases = await self._write(body, integrity_retries=2)
        if refill:
            self._refill.after(min(refill))
        return rules.announce_handed_over(made, leases, self.ready_signal, self.due_signal), leases

    async def task_claim(self, request: ClaimRequest) -> list[Lease]:
        refill: list[float] = []
        cursors = self._flow_cursors
        leases = await self._write(
            lambda conn, now: task_claim(conn, now, request, refill, cursors)
        )
        if refill:
            self._refill.after(min(refill))
        return leases

    @functools.cached_property
    def _refill(self) -> rules.RefillTimer:
        """Wakes this node's claimers when an empty bucket has a token again (other nodes that
        found it empty set their own)."""
        return rules.RefillTimer(self.ready_signal.notify)

    async def task_complete_many(self, completions: Sequence[Completion]) -> list[CompletionResult]:
        if not completions:
            return []
        batch = [recordable(c) for c in completions]
        wake = Wakeups()
        ends = self.ended.wanted
        done = await self._write(lambda conn, now: task_complete_many(conn, now, batch, wake, ends))
        self._fire(wake)
        return done
