"""Durable notifications, once for both backends (SPEC §9 "Notifications"): a harm event is a
row of ``notification_events`` written in the transaction of the change that causes it, and
only for a tenant that asked for its type:

- ``task.dead_lettered``: a completion that ends a task ``failed`` (:func:`dead_lettered`, run
  by both stores' completions);
- ``target.circuit_opened``: a circuit recorded open (``circuit_put``);
- ``schedule.tick_missed``: a schedule advance that records missed ticks;
- ``workflow.request_refused``: a node recording a workflow requested through the SQL API as
  refused (PostgreSQL's ``sql_workflow_requests_end``);
- any other (``tenant.quota_reached``): :func:`event_record`, in a transaction of its own.

The notifier (:mod:`duetime.engine.notifier`, on the leader) calls :func:`notifications_send`:
per (tenant, type) whose last notification is older than the window, it takes the events, has
the caller's ``compose`` make the notification task, makes it (its idempotency key is the
notification's stable id, ``evt_<first event's id>``), deletes the events and records the send
— one transaction, so an event is in exactly one notification, sent at least once (the task
retries), and a node dying loses none.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from duetime.ids import new_id
from duetime.store.core import rows
from duetime.store.core.made import task_row
from duetime.store.core.plan import (
    Decode,
    Json,
    Plan,
    Row,
    Wake,
    all_,
    batch,
    execute,
    one,
    value,
)
from duetime.store.core.runner import Runs
from duetime.store.protocols import Compose
from duetime.types import NotificationEvent, NotificationSettings, TaskStatus

NOTIFICATION_QUEUE = "duetime.notifications"
"""The queue notification tasks are made on; its own dead letters never notify."""
DEAD_LETTERED = "task.dead_lettered"
TICK_MISSED = "schedule.tick_missed"
CIRCUIT_OPENED = "target.circuit_opened"
QUOTA_REACHED = "tenant.quota_reached"
REQUEST_REFUSED = "workflow.request_refused"
EVENT_TYPES = (DEAD_LETTERED, TICK_MISSED, CIRCUIT_OPENED, QUOTA_REACHED, REQUEST_REFUSED)
"""Every event type (``duetime.notify.events`` names them to tenants; the statements of
``outbox.sql`` spell the first two)."""


Event = NotificationEvent


def _event(r: Row, d: type[Decode]) -> Event:
    item = r["item"]
    found = orjson.loads(item) if isinstance(item, str | bytes) else item
    return Event(d.ident(r["id"]), found, d.time(r["at"]))


def _key(r: Row, d: type[Decode]) -> tuple[str, str]:
    return r["tenant_id"], r["type"]


def dead_lettered(task_ids: Sequence[str]) -> Plan[None]:
    """Tasks ``task_ids`` just ended ``failed`` by an attempt: their dead-letter events."""
    if task_ids:
        yield execute(
            "notification_dead_letters_record", ids=list(task_ids), queue=NOTIFICATION_QUEUE
        )


def event_record(tenant_id: str, event_type: str, item: Mapping[str, Any]) -> Plan[None]:
    """One event of ``event_type`` for ``tenant_id``, if it asked for that type."""
    yield execute(
        "notification_event_record", tenant_id=tenant_id, type=event_type, item=Json(dict(item))
    )


def ticks_missed(missed: Mapping[str, int]) -> Plan[None]:
    """Schedules (by id) that missed this many ticks."""
    if missed:
        yield batch(
            "notification_ticks_missed_record",
            [{"schedule_id": s, "missed": n} for s, n in missed.items()],
        )


def notifications_send(
    window_seconds: float, max_events: int, compose: Compose, keys: int = 100
) -> Plan[list[tuple[str, int]]]:
    """Send what is due (see the module); returns (event type, events in the body) per
    notification made."""
    due: list[tuple[str, str]] = yield all_(
        "notification_due_keys", _key, window=float(window_seconds), limit=keys
    )
    sent: list[tuple[str, int]] = []
    for tenant_id, event_type in due:
        events: list[Event] = yield all_(
            "notification_events_take", _event, tenant_id=tenant_id, type=event_type,
            limit=max_events,
        )  # fmt: skip
        if not events:
            continue  # taken by another notifier meanwhile
        settings: NotificationSettings | None = yield one(
            "notification_get", rows.notification_settings, tenant_id=tenant_id
        )
        task = compose(tenant_id, event_type, settings, events)
        if task is not None:
            yield batch("graph_task_insert", [task_row(new_id(), task, TaskStatus.READY)])
            sent.append((event_type, len(events)))
        yield execute("notification_events_delete", ids=[e.id for e in events])
        yield execute("notification_send_put", tenant_id=tenant_id, type=event_type)
    if sent:
        yield Wake(ready=True)
    return sent


def notification_events_count() -> Plan[int]:
    found = yield value("notification_events_count")
    return int(found or 0)


class OutboxMethods(Runs):
    """The notification outbox of :class:`~duetime.store.protocols.OutboxStore`."""

    async def notification_record(
        self, tenant_id: str, event_type: str, item: Mapping[str, Any]
    ) -> None:
        await self._run(event_record(tenant_id, event_type, item), write=True)

    async def notifications_send(
        self, window_seconds: float, max_events: int, compose: Compose
    ) -> list[tuple[str, int]]:
        return await self._run(notifications_send(window_seconds, max_events, compose), write=True)

    async def notification_events_count(self) -> int:
        return await self._run(notification_events_count())
