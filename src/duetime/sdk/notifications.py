"""Notification calls (SPEC §9): where the tenant's harm events (a dead-lettered task, a missed
schedule tick) are sent as signed webhooks."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict

from duetime.sdk._http import _Api

__all__ = ["NotificationCalls", "NotificationSettings"]


_PATH = "/v1/tenant/notifications"


class NotificationSettings(BaseModel):
    """The event types the tenant is told of and the ``http`` target they go to."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    events: tuple[str, ...]
    target: dict[str, Any]
    updated_at: datetime


class NotificationCalls(_Api):
    """``PUT``/``GET``/``DELETE /v1/tenant/notifications``."""

    async def set_notifications(
        self, events: Sequence[str], target: Mapping[str, Any]
    ) -> NotificationSettings:
        """Send ``events`` (``"task.dead_lettered"``, ``"schedule.tick_missed"``) to ``target``
        (an ``http`` target, e.g. :func:`~duetime.sdk.http_target`); replaces earlier settings."""
        body = {"events": list(events), "target": dict(target)}
        return NotificationSettings.model_validate(await self._request("PUT", _PATH, body=body))

    async def get_notifications(self) -> NotificationSettings:
        """The settings; raises ``ApiNotFound`` when none are set."""
        return NotificationSettings.model_validate(await self._request("GET", _PATH))

    async def delete_notifications(self) -> None:
        """Stop notifications; raises ``ApiNotFound`` when none were set."""
        await self._request("DELETE", _PATH)
