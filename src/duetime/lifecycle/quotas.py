"""Tenant quotas at the API (SPEC §7 "Tenant quotas"): a create over a quota is refused with 429,
``Retry-After`` and a problem whose ``limit`` names the quota, and nothing is created.

Each node keeps a tenant's quotas for :data:`QUOTA_CACHE_SECONDS` (a ``PATCH`` on this node
takes effect at once, on other nodes within that time), so a tenant without quotas costs no
store call. ``max_pending_tasks`` reads the maintained counters (exact at read time; creates racing
on several nodes may pass it by at most what they create together); ``max_creates_per_second``
takes from a token bucket in the store, which holds across nodes.

A refusal is also told to the tenant as a ``tenant.quota_reached`` notification when it asked for
them (``report``: the store records the event in a transaction of its own), at most once per
:data:`REPORT_SECONDS` per tenant and quota on a node, so a client hammering past its quota
costs the store no write per refusal.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, NoReturn

from duetime.errors import TooManyRequests
from duetime.store.protocols import TenantStore
from duetime.types import TenantQuotas

log = logging.getLogger("duetime.lifecycle")

QUOTA_CACHE_SECONDS = 5.0
REPORT_SECONDS = 10.0
"""A tenant's refusals over one quota are reported at most this often per node."""
QUOTA_REACHED = "tenant.quota_reached"
Report = Callable[[str, str, Mapping[str, Any]], Awaitable[None]]
"""Records a notification event: ``(tenant id, event type, item)``."""
PENDING_RETRY_AFTER_SECONDS = 1.0
"""What a refusal over ``max_pending_tasks`` or ``max_schedules`` asks clients to wait: room
comes back when work ends, which the API cannot foresee."""


class QuotaGate:
    """Admits creates within a tenant's quotas; one per app."""

    def __init__(
        self,
        store: TenantStore,
        *,
        ttl: float = QUOTA_CACHE_SECONDS,
        monotonic: Callable[[], float] = time.monotonic,
        report: Report | None = None,
    ) -> None:
        self._store = store
        self._ttl = ttl
        self._monotonic = monotonic
        self._cached: dict[str, tuple[float, TenantQuotas]] = {}
        self._report = report
        self._reported: dict[tuple[str, str], float] = {}

    async def _refuse(self, tenant_id: str, refused: TooManyRequests) -> NoReturn:
        """Report the refusal (see the module), then raise it."""
        if self._report is not None:
            key = (tenant_id, refused.limit or "")
            now = self._monotonic()
            if now >= self._reported.get(key, -REPORT_SECONDS) + REPORT_SECONDS:
                if len(self._reported) > 10_000:
                    self._reported.clear()
                self._reported[key] = now
                item = {"limit": refused.limit, "detail": refused.detail}
                try:
                    await self._report(tenant_id, QUOTA_REACHED, item)
                except Exception as exc:  # the refusal stands; only its notification is lost
                    log.warning("could not record a quota notification: %s", exc)
        raise refused

    async def quotas(self, tenant_id: str) -> TenantQuotas:
        now = self._monotonic()
        hit = self._cached.get(tenant_id)
        if hit is not None and hit[0] > now:
            return hit[1]
        tenant = await self._store.tenant_get(tenant_id)
        quotas = tenant.quotas if tenant is not None else TenantQuotas()
        if len(self._cached) > 10_000:
            self._cached.clear()
        self._cached[tenant_id] = (now + self._ttl, quotas)
        return quotas

    def forget(self, tenant_id: str) -> None:
        """Drop the cached quotas (after a change made on this node)."""
        self._cached.pop(tenant_id, None)

    async def admit_tasks(self, tenant_id: str, count: int) -> None:
        """``TooManyRequests`` when creating ``count`` tasks would pass a quota; else takes them
        from the create-rate bucket."""
        quotas = await self.quotas(tenant_id)
        if quotas.max_pending_tasks is not None:
            pending = (await self._store.tenant_usage(tenant_id)).pending_tasks
            if pending + count > quotas.max_pending_tasks:
                await self._refuse(
                    tenant_id,
                    TooManyRequests(
                        f"tenant {tenant_id!r} has {pending} task(s) not ended; {count} more would "
                        f"pass its max_pending_tasks quota of {quotas.max_pending_tasks}",
                        limit="max_pending_tasks",
                        retry_after=PENDING_RETRY_AFTER_SECONDS,
                    ),
                )
        if quotas.max_creates_per_second is not None:
            wait = await self._store.tenant_creates_take(tenant_id, count)
            if wait is not None:
                await self._refuse(
                    tenant_id,
                    TooManyRequests(
                        f"tenant {tenant_id!r} is over its max_creates_per_second quota of "
                        f"{quotas.max_creates_per_second:g}",
                        limit="max_creates_per_second",
                        retry_after=wait,
                    ),
                )

    async def admit_schedule(self, tenant_id: str) -> None:
        """``TooManyRequests`` when one more schedule would pass ``max_schedules``."""
        quotas = await self.quotas(tenant_id)
        if quotas.max_schedules is None:
            return
        live = (await self._store.tenant_usage(tenant_id)).schedules
        if live + 1 > quotas.max_schedules:
            await self._refuse(
                tenant_id,
                TooManyRequests(
                    f"tenant {tenant_id!r} has {live} schedule(s); its max_schedules quota is "
                    f"{quotas.max_schedules}",
                    limit="max_schedules",
                    retry_after=PENDING_RETRY_AFTER_SECONDS,
                ),
            )
