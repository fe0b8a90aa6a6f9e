"""The lease API's machinery, kept out of the thin routes: long polls, worker sightings, and
ending attempts under leases (SPEC §3 "Queues and pull workers").

Long poll: a lease call claims at once; with nothing to claim it sleeps until the store's
``ready_signal`` fires (LISTEN/NOTIFY across PostgreSQL nodes, in-process on SQLite) and claims
again, until ``wait_seconds`` run out. It reads the signal's generation before each claim, so a
task made ready between the claim and the wait wakes it at once instead of being slept through.
Polls also re-claim every :data:`POLL_SLICE_SECONDS` (a lost signal). The store fires the signal
when a task of a limited queue stops running, so a poll waiting on a limited queue's free slot
claims at once (SPEC §7).

Acks: on a store that can (:class:`~duetime.store.protocols.LeaseCompleter`, PostgreSQL),
completions are ended by lease id in one statement with no read first; what that leaves (fails,
stale leases, tasks with dependents) takes the general path: one store round trip finds the
leases (the caller's tenant only, so another tenant's lease id is simply stale), one ends them
all; the attempt's retry delay comes from :func:`duetime.retry.next_retry_delay`, as for pushed
deliveries. An ack the store cannot record
is isolated (:mod:`duetime.store.isolation`): its task gets a failed attempt saying why, the
others in the call are recorded, and the call answers 200. Error and result text is cleaned and
bounded by the store (:mod:`duetime.store.recorded`), alike on both stores.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson
from starlette.requests import Request

from duetime import metrics
from duetime.clock import utcnow
from duetime.engine.pressure import Pulse
from duetime.errors import StoreUnavailable, TooManyRequests
from duetime.observe import tracing
from duetime.observe.endings import attempts_ended, trace_lease
from duetime.retry import next_retry_delay
from duetime.store.isolation import complete_isolated, reason
from duetime.store.protocols import ApiStore, CreateHandoff, LeaseCompleter, PullStore, Signal
from duetime.types import (
    AttemptOutcome,
    ClaimRequest,
    Completion,
    Lease,
    NewTask,
    TargetType,
    TaskCreated,
    TaskStatus,
)

log = logging.getLogger("duetime.api")

POLL_SLICE_SECONDS = 1.0
"""A waiting poll claims again at least this often, signal or not."""

MAX_WAITING_POLLS_PER_TENANT = 256
"""Lease calls of one tenant that may wait at once on one node; one more is a 429 (each waiting
poll holds a connection and claims again every slice, so an unbounded number is a lever one
tenant could pull against the node)."""

SIGHTING_INTERVAL_SECONDS = 1.0
"""A worker's ``last_seen_at`` is written at most this often per (worker, queue) per node."""

_CACHE_MAX_ENTRIES = 10_000
_WORKER_TYPES = frozenset({TargetType.WORKER})


class ReadyWatch:
    """The long polls' view of the store's ``ready_signal``: they read :attr:`generation` before
    claiming and, with nothing claimed, wait for it to move (``Signal.wait_after`` consumes
    nothing, so polls never take a wake-up from the dispatcher, nor it from them)."""

    def __init__(self, signal: Signal) -> None:
        self._signal = signal
        self._closed = asyncio.Event()

    @property
    def generation(self) -> int:
        return self._signal.generation

    @property
    def closing(self) -> bool:
        return self._closed.is_set()

    async def wait(
        self, seen: int, timeout: float, handed: asyncio.Future[list[Lease]] | None = None
    ) -> None:
        """Return when the signal fired since ``seen`` was read, after ``timeout``, on close, or
        when ``handed`` (a handoff to this poll) is done."""
        if self.closing or timeout <= 0:
            return
        fired = asyncio.ensure_future(self._signal.wait_after(seen, timeout))
        closed = asyncio.ensure_future(self._closed.wait())
        waits: set[asyncio.Future[Any]] = {fired, closed}
        if handed is not None:
            waits.add(handed)
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            fired.cancel()
            closed.cancel()

    def close(self) -> None:
        """End every waiting poll now (they answer with what they have); for server shutdown."""
        self._closed.set()


