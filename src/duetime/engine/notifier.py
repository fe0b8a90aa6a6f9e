"""The notifier: gathers harm events seen in this process and delivers them to each tenant's
notification target through the engine itself — as ``http`` tasks on the queue
:data:`~duetime.notify.events.QUEUE`, so they are signed, retried and recorded like any task.

Rate limit, per (tenant, event type): the first event after a quiet spell goes out at the next
round (within ``interval`` seconds); events within ``window`` seconds of the last send are held
and go out together as one digest once the window has passed (a count, the first
:data:`~duetime.notify.events.MAX_ITEMS` items). An outage that dead-letters 10,000 tasks sends
one event and then one digest per window, not 10,000 events. Held events stay in memory, at most
:data:`MAX_ITEMS` items per key (beyond that only counted); a node that dies loses the events it
held (the dead letters themselves are in the store: ``GET /v1/tasks?status=failed``).

Every process that records attempts (the node, its dispatcher processes) runs its own notifier,
so a node with N dispatcher processes may send up to N bodies per window and key.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from datetime import datetime

import orjson

from duetime import metrics
from duetime.clock import Clock, utcnow
from duetime.delivery import circuit
from duetime.delivery.circuit import Circuit, CircuitState
from duetime.engine.materializer import TICK_LISTENERS
from duetime.engine.service import Service
from duetime.errors import StoreUnavailable
from duetime.notify import events
from duetime.observe.endings import add_dead_letter_listener, remove_dead_letter_listener
from duetime.store.protocols import NotifierStore
from duetime.types import Completion, Lease, NewTask, RetryPolicy

log = logging.getLogger("duetime.notify")

RETRY = RetryPolicy(max_attempts=12, initial_delay_seconds=5, max_delay_seconds=3600)
"""Notification deliveries retry for about a day and a half before they dead-letter."""

MAX_KEYS = 10_000
"""(tenant, event type) pairs held at once; beyond that new harm is only counted in metrics."""


@dataclass(slots=True)
class _Held:
    count: int = 0
    first_at: datetime | None = None
    last_at: datetime | None = None
    items: list[dict[str, object]] = field(default_factory=list)

    def add(self, at: datetime, item: dict[str, object]) -> None:
        self.count += 1
        self.first_at = self.first_at or at
        self.last_at = at
        if len(self.items) < events.MAX_ITEMS:
            self.items.append(item)


class Notifier(Service):
    """See the module. ``dead_lettered``, ``tick_missed`` and ``circuit_changed`` are the
    listeners to register
    (:func:`duetime.observe.endings.add_dead_letter_listener`,
    :data:`duetime.engine.materializer.TICK_LISTENERS`); they never block."""

    name = "notifier"

    def __init__(
        self, store: NotifierStore, clock: Clock, *, window: float = 60.0, interval: float = 1.0
    ) -> None:
        super().__init__(clock)
        self._store = store
        self._window = window
        self._interval = interval
        self._held: dict[tuple[str, str], _Held] = {}
        self._sent_at: dict[tuple[str, str], float] = {}
        """Monotonic time of the last body sent per key."""

    # -- listeners -------------------------------------------------------------------------

    def dead_lettered(self, lease: Lease, completion: Completion) -> None:
        task = lease.task
        if task.queue == events.QUEUE:
            return  # a notification that could not be delivered does not notify again
        error = (completion.error or "")[: events.ERROR_CHARS]
        item: dict[str, object] = {
            "task_id": task.id,
            "queue": task.queue,
            "name": task.name,
            "attempt": lease.attempt,
            "error": error,
        }
        self.record(task.tenant_id, events.TASK_DEAD_LETTERED, item)

    def circuit_changed(self, circuit: Circuit) -> None:
        if circuit.state is not CircuitState.OPEN:
            return
        item: dict[str, object] = {
            "origin": circuit.origin,
            "failures": circuit.failures,
            "cooldown_seconds": circuit.cooldown,
            "open_until": None if circuit.open_until is None else circuit.open_until.isoformat(),
        }
        self.record(circuit.tenant_id, events.CIRCUIT_OPENED, item)

    def tick_missed(self, tenant_id: str, schedule_id: str, missed: int) -> None:
        self.record(
            tenant_id, events.SCHEDULE_TICK_MISSED, {"schedule_id": schedule_id, "missed": missed}
        )

    def record(self, tenant_id: str, event_type: str, item: dict[str, object]) -> None:
        """Hold one harm event for the next round."""
        key = (tenant_id, event_type)
        held = self._held.get(key)
        if held is None:
            if len(self._held) >= MAX_KEYS:
                metrics.child(metrics.NOTIFICATIONS_HELD, event_type).inc()
                return
            held = self._held[key] = _Held()
        held.add(utcnow(), item)

    # -- rounds ----------------------------------------------------------------------------

    async def run_once(self) -> int:
        return await self.flush(force=False)

    async def flush(self, *, force: bool) -> int:
        """Send what is due (everything with ``force``); returns the bodies sent."""
        now = self._clock.monotonic()
        due = [
            key
            for key in list(self._held)
            if force or now - self._sent_at.get(key, -float("inf")) >= self._window
        ]
        sent = 0
        for key in due:
            held = self._held.pop(key)
            try:
                sent += await self._send(key, held)
            except StoreUnavailable:
                self._held.setdefault(key, held)  # keep it for the next round
                raise
            self._sent_at[key] = now
        if len(self._sent_at) > MAX_KEYS:  # forget quiet keys
            horizon = now - self._window
            self._sent_at = {k: t for k, t in self._sent_at.items() if t >= horizon}
        return sent

    async def _send(self, key: tuple[str, str], held: _Held) -> int:
        tenant_id, event_type = key
        settings = await self._store.notification_get(tenant_id)
        if settings is None or event_type not in settings.events:
            return 0
        event_id = "evt_" + uuid.uuid4().hex
        assert held.first_at is not None and held.last_at is not None
        payload = events.body(
            event_id,
            event_type,
            tenant_id,
            utcnow(),
            held.count,
            held.first_at,
            held.last_at,
            held.items,
        )
        task = NewTask(
            tenant_id=tenant_id,
            target=settings.target,
            payload_json=orjson.dumps(payload).decode(),
            name=event_type,
            queue=events.QUEUE,
            idempotency_key=event_id,
            retry=RETRY,
            labels={"duetime.event": event_type},
        )
        (created,) = await self._store.task_create_many([task])
        kind = "digest" if held.count > 1 else "event"
        metrics.child(metrics.NOTIFICATIONS, event_type, kind).inc()
        if held.count > 1:
            metrics.child(metrics.NOTIFICATIONS_HELD, event_type).inc(held.count - 1)
        log.info(
            "notification %s (%s of %d) for tenant %s: task %s",
            event_type,
            kind,
            held.count,
            tenant_id,
            created.task.id,
            extra={"event": "notification", "tenant": tenant_id, "task_id": created.task.id},
        )
        return 1

    async def wait(self, did: int) -> None:
        await self._pause(self._interval)

    def listen(self) -> None:
        """Register this notifier's listeners (dead letters, missed ticks, circuits opening) in
        this process."""
        add_dead_letter_listener(self.dead_lettered)
        TICK_LISTENERS.append(self.tick_missed)
        circuit.add_listener(self.circuit_changed)

    async def close(self) -> None:
        """Unregister the listeners and send what is held, window or not (best effort)."""
        remove_dead_letter_listener(self.dead_lettered)
        circuit.remove_listener(self.circuit_changed)
        if self.tick_missed in TICK_LISTENERS:
            TICK_LISTENERS.remove(self.tick_missed)
        try:
            await self.flush(force=True)
        except Exception as exc:
            log.warning("notifier: could not send the held notifications on stop: %s", exc)
