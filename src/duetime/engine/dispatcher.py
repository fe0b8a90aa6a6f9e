"""Dispatcher: claims ready push tasks in batches and delivers them concurrently (every node)."""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import functools
import logging
import time
from collections.abc import Callable, Mapping, Sequence

from duetime import metrics
from duetime.clock import Clock
from duetime.config import Settings
from duetime.delivery.base import Deliverer, Delivery, Outcome
from duetime.delivery.circuit import Circuit, Circuits, origin_of
from duetime.engine.completer import Completer
from duetime.engine.credential_cache import CredentialCache
from duetime.engine.secret_cache import SecretCache
from duetime.engine.service import Service
from duetime.lifecycle.finish import ended
from duetime.lifecycle.release import release
from duetime.observe import tracing
from duetime.observe.endings import attempts_ended, tracing_attributes
from duetime.store.protocols import DispatchStore
from duetime.types import (
    AttemptOutcome,
    ClaimRequest,
    Completion,
    CompletionResult,
    Lease,
    TargetCircuit,
    TargetType,
)

log = logging.getLogger("duetime.engine")

ACTIVE_SECONDS = 2.0
BUSY_SECONDS = 0.5
"""How long a claim of a useful batch keeps the node :attr:`Dispatcher.busy`."""
"""A tenant counts as active (sharing slots) this long after its last delivery here."""
NEWCOMER = "\x00newcomer"
"""Stands for a tenant not active here yet when sharing slots (no tenant id can be this)."""
WEIGHT_TTL_SECONDS = 5.0
"""How long the tenants' weights are trusted (a PATCH reaches every node within this)."""