class _TtlSet:
    """Keys remembered for ``ttl`` seconds with a value; bounded (cleared when full)."""

    def __init__(self, ttl: float) -> None:
        self.ttl = ttl
        self._entries: dict[tuple[str, ...], tuple[float, bool]] = {}

    def get(self, key: tuple[str, ...]) -> bool | None:
        entry = self._entries.get(key)
        if entry is None or entry[0] <= time.monotonic():
            return None
        return entry[1]

    def put(self, key: tuple[str, ...], value: bool) -> None:
        if len(self._entries) >= _CACHE_MAX_ENTRIES:
            self._entries.clear()
        self._entries[key] = (time.monotonic() + self.ttl, value)

    def drop(self, key: tuple[str, ...]) -> None:
        self._entries.pop(key, None)


@dataclass(eq=False)
class _Waiter:
    """A waiting lease poll a create may hand its task to (:meth:`LeaseHub.create`)."""

    key: tuple[str, str]
    """(tenant, queue) it waits on."""
    claim: ClaimRequest
    handed: asyncio.Future[list[Lease]]


class LeaseHub:
    """What the lease routes of one app share (``app.state.lease_hub``, see :func:`hub`)."""

    def __init__(
        self, store: PullStore, pulse: Pulse | None = None, *, handoff: bool = True
    ) -> None:
        self.store = store
        self.pulse = pulse or Pulse()
        """Tasks leased and acked here count toward the node's busy hot path."""
        # Checked once: isinstance() against a runtime-checkable protocol costs ~10 µs a call.
        self._completer = store if isinstance(store, LeaseCompleter) else None
        self._handoff = store if handoff and isinstance(store, CreateHandoff) else None
        self.watch = ReadyWatch(store.ready_signal)
        self._sightings = _TtlSet(SIGHTING_INTERVAL_SECONDS)
        self._waiting: collections.Counter[str] = collections.Counter()
        # Waiting polls by (tenant, queue), oldest first, for handoffs (stores that can).
        self._waiters: dict[tuple[str, str], list[_Waiter]] = {}

    # -- workers -------------------------------------------------------------------------------

    async def seen(self, tenant_id: str, worker_id: str | None, queue: str) -> None:
        """Record a worker's call (a write at most once a second per worker and queue)."""
        if worker_id is None:
            return
        key = (tenant_id, worker_id, queue)
        if self._sightings.get(key) is None:
            self._sightings.put(key, True)
            await self.store.worker_seen(tenant_id, worker_id, [queue])

    # -- leasing -------------------------------------------------------------------------------

    async def lease(
        self,
        request: Request,
        tenant_id: str,
        queue: str,
        *,
        worker_id: str,
        max_tasks: int,
        lease_seconds: float,
        wait_seconds: float,
        names: Sequence[str] | None,
    ) -> list[Lease]:
        """Claim up to ``max_tasks``; with none ready, wait for one up to ``wait_seconds``."""
        claim = ClaimRequest(
            worker_id=worker_id,
            limit=max_tasks,
            target_types=_WORKER_TYPES,
            lease_seconds=lease_seconds,
            queue=queue,
            names=names,
            tenant_id=tenant_id,
        )
        await self.seen(tenant_id, worker_id, queue)
        watch = self.watch
        deadline = time.monotonic() + wait_seconds
        waiting = False
        waiter: _Waiter | None = None
        gone = False
        leases: list[Lease] = []
        try:
            while True:
                seen = watch.generation
                leases = await self.store.task_claim(claim)
                if not leases and waiter is not None and waiter.handed.done():
                    leases = waiter.handed.result()  # handed over while we claimed
                    waiter = None  # spent: a new one if this poll waits again
                left = deadline - time.monotonic()
                if leases or left <= 0 or watch.closing:
                    break
                if not waiting:
                    self._start_waiting(tenant_id)
                    waiting = True
                if self._handoff is not None and waiter is None:
                    waiter = self._await_handoff(claim, tenant_id, queue)
                handed = None if waiter is None else waiter.handed
                await watch.wait(seen, min(left, POLL_SLICE_SECONDS), handed)
                if waiter is not None and waiter.handed.done():
                    leases = waiter.handed.result()
                    if leases:
                        break  # handed over by a create: no claim of our own
                    waiter = None  # the create took nothing for us: claim, wait anew
                if await request.is_disconnected():
                    gone = True
                    break  # nobody to hand leases to: leave the tasks for the next poll
        except BaseException:
            gone = True  # nobody will get what a handoff brings
            raise
        finally:
            if waiting:
                self._waiting[tenant_id] -= 1
                if not self._waiting[tenant_id]:
                    del self._waiting[tenant_id]
            if waiter is not None:
                leases = await self._end_handoff(waiter, leases, gone)
        if leases:
            self.pulse.add(len(leases))
            metrics.child(metrics.LEASES_GRANTED, queue).inc(len(leases))
            metrics.observe_many(
                metrics.child(metrics.DUE_LAG, queue),
                [
                    max(0.0, (lease.task.started_at - lease.task.due_at).total_seconds())
                    for lease in leases
                    if lease.task.started_at is not None
                ],
            )
            if tracing.ENABLED:
                for lease in leases:
                    trace_lease(lease)
        return leases

    def _start_waiting(self, tenant_id: str) -> None:
        if self._waiting[tenant_id] >= MAX_WAITING_POLLS_PER_TENANT:
            raise TooManyRequests(
                f"{MAX_WAITING_POLLS_PER_TENANT} lease calls of this tenant are already waiting "
                "on this node; poll with fewer workers or wait_seconds 0",
                limit="long_polls_per_tenant",
                retry_after=POLL_SLICE_SECONDS,
            )
        self._waiting[tenant_id] += 1

    # -- handoffs ------------------------------------------------------------------------------

    def _await_handoff(self, claim: ClaimRequest, tenant_id: str, queue: str) -> _Waiter:
        """Register a waiting poll that a create may hand its task to."""
        waiter = _Waiter((tenant_id, queue), claim, asyncio.get_running_loop().create_future())
        self._waiters.setdefault(waiter.key, []).append(waiter)
        return waiter

    def _take_waiter(self, tenant_id: str, queue: str) -> _Waiter | None:
        """The oldest poll waiting on (tenant, queue), taken off the list (reserved for one
        create's handoff), or None."""
        key = (tenant_id, queue)
        found = self._waiters.get(key)
        if not found:
            return None
        waiter = found.pop(0)
        if not found:
            del self._waiters[key]
        return waiter

    async def _end_handoff(self, waiter: _Waiter, leases: list[Lease], gone: bool) -> list[Lease]:
        """A poll is ending: leave the list; a handoff still in flight (its create reserved
        this poll) is waited for and answered, unless the caller is gone, when what was handed
        over (or comes later) goes back to ready without spending an attempt."""
        found = self._waiters.get(waiter.key)
        if found is not None and waiter in found:
            found.remove(waiter)  # never reserved: nothing can arrive any more
            if not found:
                del self._waiters[waiter.key]
            waiter.handed.cancel()
            return leases
        if gone:
            if not waiter.handed.cancel() and leases is not waiter.handed.result():
                await self._release(waiter.handed.result())  # arrived, not taken
            await self._release(leases)  # a handoff still coming releases its own
            return []
        handed = await asyncio.shield(waiter.handed)
        if leases is handed or not handed:
            return leases
        if leases:  # claimed for itself meanwhile: the handoff would go past max_tasks
            await self._release(handed)
            return leases
        return handed

    async def _release(self, leases: Sequence[Lease]) -> None:
        if leases:
            try:
                await self.store.task_release([lease.lease_id for lease in leases])
            except Exception as exc:  # they come back when their leases expire
                log.warning("could not release %d handed-over leases: %s", len(leases), exc)

    def _waiter_for(self, new: Sequence[NewTask]) -> _Waiter | None:
        """The poll a create of ``new`` goes to, taken off the list: a lone worker task due
        now, with a poll of its queue waiting on this node. None otherwise."""
        if self._handoff is None or len(new) != 1 or not self._waiters:
            return None
        task = new[0]
        if task.target.get("type") != TargetType.WORKER.value or task.depends_on:
            return None
        if task.run_at is not None and task.run_at > utcnow():
            return None
        return self._take_waiter(task.tenant_id, task.queue)

    async def create(self, store: ApiStore, new: Sequence[NewTask]) -> list[TaskCreated]:
        """Create ``new`` (``store`` is the caller's; this hub's store serves handoffs). A
        lone worker task due now whose queue has a poll waiting on this node is created and
        claimed for that poll in one transaction (:class:`CreateHandoff`): one commit, and
        the poll answers without a wake-up and a claim of its own."""
        waiter, handoff = self._waiter_for(new), self._handoff
        if waiter is None or handoff is None:
            return await store.task_create_many(new)
        try:
            made, leases = await handoff.task_create_claimed(new, waiter.claim)
        except BaseException:
            if not waiter.handed.done():
                waiter.handed.set_result([])  # the poll claims for itself again
            raise
        if not waiter.handed.done():
            waiter.handed.set_result(leases)
            return made
        # The poll is gone: its tasks wait again, attempts unspent, and are answered so.
        await self._release(leases)
        if not any(lease.task.id == m.task.id for lease in leases for m in made):
            return made
        return [
            TaskCreated(
                task=await store.task_get(m.task.tenant_id, m.task.id) or m.task,
                created=m.created,
            )
            for m in made
        ]

    async def heartbeat(
        self, tenant_id: str, lease_id: str, extend_seconds: float
    ) -> tuple[Lease, datetime] | None:
        """Extend the caller's lease; None when it is not current (or not the caller's)."""
        found = await self.store.task_leases_get([lease_id], tenant_id=tenant_id)
        lease = found.get(lease_id)
        extended = None
        if lease is not None:
            extended = (await self.store.task_heartbeat([lease_id], extend_seconds)).get(lease_id)
        if lease is None or extended is None:
            metrics.LEASE_HEARTBEATS.labels("stale").inc()
            return None
        metrics.LEASE_HEARTBEATS.labels("ok").inc()
        await self.seen(tenant_id, lease.task.worker_id, lease.task.queue)
        return lease, extended

    # -- acks ----------------------------------------------------------------------------------

    async def ack(self, tenant_id: str, items: Sequence[Ack]) -> list[AckResult]:
        """End the attempts under the items' leases, fenced; results in input order."""
        self.pulse.add(len(items))
        out: list[AckResult | None] = [None] * len(items)
        ended_by: collections.Counter[tuple[str, str]] = collections.Counter()
        rest = list(range(len(items)))
        completer = self._completer
        # With tracing on, every ending takes the general path: its spans need the leases.
        if completer is not None and not tracing.ENABLED:
            ok = [i for i in rest if items[i].ok]
            if ok:
                fast = await _complete_leased(completer, tenant_id, [items[i] for i in ok])
                for i in ok:
                    hit = fast.get(items[i].lease_id)
                    if hit is not None:
                        task_id, queue = hit
                        ended_by[queue, AttemptOutcome.SUCCEEDED.value] += 1
                        out[i] = AckResult(items[i].lease_id, task_id, TaskStatus.SUCCEEDED)
                rest = [i for i in rest if out[i] is None]
                if len(rest) < len(items):
                    succeeded = AttemptOutcome.SUCCEEDED.value
                    metrics.child(metrics.TENANT_ATTEMPTS, tenant_id, succeeded).inc(
                        len(items) - len(rest)
                    )
        if rest:
            await self._ack_general(tenant_id, items, rest, out, ended_by)
        done = [r for r in out if r is not None]
        assert len(done) == len(items)
        for (queue, outcome), count in ended_by.items():  # one increment per label set
            metrics.child(metrics.ATTEMPTS, queue, outcome).inc(count)
        stale = sum(1 for r in done if r.task_status is None)
        if stale:
            metrics.STALE_COMPLETIONS.labels("lease_api").inc(stale)
        return done

    async def _ack_general(
        self,
        tenant_id: str,
        items: Sequence[Ack],
        indexes: list[int],
        out: list[AckResult | None],
        ended_by: collections.Counter[tuple[str, str]],
    ) -> None:
        """Read the leases of ``items[indexes]``, then end their attempts (isolated)."""
        wanted = [items[i].lease_id for i in indexes]
        leases = await self.store.task_leases_get(wanted, tenant_id=tenant_id)
        now = utcnow()
        completions: list[Completion] = []
        for i in indexes:
            lease = leases.get(items[i].lease_id)
            if lease is not None:
                completions.append(items[i].completion(lease, now))
        # A completion the store refuses fails its own task, never the whole call.
        results = await complete_isolated(self.store, completions)
        attempts_ended(
            zip([leases[c.lease_id] for c in completions], completions, results, strict=True)
        )
        ended = iter(results)
        for i in indexes:
            item = items[i]
            lease = leases.get(item.lease_id)
            result = None if lease is None else next(ended)
            if lease is None or result is None or not result.accepted:
                out[i] = AckResult(item.lease_id, None if lease is None else lease.task.id)
                continue
            task = lease.task
            ended_by[task.queue, item.outcome.value] += 1
            out[i] = AckResult(item.lease_id, task.id, result.status)


