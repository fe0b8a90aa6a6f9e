"""Keyed flow control's store rules, once for both backends (SPEC §7 "Keyed flow control"):
what a create with a uniqueness window, a debounce or a throttle does, the sweep of what keyed
rules leave behind, and the figures of a queue's keys.

**A create with flow rules** (:func:`decide`, one task at a time inside the create's write
transaction, before the backend inserts the task it decided): each rule holds its key's row in
``flow_ledger`` (``flow_ledger_hold``: an upsert that returns the row locked, so concurrent
creates of one key on any node wait for each other; SQLite has one writer), decides, and writes
the row back:

1. **unique**: a live window whose task is still in one of its ``states`` answers with that
   task; one whose task has left the hot store raises :class:`~duetime.errors.UniqueHeld`;
   otherwise the create takes the window (after the debounce below, for the task that answers).
2. **debounce**: a live debounce whose task is still ``scheduled`` absorbs the create
   (``task_absorb``: the latest payload, due ``period`` later but not past ``max_wait`` from
   the burst's first create, ``absorbed`` + 1); otherwise the new task starts a burst, due
   ``period`` from now.
3. **throttle**: the task runs at its key's next free slot (:func:`duetime.flow.timing`).

A repeated ``idempotency_key`` is answered first, as every create answers it. Because each task
is decided and inserted before the next, a batch's later tasks see its earlier ones as they
would another call's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from duetime.errors import UniqueHeld
from duetime.flow.timing import debounce_due, throttle_slot
from duetime.store.core import rows
from duetime.store.core.keyed import bucket_now
from duetime.store.core.plan import NOW, Decode, Plan, Row, all_, count, execute, one
from duetime.store.core.runner import Runs
from duetime.store.core.tasks import task_get
from duetime.types import FlowRules, KeyFigure, NewTask, Queue, Task, UniqueRule

SWEEP_BATCH = 1000
"""Rows each part of one sweep removes (or tasks it keys) at most."""
KEY_FIGURES_READ = 10_000
"""Ready tasks a queue's key figures count at most (the busiest keys among them)."""


@dataclass(frozen=True, slots=True)
class Held:
    """A ``flow_ledger`` row as a create holds it (``until`` None: just made, holds nothing)."""

    task_id: str | None
    since: datetime | None
    until: datetime | None
    states: tuple[str, ...]

    def live(self, now: datetime) -> bool:
        return self.until is not None and self.until > now


def _held(r: Row, d: type[Decode]) -> Held:
    return Held(d.opt_ident(r["task_id"]), d.opt_time(r["since"]), d.opt_time(r["until"]),
                d.ids(r["states"]))  # fmt: skip


@dataclass(frozen=True, slots=True)
class Decided:
    """What :func:`decide` made of one create: the task to insert (``new``), or the task that
    answers it (``existing``); ``notes`` for the answer (``TaskCreated.flow``), and the ledger
    rows (kind, key) now naming the new task, which the backend points at the existing task
    instead should the insert meet an idempotency key a racing create stored meanwhile."""

    new: NewTask | None
    existing: Task | None
    notes: tuple[tuple[str, str], ...] = ()
    holds: tuple[tuple[str, str], ...] = ()


def _hold(new: NewTask, kind: str, key: str) -> Any:
    return one("flow_ledger_hold", _held, tenant_id=new.tenant_id, queue=new.queue, kind=kind,
               key=key)  # fmt: skip


def _put(
    new: NewTask,
    kind: str,
    key: str,
    task_id: str | None,
    since: datetime | None,
    until: datetime,
    states: Sequence[str] | None = None,
) -> Any:
    return execute(
        "flow_ledger_put",
        tenant_id=new.tenant_id,
        queue=new.queue,
        kind=kind,
        key=key,
        task_id=task_id,
        since=since,
        until=until,
        states=None if states is None else list(states),
    )


def _seconds(value: float) -> timedelta:
    return timedelta(seconds=value)


def decide(new: NewTask, task_id: str) -> Plan[Decided]:
    """Apply ``new.flow`` for a create that would make ``task_id`` (see the module)."""
    ask = new.flow
    assert ask is not None
    if new.idempotency_key is not None:
        hit: Task | None = yield one(
            "flow_task_by_idempotency_key",
            rows.task,
            tenant_id=new.tenant_id,
            idempotency_key=new.idempotency_key,
        )
        if hit is not None:
            return Decided(None, hit)
    now: datetime = yield NOW
    unique: tuple[str, UniqueRule] | None = None
    if ask.unique is not None:
        key = ask.unique[0]
        held: Held = yield _hold(new, "unique", key)
        if held.live(now) and held.task_id is not None:
            task = yield from task_get(new.tenant_id, held.task_id)
            if task is None:
                raise UniqueHeld(
                    f"unique key {key!r} of queue {new.queue!r} is held by task "
                    f"{held.task_id} until {held.until:%Y-%m-%dT%H:%M:%SZ}; that task has "
                    "left the hot store",
                    held.task_id,
                    held.until,
                )
            if task.status.value in held.states:
                return Decided(None, task, (("unique", "existing"),))
        unique = ask.unique
    notes: list[tuple[str, str]] = []
    holds: list[tuple[str, str]] = []
    run_at = new.run_at
    if ask.debounce is not None:
        key, debounce = ask.debounce
        held = yield _hold(new, "debounce", key)
        if held.live(now) and held.task_id is not None and held.since is not None:
            due = debounce_due(now, held.since, debounce.period_seconds, debounce.max_wait_seconds)
            absorbed: Task | None = yield one(
                "task_absorb",
                rows.task,
                id=held.task_id,
                tenant_id=new.tenant_id,
                payload_json=new.payload_json,
                payload_ref=new.payload_ref,
                run_at=due,
            )
            if absorbed is not None:
                if unique is not None:
                    yield _take_unique(new, unique, absorbed.id, now)
                    notes.append(("unique", "created"))
                return Decided(None, absorbed, (*notes, ("debounce", "absorbed")))
        until = now + _seconds(debounce.max_wait_seconds)
        yield _put(new, "debounce", key, task_id, now, until)
        holds.append(("debounce", key))
        run_at = debounce_due(now, now, debounce.period_seconds, debounce.max_wait_seconds)
        notes.append(("debounce", "created"))
    if ask.throttle is not None:
        key, throttle = ask.throttle
        held = yield _hold(new, "throttle", key)
        arrival = now if run_at is None or run_at < now else run_at
        slot, tat = throttle_slot(held.until, arrival, throttle.rate, throttle.burst)
        yield _put(new, "throttle", key, None, None, tat)
        if slot > arrival:
            run_at = slot
        notes.append(("throttle", "delayed" if slot > arrival else "on_time"))
    if unique is not None:
        yield _take_unique(new, unique, task_id, now)
        holds.append(("unique", unique[0]))
        notes.insert(0, ("unique", "created"))
    return Decided(dataclasses.replace(new, run_at=run_at), None, tuple(notes), tuple(holds))