class Dispatcher(Service):
    """Keeps up to ``concurrency`` deliveries in flight on this node.

    A round claims as many ready tasks as there are free slots (at most ``batch``), starts one
    delivery per lease, and returns at once; completions are written in batches by a
    :class:`Completer`. When nothing is ready it sleeps on the store's ``ready_signal``
    (LISTEN/NOTIFY on PostgreSQL), polling every ``poll_interval`` in case a signal was lost.

    A delivery whose task is cancelled meanwhile is stopped: every ``poll_interval`` the
    dispatcher asks the store which in-flight tasks have a cancel requested, cancels those
    deliveries (the connection is closed mid-request) and ends their attempts, so the tasks end
    ``cancelled`` at once instead of when the target answers.

    Slots are shared fairly across tenants (SPEC §7 "Tenant fairness"): a tenant active here
    (deliveries in flight, or some within :data:`ACTIVE_SECONDS`) holds at most its weighted
    share of ``concurrency`` (:func:`tenant_slots`); each claim tells the store how many more
    each tenant may take (``tenant_room``, and ``other_tenant_room`` for a tenant arriving), and
    the store gives the rest to others. A tenant alone may hold all but a reserve of slots, which
    a tenant arriving with due work can take at once — also a tenant created after the first
    one's deliveries filled the node, which is why the reserve is kept even while the store has
    one tenant. The reserve is the low-water mark a saturated dispatcher waits for before it
    claims again: a smaller one would never be claimed while the rest hangs. Claims
    themselves are shared by weight across tenants with ready work (the store's push claim).

    With ``circuits`` (:mod:`duetime.delivery.circuit`), a webhook whose (tenant, origin) circuit
    is open is not delivered: its task is handed back without spending the attempt
    (``task_release``, batched), due when the circuit may let it through. Circuits other
    processes opened are adopted from the store at most once per ``poll_interval``.
    """

    name = "dispatcher"

    def __init__(
        self,
        store: DispatchStore,
        deliverers: Mapping[TargetType, Deliverer],
        clock: Clock,
        *,
        node_id: str,
        concurrency: int,
        batch: int,
        poll_interval: float,
        lease_grace: float,
        circuits: Circuits | None = None,
    ) -> None:
        super().__init__(clock)
        self._store = store
        self._deliverers = dict(deliverers)
        self._node_id = node_id
        self._concurrency = concurrency
        self._batch = batch
        self._poll = poll_interval
        self._grace = lease_grace
        self._secrets = SecretCache(store, clock)
        self._credentials = CredentialCache(store, clock)
        self._completer = Completer(store, batch=500, on_results=self._recorded)
        self._ending: dict[str, Lease] = {}
        """Leases whose completion waits in the completer (lease id → lease), for observing."""
        self._inflight: set[asyncio.Task[None]] = set()
        self._slot_free = asyncio.Event()
        self._low_water = max(1, min(batch, concurrency // 4))
        self._busy_until = -float("inf")
        self.on_busy: Callable[[float], None] | None = None
        """Told each time :meth:`busy` is renewed, with its new end (``time.monotonic()``
        terms): a dispatcher process tells the node process this way."""
        """Free slots worth a claim while saturated."""
        self._circuits = circuits
        if circuits is not None:
            circuits.on_change = self._circuit_changed
        self._adopted_at = -float("inf")
        self._holds: list[tuple[str, float]] = []
        """(lease id, delay) of tasks held by an open circuit, to hand back in one call."""
        self._holding: asyncio.Task[None] | None = None
        self._circuit_writes: list[TargetCircuit] = []
        self._circuit_writer: asyncio.Task[None] | None = None
        self._jobs: dict[str, asyncio.Task[None]] = {}
        """In-flight deliveries by task id."""
        self._cancelled: set[str] = set()
        """Task ids whose delivery this dispatcher stopped because of a cancel."""
        self._watcher: asyncio.Task[None] | None = None
        self._by_tenant: collections.Counter[str] = collections.Counter()
        """Deliveries in flight by tenant."""
        self._seen: dict[str, float] = {}
        """When each tenant last had a delivery here (monotonic)."""
        self._capped = False
        """The last claim left a tenant no room (it held its share of slots)."""
        self._weights_by: dict[str, int] = {}
        """Every tenant's weight, read from the store at ``_weights_at``."""
        self._weights_at = -float("inf")

    @classmethod
    def from_settings(
        cls,
        store: DispatchStore,
        deliverers: Mapping[TargetType, Deliverer],
        clock: Clock,
        settings: Settings,
        *,
        node_id: str | None = None,
    ) -> Dispatcher:
        """The dispatcher ``settings`` describe, claiming as ``node_id`` (default the node's)."""
        return cls(
            store,
            deliverers,
            clock,
            node_id=node_id or settings.node_id,
            concurrency=settings.dispatch_concurrency,
            batch=settings.dispatch_batch,
            poll_interval=settings.poll_interval_seconds,
            lease_grace=settings.lease_grace_seconds,
            circuits=Circuits(
                clock,
                threshold=settings.circuit_failure_threshold,
                cooldown=settings.circuit_cooldown_seconds,
                max_cooldown=settings.circuit_max_cooldown_seconds,
            ),
        )

    async def start(self) -> None:
        self._completer.start()
        if self._watcher is None:
            self._watcher = asyncio.create_task(self._watch_cancels())

    async def _watch_cancels(self) -> None:
        """Stop the deliveries of tasks cancelled while in flight (see the class)."""
        while not self.stopping:
            await self._pause(max(self._poll, 0.05))
            if self._jobs:
                try:
                    await self.stop_cancelled()
                except Exception as exc:  # an outage: the next round asks again
                    log.debug("could not check in-flight tasks for cancels: %s", exc)

    async def stop_cancelled(self) -> int:
        """One check: cancel the in-flight deliveries whose task has a cancel requested;
        returns how many."""
        ids = list(self._jobs)
        if not ids:
            return 0
        stopping = await self._store.task_cancel_requested(ids)
        for task_id in stopping:
            job = self._jobs.get(task_id)
            if job is not None and not job.done():
                self._cancelled.add(task_id)
                job.cancel()
        return len(stopping)

    @property
    def inflight(self) -> int:
        return len(self._inflight)

    def busy(self) -> bool:
        """Whether this dispatcher is delivering in earnest: a quarter of its slots taken, or a
        claim of as many tasks in the last :data:`BUSY_SECONDS`. Background work (the history
        round) waits while it is; a trickle of tasks does not count."""
        return len(self._inflight) >= self._low_water or self._clock.monotonic() < self._busy_until

    async def run_once(self) -> int:
        free = self._concurrency - len(self._inflight)
        if free <= 0 or not self._deliverers:
            return 0
        if self._circuits is not None:
            await self._adopt_circuits()
        rooms, other = await self._rooms()
        self._capped = any(room == 0 for room in rooms.values())
        leases = await self._store.task_claim(
            ClaimRequest(
                worker_id=self._node_id,
                limit=min(free, self._batch),
                target_types=frozenset(self._deliverers),
                lease_grace_seconds=self._grace,
                tenant_room=rooms,
                other_tenant_room=other,
            )
        )
        metrics.child(metrics.DISPATCHED).inc(len(leases))
        metrics.child(metrics.IN_FLIGHT).inc(len(leases))
        for lease in leases:
            task = lease.task
            if task.started_at is not None:
                lag = (task.started_at - task.due_at).total_seconds()
                metrics.child(metrics.DUE_LAG, task.queue).observe(max(0.0, lag))
            job = asyncio.create_task(self._deliver(lease))
            self._inflight.add(job)
            self._jobs[task.id] = job
            self._by_tenant[task.tenant_id] += 1
            job.add_done_callback(functools.partial(self._done, task.id, task.tenant_id))
        if len(leases) >= self._low_water or len(self._inflight) >= self._low_water:
            self._busy_until = self._clock.monotonic() + BUSY_SECONDS
            if self.on_busy is not None:
                self.on_busy(time.monotonic() + BUSY_SECONDS)
        return len(leases)

    async def _rooms(self) -> tuple[dict[str, int], int]:
        """How many more deliveries each active tenant may start here, and a tenant arriving
        (see the class)."""
        now = self._clock.monotonic()
        weights = await self._weights(now)
        for tenant in self._by_tenant:
            self._seen[tenant] = now
        for tenant in [t for t, at in self._seen.items() if now - at > ACTIVE_SECONDS]:
            del self._seen[tenant]
        active = {t: weights.get(t, 1) for t in self._seen}
        newcomer = tenant_slots(self._concurrency, {**active, NEWCOMER: 1}, self._low_water)[
            NEWCOMER
        ]
        rooms = {
            t: max(0, n - self._by_tenant.get(t, 0))
            for t, n in tenant_slots(self._concurrency, active, self._low_water).items()
        }
        return rooms, newcomer

    async def _weights(self, now: float) -> dict[str, int]:
        """Every tenant's weight, read at most once per :data:`WEIGHT_TTL_SECONDS`."""
        if now - self._weights_at > WEIGHT_TTL_SECONDS:
            try:
                tenants = await self._store.tenant_list()
            except Exception as exc:  # an outage: keep what is known (the claim reports it)
                log.debug("could not read tenant weights: %s", exc)
            else:
                self._weights_by = {t.id: t.quotas.weight for t in tenants}
                self._weights_at = now
        return self._weights_by

    async def wait(self, did: int) -> None:
        if self._free() < self._low_water:
            # Saturated: wait until a useful batch of slots is free before claiming again, so a
            # busy node claims (and pays a store round trip for) many tasks at a time, not one.
            while self._free() < self._low_water and not self.stopping:
                self._slot_free.clear()
                await self._slot_free.wait()
        elif did == 0 and self._capped:
            # Nothing claimed while a tenant holds its share: its next ended delivery gives it
            # room again, so a freed slot wakes us as well as new work does.
            self._slot_free.clear()
            freed = asyncio.ensure_future(self._slot_free.wait())
            ready = asyncio.ensure_future(self._store.ready_signal.wait(self._poll))
            try:
                await asyncio.wait({freed, ready}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for waiter in (freed, ready):
                    waiter.cancel()
        elif did == 0:
            await self._store.ready_signal.wait(self._poll)

    def _free(self) -> int:
        return self._concurrency - len(self._inflight)

    def _done(self, task_id: str, tenant_id: str, job: asyncio.Task[None]) -> None:
        self._inflight.discard(job)
        self._by_tenant[tenant_id] -= 1
        if not self._by_tenant[tenant_id]:
            del self._by_tenant[tenant_id]
            self._seen[tenant_id] = self._clock.monotonic()
        if self._jobs.get(task_id) is job:
            del self._jobs[task_id]
        metrics.child(metrics.IN_FLIGHT).inc(-1)
        self._slot_free.set()

    async def _adopt_circuits(self) -> None:
        """Hold what other processes' circuits hold (at most once per poll interval)."""
        now = self._clock.monotonic()
        if now - self._adopted_at < self._poll or self._circuits is None:
            return
        self._adopted_at = now
        try:
            active = await self._store.circuit_active()
        except Exception as exc:  # the claim below reports an outage; this is only advice
            log.debug("could not read open circuits: %s", exc)
            return
        for c in active:
            if c.open_until is not None:
                self._circuits.adopt(
                    c.tenant_id, c.origin, c.open_until, c.cooldown_seconds, c.failures
                )

    def _hold(self, lease: Lease, delay: float) -> None:
        """Hand ``lease`` back (batched with others held in the same moment)."""
        self._holds.append((lease.lease_id, delay))
        metrics.child(metrics.DELIVERIES_HELD, "circuit_open").inc()
        if self._holding is None or self._holding.done():
            self._holding = asyncio.create_task(self._release_held())

    async def _release_held(self) -> None:
        await asyncio.sleep(0)  # let the rest of this claim's deliveries join the batch
        while self._holds:
            batch, self._holds = self._holds, []
            try:
                await release(self._store, [b[0] for b in batch], [b[1] for b in batch])
            except Exception as exc:  # their leases expire and the reaper retries them
                log.warning("could not hand back %d held task(s): %s", len(batch), exc)

    def _circuit_changed(self, circuit: Circuit) -> None:
        """Write a circuit's new state to the store, in the background and in order (never
        blocks delivery)."""
        metrics.child(metrics.CIRCUIT_CHANGES, circuit.state.value).inc()
        self._circuit_writes.append(
            TargetCircuit(
                tenant_id=circuit.tenant_id,
                origin=circuit.origin,
                state=circuit.state.value,
                failures=circuit.failures,
                cooldown_seconds=circuit.cooldown,
                open_until=circuit.open_until,
                changed_at=self._clock.now(),
            )
        )
        if self._circuit_writer is None or self._circuit_writer.done():
            self._circuit_writer = asyncio.create_task(self._write_circuits())

    async def _write_circuits(self) -> None:
        while self._circuit_writes:
            record = self._circuit_writes.pop(0)
            try:
                await self._store.circuit_put(record)
            except Exception as exc:  # the next change, or another process, writes it again
                log.warning("could not record circuit %s: %s", record.origin, exc)

    async def _deliver(self, lease: Lease) -> None:
        task = lease.task
        circuits = self._circuits
        origin = origin_of(task.target) if circuits is not None else None
        if circuits is not None and origin is not None:
            held = circuits.hold(task.tenant_id, origin)
            if held is not None:
                self._hold(lease, held)
                return
        started = task.started_at
        t0 = self._clock.monotonic()
        try:
            secrets = await self._secrets.get(task.tenant_id)
            deliverer = self._deliverers[task.target_type]
            parents = None
            if task.depends_on:  # its body may carry their outcomes (parents_in_body)
                found = await self._store.task_parents_of(task.tenant_id, [task])
                parents = found.get(task.id)
            delivery = Delivery(
                task, lease.attempt, secrets, credentials=self._credentials, parents=parents
            )
            if tracing.ENABLED:
                outcome = await self._deliver_traced(deliverer, delivery)
            else:
                outcome = await deliverer.deliver(delivery)
        except asyncio.CancelledError:
            if task.id not in self._cancelled:
                raise  # the node is stopping: the lease expires and the task is retried
            self._cancelled.discard(task.id)
            outcome = Outcome(
                AttemptOutcome.FAILED, retryable=False, error="cancelled during delivery"
            )
        except Exception as exc:  # a deliverer must not raise; if one does, it is retryable
            log.exception("delivery of task %s raised", task.id)
            outcome = Outcome(AttemptOutcome.FAILED, retryable=True, error=f"internal: {exc!r}")
        elapsed = self._clock.monotonic() - t0
        if circuits is not None and origin is not None:
            healthy = outcome.outcome is AttemptOutcome.SUCCEEDED or not outcome.retryable
            circuits.record(task.tenant_id, origin, healthy=healthy)
        metrics.child(metrics.DELIVERY_SECONDS, task.target["type"]).observe(elapsed)
        metrics.child(metrics.ATTEMPTS, task.queue, outcome.outcome.value).inc()
        self._ending[lease.lease_id] = lease
        self._completer.add(
            ended(
                lease,
                outcome.outcome,
                started_at=started or lease.lease_expires_at,
                duration_ms=elapsed * 1000,
                retryable=outcome.retryable,
                retry_after_seconds=outcome.retry_after_seconds,
                error=outcome.error,
                result_json=outcome.result_json,
                http_status=outcome.http_status,
                worker=self._node_id,
                response=outcome.response,
            )
        )

    async def _deliver_traced(self, deliverer: Deliverer, delivery: Delivery) -> Outcome:
        """The delivery in a ``duetime.task.deliver`` span whose context the receiver gets
        (after a ``duetime.task.ready`` span of the wait from due time to claim)."""
        task = delivery.task
        attributes = tracing_attributes(task, delivery.attempt)
        tracing.record(
            "duetime.task.ready", task.traceparent, task.due_at, task.started_at, attributes
        )
        with tracing.span("duetime.task.deliver", task.traceparent, attributes) as span:
            traced = dataclasses.replace(delivery, traceparent=tracing.traceparent_of(span))
            outcome = await deliverer.deliver(traced)
            span.set_attribute("duetime.outcome", outcome.outcome.value)
            if outcome.http_status is not None:
                span.set_attribute("http.response.status_code", outcome.http_status)
            return outcome

    def _recorded(
        self, completions: Sequence[Completion], results: Sequence[CompletionResult]
    ) -> None:
        ended = []
        for completion, result in zip(completions, results, strict=True):
            lease = self._ending.pop(completion.lease_id, None)
            if lease is not None:
                ended.append((lease, completion, result))
        attempts_ended(ended)

    async def drain(self, grace: float) -> None:
        """Stop claiming; give in-flight deliveries ``grace`` seconds, then flush completions
        for up to ``grace`` seconds more. Deliveries still running, or completions still not
        written (a store that stays down), after that are abandoned: their leases expire and the
        reaper retries them, so nothing is lost and a node always stops."""
        self.stop()
        if self._watcher is not None:
            self._watcher.cancel()
        if self._inflight:
            _done, pending = await asyncio.wait(set(self._inflight), timeout=grace)
            for job in pending:
                job.cancel()
        background = {j for j in (self._holding, self._circuit_writer) if j is not None}
        if background:
            await asyncio.wait(background, timeout=grace)
        await self._completer.close(grace)


def tenant_slots(concurrency: int, weights: Mapping[str, int], reserve: int) -> dict[str, int]:
    """How many of ``concurrency`` delivery slots each active tenant may hold: its weighted
    share (at least 1); a tenant alone may hold all but ``reserve`` slots, kept for tenants
    that arrive."""
    if len(weights) == 1:
        (tenant,) = weights
        return {tenant: max(1, concurrency - reserve)}
    total = sum(max(1, w) for w in weights.values())
    return {t: max(1, concurrency * max(1, w) // total) for t, w in weights.items()}