@dataclass(frozen=True, slots=True)
class Ack:
    """One complete (``ok``) or fail under ``lease_id``; ``logs``: the worker's text for the
    attempt (cut and cleaned by the store)."""

    lease_id: str
    ok: bool
    result_json: str | None = None
    error: str | None = None
    retryable: bool = True
    retry_after_seconds: float | None = None
    timed_out: bool = False
    logs: str | None = None

    @property
    def outcome(self) -> AttemptOutcome:
        if self.ok:
            return AttemptOutcome.SUCCEEDED
        return AttemptOutcome.TIMED_OUT if self.timed_out else AttemptOutcome.FAILED

    def completion(self, lease: Lease, now: datetime) -> Completion:
        """The store's :class:`Completion` for this ack. The attempt's duration is measured from
        its start (the store's clock) to ``now`` (this node's), never below zero."""
        task = lease.task
        started = task.started_at or now
        duration_ms = max(0.0, (now - started).total_seconds() * 1000)
        if self.ok:
            return Completion(
                task_id=task.id,
                lease_id=lease.lease_id,
                outcome=AttemptOutcome.SUCCEEDED,
                started_at=started,
                duration_ms=duration_ms,
                result_json=self.result_json,
                worker=task.worker_id,
                logs=self.logs,
            )
        error = self.error
        try:
            delay = next_retry_delay(
                task, retryable=self.retryable, retry_after_seconds=self.retry_after_seconds
            )
        except Exception as exc:  # a stored policy must not turn the call into a 500: no retry
            delay = None
            error = f"{error}; {reason('could not compute the retry', exc)}"
        return Completion(
            task_id=task.id,
            lease_id=lease.lease_id,
            outcome=self.outcome,
            started_at=started,
            duration_ms=duration_ms,
            error=error,
            retry_delay_seconds=delay,
            worker=task.worker_id,
            logs=self.logs,
        )


