"""Queue calls (SPEC §3 "Queues and pull workers", §7 "Flow control"): read a queue's settings
and live figures, replace its settings (pause, concurrency, rate and per-key limits,
retention)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict

from duetime.sdk._http import _Api, _segment
from duetime.sdk.models import Page

__all__ = ["QueueCalls", "QueueInfo"]


class QueueInfo(BaseModel):
    """A queue's settings (defaults when never configured) and live figures.

    ``tokens`` is the rate limit's bucket now (None without a rate limit); ``held_by`` names
    what keeps ready tasks waiting now (``paused``, ``max_concurrency``,
    ``rate_limit_per_second``, ``max_concurrency_per_key``; empty when nothing does).
    ``retention`` holds the queue's own retention periods (``{"failed": "P90D"}``; None from a
    server that does not send them). Fields a server does not send keep these defaults."""

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
    tokens: float | None = None
    held_by: tuple[str, ...] = ()
    retention: dict[str, str] | None = None
    key_limit: dict[str, Any] | None = None
    """Limits per key: ``{"key": ..., "rate": "10/s", "burst": 20, "max_concurrency": 2}``."""
    unique: dict[str, Any] | None = None
    debounce: dict[str, Any] | None = None
    throttle: dict[str, Any] | None = None
    keys: tuple[dict[str, Any], ...] | None = None
    """From :meth:`QueueCalls.get_queue` and :meth:`QueueCalls.put_queue`, for a queue with
    limits per key: its busiest keys (``key``, ``ready``, ``running``, ``tokens``,
    ``next_start_at``, ``held_by``, ``waiting``: why its ready tasks wait, in words)."""


class QueueCalls(_Api):
    """``GET /v1/queues``, ``GET /v1/queues/{name}``, ``PUT /v1/queues/{name}``."""

    async def list_queues(self) -> Page[QueueInfo]:
        """Every queue of the tenant that has tasks or settings, in one page."""
        return Page[QueueInfo].model_validate(await self._request("GET", "/v1/queues"))

    async def get_queue(self, name: str) -> QueueInfo:
        """One queue's settings and live figures; raises ``NotFound`` when no task names it and
        it was never configured."""
        path = f"/v1/queues/{_segment(name)}"
        return QueueInfo.model_validate(await self._request("GET", path))

    async def put_queue(
        self,
        name: str,
        *,
        paused: bool = False,
        max_concurrency: int | None = None,
        rate_limit_per_second: float | None = None,
        burst: int | None = None,
        max_concurrency_per_key: int | None = None,
        retention: Mapping[str, str] | None = None,
        key_limit: Mapping[str, Any] | None = None,
        unique: Mapping[str, Any] | None = None,
        debounce: Mapping[str, Any] | None = None,
        throttle: Mapping[str, Any] | None = None,
    ) -> QueueInfo:
        """Replace the queue's settings as a whole: an argument left out takes its default, so
        to change one setting pass the others as :meth:`get_queue` read them.

        ``paused`` stops every claim from it (webhook dispatch and leases);
        ``max_concurrency`` caps its running tasks; ``rate_limit_per_second`` bounds starts per
        second as a token bucket of ``burst`` tokens (default one second's worth; ``burst``
        needs a rate); ``max_concurrency_per_key`` caps running tasks per ``concurrency_key``
        (1: one at a time); ``retention`` sets how long its finished tasks stay, per final
        status (``{"failed": "P30D"}``). None means no limit (server defaults for retention).
        Keyed flow control (docs/flow-control.md): ``key_limit`` (``{"key":
        "payload.customer_id", "rate": "10/s", "burst": 20}``), ``unique`` (``{"key": ...,
        "period": "PT1H"}``), ``debounce`` (``{"key": ..., "period": "PT5S", "max_wait":
        "PT1M"}``), ``throttle`` (``{"key": ..., "rate": "1/s"}``). Raises
        ``ApiValidationError`` naming the field for a value out of bounds."""
        body: dict[str, Any] = {"paused": paused, "max_concurrency": max_concurrency}
        # Left out when None, which the server reads the same, so a server older than a
        # setting still accepts a call that does not use it.
        optional = {
            "rate_limit_per_second": rate_limit_per_second,
            "burst": burst,
            "max_concurrency_per_key": max_concurrency_per_key,
            "retention": None if retention is None else dict(retention),
            "key_limit": None if key_limit is None else dict(key_limit),
            "unique": None if unique is None else dict(unique),
            "debounce": None if debounce is None else dict(debounce),
            "throttle": None if throttle is None else dict(throttle),
        }
        body.update({k: v for k, v in optional.items() if v is not None})
        path = f"/v1/queues/{_segment(name)}"
        return QueueInfo.model_validate(await self._request("PUT", path, body=body))
