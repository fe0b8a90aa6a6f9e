"""The notifier: turns the store's harm events into each tenant's notifications, delivered by
the engine itself — as ``http`` tasks on the queue :data:`~duetime.notify.events.QUEUE`, so
they are signed, retried and recorded like any task.

Events are durable (:mod:`duetime.store.core.outbox`): each is written in the transaction of the
change that causes it (a completion that dead-letters, a circuit recorded open, a schedule
advance that records missed ticks, a create refused over a quota), so a node dying loses none.
This service runs on the leader; each round, per (tenant, event type) whose last notification
is at least ``window`` seconds old, it makes one notification of every event waiting — one
body for one event, a digest (a count and the first :data:`~duetime.notify.events.MAX_ITEMS`
items) for several — and deletes those events, in one transaction. An outage that dead-letters
10,000 tasks sends one notification and then one digest per window, not 10,000.

Each notification has a stable id (``evt_`` and its first event's id): the body's ``id`` and the
task's idempotency key, the same in every delivery (at least once; the receiver drops repeats by
it, or by ``webhook-id``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import orjson

from duetime import metrics
from duetime.clock import Clock, utcnow
from duetime.engine.leader import Leader
from duetime.engine.service import Service
from duetime.notify import events
from duetime.store.protocols import OutboxStore
from duetime.types import NewTask, NotificationEvent, NotificationSettings, RetryPolicy

log = logging.getLogger("duetime.notify")

RETRY = RetryPolicy(max_attempts=12, initial_delay_seconds=5, max_delay_seconds=3600)
"""Notification deliveries retry for about a day and a half before they dead-letter."""

MAX_EVENTS = 10_000
"""Events one notification covers at most (the rest go in the next one)."""


def compose(
    tenant_id: str,
    event_type: str,
    settings: NotificationSettings | None,
    found: Sequence[NotificationEvent],
) -> NewTask | None:
    """The notification task of ``found`` events (None when the tenant no longer asks for
    them: they are dropped)."""
    if settings is None or event_type not in settings.events:
        return None
    event_id = "evt_" + found[0].id.replace("-", "")
    payload = events.body(
        event_id,
        event_type,
        tenant_id,
        utcnow(),
        len(found),
        found[0].at,
        found[-1].at,
        [dict(e.item) for e in found[: events.MAX_ITEMS]],
    )
    return NewTask(
        tenant_id=tenant_id,
        target=settings.target,
        payload_json=orjson.dumps(payload).decode(),
        name=event_type,
        queue=events.QUEUE,
        idempotency_key=event_id,
        retry=RETRY,
        labels={"duetime.event": event_type},
    )


class Notifier(Service):
    """See the module. ``interval``: seconds between rounds; ``window``: the digest window."""

    name = "notifier"

    def __init__(
        self,
        store: OutboxStore,
        leader: Leader,
        clock: Clock,
        *,
        window: float = 60.0,
        interval: float = 1.0,
    ) -> None:
        super().__init__(clock)
        self._store = store
        self._leader = leader
        self._window = window
        self._interval = interval

    async def run_once(self) -> int:
        if not self._leader.is_leader:
            return 0
        return await self.flush()

    async def flush(self) -> int:
        """Send what is due now; returns the notifications made."""
        sent = await self._store.notifications_send(self._window, MAX_EVENTS, compose)
        for event_type, count in sent:
            kind = "digest" if count > 1 else "event"
            metrics.child(metrics.NOTIFICATIONS, event_type, kind).inc()
            if count > 1:
                metrics.child(metrics.NOTIFICATIONS_HELD, event_type).inc(count - 1)
            log.info(
                "notification %s (%s of %d)",
                event_type,
                kind,
                count,
                extra={"event": "notification", "type": event_type, "count": count},
            )
        return len(sent)

    async def wait(self, did: int) -> None:
        await self._pause(self._interval)