@dataclass(frozen=True, slots=True)
class AckResult:
    """``task_status`` None = stale: the lease was not current and nothing changed."""

    lease_id: str
    task_id: str | None
    task_status: TaskStatus | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "lease_id": self.lease_id,
            "status": "stale" if self.task_status is None else "ok",
            "task_id": self.task_id,
            "task_status": None if self.task_status is None else self.task_status.value,
        }


async def _complete_leased(
    store: LeaseCompleter, tenant_id: str, items: Sequence[Ack]
) -> dict[str, tuple[str, str]]:
    """The fast path of completions; on any error but an outage it ends nothing, and the
    general path (which isolates a completion the store refuses) takes every item."""
    logs = [i.logs for i in items] if any(i.logs is not None for i in items) else None
    try:
        return await store.task_complete_leased(
            tenant_id, [i.lease_id for i in items], [i.result_json for i in items], logs
        )
    except StoreUnavailable:
        raise
    except Exception as exc:
        log.warning("completing %d leases by id failed (%s); reading them first", len(items), exc)
        return {}


def result_json(value: Any) -> bytes:
    """A worker's result as the JSON the store keeps (UTF-8 bytes; its length is checked
    against the payload limit before it is decoded)."""
    return orjson.dumps(value)


def hub(request: Request) -> LeaseHub:
    """The app's :class:`LeaseHub`, made on first use."""
    state = request.app.state
    found: LeaseHub | None = getattr(state, "lease_hub", None)
    if found is None:
        services = getattr(state, "services", None)
        found = LeaseHub(
            state.store,
            None if services is None else services.pulse,
            handoff=services is None or services.settings.lease_handoff,
        )
        state.lease_hub = found
        if getattr(state, "long_polls_ended", False):
            found.watch.close()
    return found


def end_long_polls(state: Any) -> None:
    """Answer every waiting lease call now, and every later one without waiting: for server
    shutdown, which otherwise waits for long polls (up to 60 s) to end. ``state`` is the app's
    ``app.state``. It holds for a lease call that has not reached its hub yet too."""
    state.long_polls_ended = True
    found: LeaseHub | None = getattr(state, "lease_hub", None)
    if found is not None:
        found.watch.close()
