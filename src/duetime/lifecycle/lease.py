"""Leasing ``worker`` tasks to pull workers (SPEC §3 "Queues and pull workers"): long polls,
worker sightings, heart-beats, and the ends of attempts under leases (acks).

Long poll: a lease call claims at once; with nothing to claim it sleeps until the store's
``ready_signal`` fires (LISTEN/NOTIFY across PostgreSQL nodes, in-process on SQLite) and claims
again, until ``wait_seconds`` run out. It reads the signal's generation before each claim, so a
task made ready between the claim and the wait wakes it at once instead of being slept through.
Polls also re-claim every :data:`POLL_SLICE_SECONDS` (a lost signal). The store fires the signal
when a task of a limited queue stops running, so a poll waiting on a limited queue's free slot
claims at once (SPEC §7).

Handoff: a lone ``worker`` task created due now while a poll of its queue waits on this node is
created and claimed for that poll in one transaction (:meth:`LeaseHub.create`), on a store that
can (:class:`~duetime.store.protocols.CreateHandoff`).

Acks are ended by :mod:`duetime.lifecycle.acks`.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from duetime import metrics
from duetime.clock import utcnow
from duetime.errors import TooManyRequests
from duetime.lifecycle.acks import AckResult, end_acks
from duetime.lifecycle.finish import Ack
from duetime.lifecycle.release import release
from duetime.observe import tracing
from duetime.observe.endings import trace_lease
from duetime.store.protocols import CreateHandoff, LeaseCompleter, PullStore, Signal, TaskStore
from duetime.target_types import PULL_TYPES
from duetime.types import (
    ClaimRequest,
    Lease,
    NewTask,
    TaskCreated,
)

log = logging.getLogger("duetime.lifecycle")

Gone = Callable[[], Awaitable[bool]]
"""Whether the caller of a long poll went away (the HTTP client disconnected)."""

POLL_SLICE_SECONDS = 1.0
"""A waiting poll claims again at least this often, signal or not."""

MAX_WAITING_POLLS_PER_TENANT = 256
"""Lease calls of one tenant that may wait at once on one node; one more is a 429 (each waiting
poll holds a connection and claims again every slice, so an unbounded number is a lever one
tenant could pull against the node)."""

SIGHTING_INTERVAL_SECONDS = 1.0
"""A worker's ``last_seen_at`` is written at most this often per (worker, queue) per node."""

_CACHE_MAX_ENTRIES = 10_000


class ReadyWatch:
    """The long polls' view of the store's ``ready_signal``: they read :attr:`generation` before
    claiming and, with nothing claimed, wait for it to move (``Signal.wait_after`` consumes
    nothing, so polls never take a wake-up from the dispatcher, nor it from them)."""

    def __init__(self, signal: Signal) -> None:
        self._signal = signal
        self._closed = asyncio.Event()
        self.on_close: list[Callable[[], None]] = []
        """Called by :meth:`close` (the node's other waits, :mod:`duetime.lifecycle.waits`)."""

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
        for call in self.on_close:
            call()


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


def _uncounted(tasks: int) -> None:
    return None


class LeaseHub:
    """What the lease calls of one node share: its waiting polls, worker sightings and acks."""

    def __init__(
        self,
        store: PullStore,
        count: Callable[[int], None] = _uncounted,
        *,
        handoff: bool = True,
    ) -> None:
        self.store = store
        self.count = count
        """Told of the tasks leased and acked here (the node's busy hot path)."""
        # Checked once: isinstance() against a runtime-checkable protocol costs ~10 µs a call.
        self._completer = store if isinstance(store, LeaseCompleter) else None
        self._handoff = store if handoff and isinstance(store, CreateHandoff) else None
        self.watch = ReadyWatch(store.ready_signal)
        self._sightings = _TtlSet(SIGHTING_INTERVAL_SECONDS)
        self._waiting: collections.Counter[str] = collections.Counter()
        # Waiting polls by (tenant, queue), oldest first, for handoffs (stores that can).
        self._waiters: dict[tuple[str, str], list[_Waiter]] = {}

    def close(self) -> None:
        """Answer every waiting lease call now, and every later one without waiting: for server
        shutdown, which otherwise waits for long polls (up to 60 s) to end."""
        self.watch.close()

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
        gone_away: Gone,
        tenant_id: str,
        queue: str,
        *,
        worker_id: str,
        max_tasks: int,
        lease_seconds: float,
        wait_seconds: float,
        names: Sequence[str] | None,
    ) -> list[Lease]:
        """Claim up to ``max_tasks``; with none ready, wait for one up to ``wait_seconds``, or
        until ``gone_away`` says the caller left."""
        claim = ClaimRequest(
            worker_id=worker_id,
            limit=max_tasks,
            target_types=PULL_TYPES,
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
                if await gone_away():
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
            self.count(len(leases))
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
                await release(self.store, [lease.lease_id for lease in leases])
            except Exception as exc:  # they come back when their leases expire
                log.warning("could not release %d handed-over leases: %s", len(leases), exc)

    def _waiter_for(self, new: Sequence[NewTask]) -> _Waiter | None:
        """The poll a create of ``new`` goes to, taken off the list: a lone worker task due
        now, with a poll of its queue waiting on this node. None otherwise."""
        if self._handoff is None or len(new) != 1 or not self._waiters:
            return None
        task = new[0]
        if task.target.get("type") not in PULL_TYPES or task.depends_on:
            return None
        if task.run_at is not None and task.run_at > utcnow():
            return None
        return self._take_waiter(task.tenant_id, task.queue)

    async def create(self, store: TaskStore, new: Sequence[NewTask]) -> list[TaskCreated]:
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
        """End the attempts under the items' leases, fenced; results in input order
        (:func:`duetime.lifecycle.acks.end_acks`)."""
        self.count(len(items))
        return await end_acks(self.store, self._completer, tenant_id, items)
