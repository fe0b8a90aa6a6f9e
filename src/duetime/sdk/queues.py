"""Queue calls (SPEC §3 "Queues and pull workers"): read a queue's settings and live figures,
change its settings (pause, resume, concurrency limit)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict

from duetime.sdk._http import _Api, _segment

__all__ = ["QueueCalls", "QueueInfo"]


class QueueInfo(BaseModel):
    """A queue's settings (defaults when never configured) and live figures."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    name: str
    configured: bool = False
    paused: bool = False
    max_concurrency: int | None = None
    rate_limit_per_second: float | None = None
    burst: int | None = None
    max_concurrency_per_key: int | None = None
    updated_at: datetime | None = None
    counts: dict[str, int] = {}
    running: int = 0
    oldest_due_lag_seconds: float | None = None


class _QueueList(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    items: tuple[QueueInfo, ...]


class QueueCalls(_Api):
    """``GET /v1/queues``, ``GET /v1/queues/{name}``, ``PUT /v1/queues/{name}``."""

    async def list_queues(self) -> list[QueueInfo]:
        """Every queue of the tenant that has tasks or settings."""
        return list(_QueueList.model_validate(await self._request("GET", "/v1/queues")).items)

    async def get_queue(self, name: str) -> QueueInfo:
        """One queue's settings and live figures (an unknown queue reads as unconfigured)."""
        path = f"/v1/queues/{_segment(name)}"
        return QueueInfo.model_validate(await self._request("GET", path))

    async def put_queue(
        self, name: str, *, paused: bool = False, max_concurrency: int | None = None
    ) -> QueueInfo:
        """Replace the queue's settings: ``paused`` stops every claim from it (webhook dispatch
        and leases); ``max_concurrency`` caps its running tasks (None = no cap)."""
        body: dict[str, Any] = {"paused": paused, "max_concurrency": max_concurrency}
        path = f"/v1/queues/{_segment(name)}"
        return QueueInfo.model_validate(await self._request("PUT", path, body=body))
