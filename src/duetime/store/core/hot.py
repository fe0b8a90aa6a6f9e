"""The hot path's rules, once for both backends: a new task's starting status, the Task a create
hands back, which claim statement serves a request, and the engine's single-statement calls
(promote, heartbeat, reap) as plans.

Create, claim and complete keep a per-backend strategy (``store/sqlite/hot.py``,
``store/postgres/hot.py``) where a measurement says so: ``docs/adr/0005-store-core.md``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import heapq
import math
import random
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Literal

from duetime.errors import ValidationError
from duetime.ids import is_uuid
from duetime.store.core import rows
from duetime.store.core.dependencies import DEPENDENCY_FAILED
from duetime.store.core.plan import Decode, Plan, Row, Wake, all_, count, one
from duetime.store.core.runner import Runs
from duetime.store.isolation import readable
from duetime.types import ClaimRequest, Lease, NewTask, TargetType, Task, TaskCreated, TaskStatus

if TYPE_CHECKING:
    from duetime.store.protocols import Signal

"""``last_error`` of a task failed by its parents (PostgreSQL's ``task_insert`` says it too)."""

ClaimKind = Literal["push", "worker", "any"]


def starting_status(
    parents: Iterable[str], run_at: datetime | None, now: datetime | None
) -> tuple[TaskStatus, int]:
    """A new task's status and its count of parents still to succeed.

    ``parents`` are the statuses of its distinct parents. A failed or cancelled parent fails it;
    a parent not yet succeeded blocks it; otherwise it is ready when ``run_at`` (None = now) is
    not after ``now``, else scheduled. ``now=None`` leaves that last choice to the database
    clock and answers READY for it (PostgreSQL's ``task_insert`` decides it, see the ADR)."""
    pending = 0
    dead = False
    for status in parents:
        if status in ("failed", "cancelled"):
            dead = True
        elif status != "succeeded":
            pending += 1
    if dead:
        return TaskStatus.FAILED, pending
    if pending:
        return TaskStatus.BLOCKED, pending
    if run_at is None or now is None or run_at <= now:
        return TaskStatus.READY, 0
    return TaskStatus.SCHEDULED, 0


def created(
    new: NewTask,
    task_id: str,
    parents: Iterable[str],
    depends_on: tuple[str, ...],
    run_at: datetime | None,
    now: datetime,
) -> tuple[Task, int]:
    """A new task as its row reads once stored at ``now``, and its count of parents still to
    succeed: ``run_at`` (``new.run_at`` as the backend stores it; None = ``now``), the status by
    :func:`starting_status` from the statuses of its distinct ``parents``. Both backends report
    their creates with it (PostgreSQL on the clock its insert returned)."""
    when = now if run_at is None else run_at
    status, pending = starting_status(parents, when, now)
    return created_task(new, task_id, status, depends_on, when, now), pending


def created_task(
    new: NewTask,
    task_id: str,
    status: TaskStatus,
    parents: tuple[str, ...],
    run_at: datetime,
    created_at: datetime,
) -> Task:
    """The :class:`Task` a create just stored for ``new`` (what reading its row gives back)."""
    failed = status is TaskStatus.FAILED
    return Task(
        id=task_id,
        tenant_id=new.tenant_id,
        name=new.name,
        queue=new.queue,
        status=status,
        version=1,
        target=new.target,
        payload_json=new.payload_json,
        idempotency_key=new.idempotency_key,
        priority=new.priority,
        retry=new.retry,
        timeout_seconds=float(new.timeout_seconds),
        depends_on=parents,
        concurrency_key=new.concurrency_key,
        labels=new.labels,
        attempts=0,
        series_start=0,
        schedule_id=new.schedule_id,
        scheduled_for=None if new.scheduled_for is None else new.scheduled_for.astimezone(UTC),
        run_at=run_at,
        due_at=run_at,
        created_at=created_at,
        updated_at=created_at,
        finished_at=created_at if failed else None,
        last_error=DEPENDENCY_FAILED if failed else None,
        traceparent=new.traceparent,
        request_hash=new.request_hash,
        payload_ref=new.payload_ref,
        flow_key=new.flow_key,
    )


def target_type(new: NewTask) -> str:
    """The ``target_type`` column of a new task (``ValidationError`` without one)."""
    kind = new.target.get("type")
    if not isinstance(kind, str):
        raise ValidationError("target.type is required", "target.type")
    return kind


def unknown_parent(parent: str) -> ValidationError:
    """The error for a ``depends_on`` id the tenant has no task for."""
    return ValidationError(f"depends_on: no task with id {parent!r}", "depends_on")


def parent_statuses(
    tasks: Sequence[NewTask], found: Mapping[str, tuple[str, str]]
) -> list[list[str]]:
    """Per task, the statuses of its distinct parents, from ``found`` (id → (tenant, status));
    ``ValidationError`` for a parent that is not a task of the same tenant."""
    statuses: list[list[str]] = []
    for new in tasks:
        mine = []
        for parent in dict.fromkeys(new.depends_on):
            tenant, status = found.get(parent, ("", ""))
            if tenant != new.tenant_id:
                raise unknown_parent(parent)
            mine.append(status)
        statuses.append(mine)
    return statuses


def first_of_each_key(tasks: Sequence[NewTask]) -> tuple[list[NewTask], list[int]]:
    """The tasks to create (a (tenant, idempotency key) repeated in the batch only once), and
    per input its index among them, or ``-1 - i`` when it repeats input ``i``."""
    first: dict[tuple[str, str], int] = {}
    fresh: list[NewTask] = []
    slots: list[int] = []
    for i, new in enumerate(tasks):
        target_type(new)
        if new.idempotency_key is not None:
            key = (new.tenant_id, new.idempotency_key)
            if key in first:
                slots.append(-1 - first[key])
                continue
            first[key] = i
        slots.append(len(fresh))
        fresh.append(new)
    return fresh, slots


def in_input_order(slots: list[int], made: list[TaskCreated]) -> list[TaskCreated]:
    """The results of :func:`first_of_each_key`'s tasks, one per input; a repeat is a hit."""
    out: list[TaskCreated] = []
    for slot in slots:
        out.append(made[slot] if slot >= 0 else TaskCreated(out[-1 - slot].task, created=False))
    return out


_WORKER_ONLY = frozenset({TargetType.WORKER})


def claim_targets(request: ClaimRequest) -> ClaimKind:
    """Which ready tasks a claim reads: ``push`` targets, ``worker`` tasks, or ``any`` mix."""
    if TargetType.WORKER not in request.target_types:
        return "push"
    return "worker" if request.target_types == _WORKER_ONLY else "any"


def claim_kind(request: ClaimRequest) -> ClaimKind | None:
    """The claim statement whose WHERE matches a partial index (``task_claim_<kind>``): the
    worker one needs a tenant and a queue. None when the request can claim nothing."""
    if request.limit <= 0 or not request.target_types:
        return None
    kind = claim_targets(request)
    if kind == "worker" and (request.queue is None or request.tenant_id is None):
        return "any"
    return kind


def claim_order(lease: Lease) -> tuple[int, datetime]:
    """RETURNING has no order: claims hand out the most urgent first."""
    return -lease.task.priority, lease.task.due_at


# -- flow control (SPEC §7) ----------------------------------------------------------------------


Cap = Callable[[str], "int | None"]
"""How many a claim may take from a tenant (None: no bound): :meth:`ClaimRequest.room_of`."""


def announce_created(made: Iterable[TaskCreated], ready_signal: Signal, due_signal: Signal) -> None:
    """After a create commits: wake the long polls for ready ``worker`` tasks and the
    dispatchers too for ready push tasks, and the promoter for the earliest scheduled one unless
    it wakes by then anyway (``notify_due``)."""
    ready, push, due = created_wake(made)
    if ready:
        ready_signal.notify(pulls_only=not push)
    if due is not None:
        due_signal.notify_due(due)


def announce_handed_over(
    made: Iterable[TaskCreated], leases: Sequence[Lease], ready_signal: Signal, due_signal: Signal
) -> list[TaskCreated]:
    """After a create that claimed in its own transaction (a handoff to a waiting lease poll,
    :class:`~duetime.store.protocols.CreateHandoff`) commits: the tasks the claim took are
    answered as they are now, running under their leases, and only the others are announced."""
    running = {lease.task.id: lease.task for lease in leases}
    answered = [TaskCreated(task=running.get(m.task.id, m.task), created=m.created) for m in made]
    announce_created((m for m in answered if m.task.id not in running), ready_signal, due_signal)
    return answered


def created_wake(made: Iterable[TaskCreated]) -> tuple[bool, bool, datetime | None]:
    """What a create owes the signals: whether a task became ready, whether one of those is a
    push task (else only long polls can claim them), and the earliest due time of the scheduled
    ones (None: no task was scheduled)."""
    ready = push = False
    due: datetime | None = None
    for c in made:
        if not c.created:
            continue
        status = c.task.status
        if status is TaskStatus.READY:
            ready = True
            push = push or c.task.target["type"] != TargetType.WORKER
        elif status is TaskStatus.SCHEDULED and (due is None or c.task.run_at < due):
            due = c.task.run_at
    return ready, push, due


ReadyQueue = tuple[str, str, int]
"""A (tenant id, queue, tenant weight) with ready push work a claim may take."""


def ready_tenants(
    ready: Iterable[ReadyQueue],
) -> tuple[list[tuple[str, int]], dict[str, list[str]]]:
    """The tenants of ``ready`` with their weights (the input of :func:`claim_shares`), and each
    one's queues, both in the order given."""
    tenants: dict[str, int] = {}
    queues: dict[str, list[str]] = {}
    for tenant, queue, weight in ready:
        tenants.setdefault(tenant, weight)
        queues.setdefault(tenant, []).append(queue)
    return list(tenants.items()), queues


def _no_cap(tenant_id: str) -> int | None:
    return None


def claim_shares(
    limit: int,
    tenants: Sequence[tuple[str, int]],
    cap: Cap = _no_cap,
    rng: random.Random = random.Random(),
) -> list[tuple[str, int]]:
    """How many of a push claim's ``limit`` each tenant with ready work may take: its weighted
    share, rounded down, and the remainder one each to tenants drawn at random (so a tenant
    whose share is below one still gets claims, as often as its weight says, over many claims),
    each cut to its ``cap``. ``tenants`` are (tenant id, weight); tenants that get nothing are
    left out."""
    if not tenants:
        return []
    if len(tenants) == 1:
        shares = {tenants[0][0]: limit}
    else:
        total = sum(max(1, w) for _, w in tenants)
        shares = {t: limit * max(1, w) // total for t, w in tenants}
        left = limit - sum(shares.values())
        if left > 0:
            # Weighted draw without replacement of the tenants that get one more.
            keys = sorted(
                tenants, key=lambda tw: rng.random() ** (1.0 / max(1, tw[1])), reverse=True
            )
            for t, _ in keys[:left]:
                shares[t] += 1
    capped = ((t, _cut(n, cap(t))) for t, n in shares.items())
    return [(t, n) for t, n in capped if n > 0]


def _cut(n: int, cap: int | None) -> int:
    return n if cap is None else max(0, min(n, cap))


MAX_SHARE_ROUNDS = 8
"""At most this many rounds per push claim (see :func:`next_shares`)."""


def next_shares(
    room: int,
    tenants: Sequence[tuple[str, int]],
    shares: Sequence[tuple[str, int]],
    got: Mapping[str, int],
    taken: Mapping[str, int],
    cap: Cap = _no_cap,
) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    """The next round of a push claim with ``room`` left, and the tenants still in it.

    A tenant that took less than its share this round (``got``) has nothing more to give (its
    backlog is short, or held by paused or limited queues) and leaves, as does one that took its
    ``cap``. The others, those that got no share included, fill the room one task at a time to
    whoever has the least so far for its weight (``taken``: the claim's totals), so the claim
    ends as even as it can."""
    short = {t for t, n in shares if got.get(t, 0) < n}
    left = [(t, max(1, w)) for t, w in tenants if t not in short and _below(t, taken, cap, 0)]
    if room <= 0 or not left:
        return [], left
    heap = [(taken.get(t, 0) / w, i, t, w) for i, (t, w) in enumerate(left)]
    heapq.heapify(heap)
    extra: Counter[str] = Counter()
    for _ in range(room):
        if not heap:
            break
        _, i, t, w = heapq.heappop(heap)
        extra[t] += 1
        if _below(t, taken, cap, extra[t]):
            heapq.heappush(heap, ((taken.get(t, 0) + extra[t]) / w, i, t, w))
    return list(extra.items()), left


def _below(tenant_id: str, taken: Mapping[str, int], cap: Cap, extra: int) -> bool:
    """Whether ``tenant_id`` may take one more after ``taken`` and ``extra``."""
    limit = cap(tenant_id)
    return limit is None or taken.get(tenant_id, 0) + extra < limit


def with_tenant_rooms(request: ClaimRequest, rooms: Mapping[str, int]) -> ClaimRequest:
    """``request`` bounded by tenants' ``max_concurrency`` quotas too: ``rooms`` are those
    tenants' quotas less their running tasks (the tighter bound wins)."""
    if not rooms:
        return request
    merged = dict(request.tenant_room)
    for tenant_id, room in rooms.items():
        mine = request.room_of(tenant_id)
        merged[tenant_id] = max(0, room if mine is None else min(room, mine))
    return dataclasses.replace(request, tenant_room=merged)


def tenant_take(request: ClaimRequest, tenant_id: str, want: int, taken: Mapping[str, int]) -> int:
    """How many of ``want`` a claim may still take from ``tenant_id`` after ``taken``."""
    room = request.room_of(tenant_id)
    return want if room is None else max(0, min(want, room - taken.get(tenant_id, 0)))


class RefillTimer:
    """Wakes a store's claimers when a rate-limited queue's empty bucket has a token again: one
    timer per store, always for the soonest such moment (each node sets its own)."""

    def __init__(self, wake: Callable[[], None]) -> None:
        self._wake = wake
        self._handle: asyncio.TimerHandle | None = None

    def after(self, seconds: float) -> None:
        loop = asyncio.get_running_loop()
        at = loop.time() + seconds
        if self._handle is not None:
            if self._handle.when() <= at:
                return
            self._handle.cancel()
        self._handle = loop.call_at(at, self._fire)

    def _fire(self) -> None:
        self._handle = None
        self._wake()


def bucket_capacity(rate: float, burst: int | None) -> float:
    """A rate-limited queue's bucket: ``burst`` tokens, or one second's worth (at least 1)."""
    return float(burst) if burst is not None else float(max(1, math.ceil(rate)))


def bucket_tokens(tokens: float | None, elapsed: float, rate: float, burst: int | None) -> float:
    """The tokens in a queue's bucket ``elapsed`` seconds after it held ``tokens`` (None = full):
    refilled at ``rate`` per second up to its capacity."""
    capacity = bucket_capacity(rate, burst)
    if tokens is None:
        return capacity
    return min(capacity, max(0.0, tokens) + max(0.0, elapsed) * rate)


def next_token_in(tokens: float, rate: float) -> float:
    """Seconds until a bucket holding ``tokens`` (< 1) has a whole token again."""
    return max(0.0, 1.0 - tokens) / rate


def limited_room(
    room: int, tokens: float | None, elapsed: float, rate: float | None, burst: int | None
) -> tuple[int, float | None]:
    """How many a claim may take from a rate-limited queue, and the tokens it then holds before
    taking (None when the queue has no rate limit)."""
    if rate is None:
        return room, None
    now_tokens = bucket_tokens(tokens, elapsed, rate, burst)
    return min(room, math.floor(now_tokens)), now_tokens


# -- the engine's single statements -----------------------------------------------------------


def _held(r: Row, d: type[Decode]) -> tuple[str, datetime]:
    return d.ident(r["lease_id"]), d.time(r["lease_expires_at"])


def _id(r: Row, d: type[Decode]) -> str:
    return d.ident(r["id"])


def task_promote_due(limit: int) -> Plan[int]:
    moved: int = yield count("task_promote_due", limit=limit)
    if moved:
        yield Wake(ready=True)
    return moved


def task_due_ids(limit: int) -> Plan[list[str]]:
    found: list[str] = yield all_("task_due_ids", _id, limit=limit)
    return found


def task_promote(task_ids: list[str]) -> Plan[int]:
    moved: int = yield count("task_promote", ids=task_ids)
    if moved:
        yield Wake(ready=True)
    return moved


def task_next_due_at() -> Plan[datetime | None]:
    found: datetime | None = yield one("task_next_due_at", lambda r, d: d.opt_time(r["due_at"]))
    return found


def task_heartbeat(lease_ids: list[str], extend_seconds: float) -> Plan[dict[str, datetime]]:
    found: list[tuple[str, datetime]] = yield all_(
        "task_heartbeat", _held, lease_ids=lease_ids, extend_seconds=float(extend_seconds)
    )
    return dict(found)


def task_expired_leases(limit: int) -> Plan[list[Lease]]:
    found: list[Lease | None] = yield all_("task_expired_leases", _readable_lease, limit=limit)
    return [lease for lease in found if lease is not None]


def _readable_lease(r: Row, d: type[Decode]) -> Lease | None:
    """A lease, or None (logged) for a row that cannot be read (see ``isolation.readable``)."""
    found = readable((r,), lambda row: rows.lease(row, d), "task")
    return found[0] if found else None


_CANONICAL = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _uuids(ids: Sequence[str]) -> list[str]:
    """The ids that can name a row (PostgreSQL refuses to compare a uuid column with any other
    text); the canonical form, which the store hands out, is checked fastest."""
    return [i for i in ids if _CANONICAL.fullmatch(i) or is_uuid(i)]


class HotMethods(Runs):
    """The engine's single-statement task methods of the store protocol, for both backends.

    ``one=True``: one statement, which PostgreSQL runs without BEGIN/COMMIT round trips."""

    async def task_promote_due(self, limit: int) -> int:
        if limit <= 0:
            return 0
        return await self._run(task_promote_due(limit), write=True, one=True)

    async def task_due_ids(self, limit: int) -> list[str]:
        if limit <= 0:
            return []
        return await self._run(task_due_ids(limit))

    async def task_promote(self, task_ids: Sequence[str]) -> int:
        wanted = _uuids(task_ids)
        if not wanted:
            return 0
        return await self._run(task_promote(wanted), write=True, one=True)

    async def task_next_due_at(self) -> datetime | None:
        return await self._run(task_next_due_at())

    async def task_heartbeat(
        self, lease_ids: Sequence[str], extend_seconds: float
    ) -> dict[str, datetime]:
        wanted = _uuids(lease_ids)
        if not wanted:
            return {}
        return await self._run(task_heartbeat(wanted, extend_seconds), write=True, one=True)

    async def task_expired_leases(self, limit: int) -> list[Lease]:
        if limit <= 0:
            return []
        return await self._run(task_expired_leases(limit))