def _take_unique(new: NewTask, unique: tuple[str, UniqueRule], task_id: str, now: datetime) -> Any:
    key, rule = unique
    until = now + _seconds(rule.period_seconds)
    return _put(new, "unique", key, task_id, now, until, [s.value for s in rule.states])


def repoint(new: NewTask, holds: Sequence[tuple[str, str]], task_id: str) -> Plan[None]:
    """Point the ledger rows a create took (``holds``) at ``task_id``: the task its
    idempotency key found, which answers the create instead of the one it meant to make."""
    for kind, key in holds:
        yield execute("flow_ledger_repoint", tenant_id=new.tenant_id, queue=new.queue,
                      kind=kind, key=key, task_id=task_id)  # fmt: skip


def flow_sweep(limit: int) -> Plan[int]:
    """Remove ledger rows whose ``until`` has passed and buckets full by now, and key the ready
    tasks of queues with a keyed rate limit that came without a flow key (made before the limit
    was set, or by a node of an older release): they get ``""`` and follow the queue's own
    limits. Each part at most ``limit``; returns the rows changed."""
    gone: int = yield count("flow_ledger_sweep", limit=limit)
    full: int = yield count("flow_buckets_sweep", limit=limit)
    keyed: int = yield count("flow_keys_fill", limit=limit)
    return gone + full + keyed


def _figure(r: Row, d: type[Decode]) -> KeyFigure:
    return KeyFigure(r["key"], r["ready"], r["running"])


def _bucket(r: Row, d: type[Decode]) -> tuple[str, float, datetime]:
    return r["key"], r["tokens"], d.time(r["tokens_at"])


def queue_keys(queue: Queue, limit: int, keys: Sequence[str] = ()) -> Plan[list[KeyFigure]]:
    """The busiest keys of ``queue``'s keyed limits (most ready tasks first, among the first
    :data:`KEY_FIGURES_READ` ready tasks; then most running), at most ``limit``, each with its
    bucket when the queue has a keyed rate limit — and ``keys`` too, whatever they hold. Keys
    are flow keys with a keyed rate limit, else concurrency keys."""
    flow = queue.settings.flow
    by_flow = flow.key_rate is not None
    params = {"tenant_id": queue.tenant_id, "queue": queue.name}
    if not by_flow and queue.settings.max_concurrency_per_key is None:
        return []
    statement = "queue_keys_by_flow" if by_flow else "queue_keys_by_concurrency"
    found: list[KeyFigure] = yield all_(
        statement, _figure, **params, limit=limit, keys=list(keys), read=KEY_FIGURES_READ
    )
    if not by_flow or not found:
        return found
    buckets: list[tuple[str, float, datetime]] = yield all_(
        "flow_buckets_get", _bucket, **params, keys=[f.key for f in found]
    )
    now: datetime = yield NOW
    return with_buckets(found, buckets, now, flow)


def with_buckets(
    found: Sequence[KeyFigure],
    buckets: Sequence[tuple[str, float, datetime]],
    now: datetime,
    flow: FlowRules,
) -> list[KeyFigure]:
    """``found`` with each key's bucket level at ``now`` and when its next start is allowed
    (by the claim's own rule)."""
    levels = {key: (tokens, at) for key, tokens, at in buckets}
    out: list[KeyFigure] = []
    for figure in found:
        level = levels.get(figure.key)
        if level is None or not figure.key or flow.key_rate is None:
            out.append(figure)
            continue
        tokens, next_at = bucket_now(level[0], level[1], now, flow)
        out.append(dataclasses.replace(figure, tokens=tokens, next_start_at=next_at))
    return out


class FlowMethods(Runs):
    """The flow methods of :class:`~duetime.store.protocols.Store` that are plans, for both
    backends (creates and claims are the backends', through :func:`decide` and
    :mod:`duetime.store.core.keyed`)."""

    async def flow_sweep(self, limit: int = SWEEP_BATCH) -> int:
        if limit <= 0:
            return 0
        return await self._run(flow_sweep(limit), write=True)

    async def queue_keys(
        self, queue: Queue, limit: int = 10, keys: Sequence[str] = ()
    ) -> list[KeyFigure]:
        return await self._run(queue_keys(queue, limit, keys), snapshot=True)
