"""Notification event types and bodies.

One body shape for one event and for a digest, so a receiver has a single thing to parse::

    {"id": "evt_<uuid>", "type": "task.dead_lettered", "tenant_id": "...",
     "created_at": "<RFC 3339>", "count": 1, "digest": false,
     "first_at": "<RFC 3339>", "last_at": "<RFC 3339>",
     "items": [{"task_id": "...", "queue": "...", "name": "...", "attempt": 3,
                "error": "HTTP 410 ..."}],
     "items_omitted": 0}

``count`` is how many harm events the body stands for; ``items`` are the first
:data:`MAX_ITEMS` of them (``items_omitted`` the rest); ``digest`` is true when ``count > 1``.
``schedule.tick_missed`` items are ``{"schedule_id", "missed"}``; ``target.circuit_opened`` items
are ``{"origin", "failures", "cooldown_seconds", "open_until"}``; ``tenant.quota_reached`` items
are ``{"limit", "detail"}``; ``workflow.request_refused`` items are ``{"request_id", "status",
"field", "detail"}``. ``id`` is stable: every delivery of one notification carries it (it
is the first event's id), and each event is in exactly one notification.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from duetime.store.core import outbox

TASK_DEAD_LETTERED = outbox.DEAD_LETTERED
SCHEDULE_TICK_MISSED = outbox.TICK_MISSED
CIRCUIT_OPENED = outbox.CIRCUIT_OPENED
QUOTA_REACHED = outbox.QUOTA_REACHED
REQUEST_REFUSED = outbox.REQUEST_REFUSED
EVENT_TYPES = outbox.EVENT_TYPES
"""Event types a tenant may ask for."""

QUEUE = outbox.NOTIFICATION_QUEUE
"""The queue notification tasks are made on (visible in ``GET /v1/queues``); its own dead
letters never notify, so a broken notification target cannot feed itself."""

MAX_ITEMS = 10
"""Sample items a body carries; the rest are only counted."""

ERROR_CHARS = 500


def _rfc3339(at: datetime) -> str:
    return at.isoformat().replace("+00:00", "Z")


def body(
    event_id: str,
    event_type: str,
    tenant_id: str,
    created_at: datetime,
    count: int,
    first_at: datetime,
    last_at: datetime,
    items: Sequence[dict[str, Any]],
) -> dict[str, Any]:
    """The JSON body of one notification (see the module)."""
    kept = list(items[:MAX_ITEMS])
    return {
        "id": event_id,
        "type": event_type,
        "tenant_id": tenant_id,
        "created_at": _rfc3339(created_at),
        "count": count,
        "digest": count > 1,
        "first_at": _rfc3339(first_at),
        "last_at": _rfc3339(last_at),
        "items": kept,
        "items_omitted": max(0, count - len(kept)),
    }
