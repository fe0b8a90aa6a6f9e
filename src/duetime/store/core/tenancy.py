"""Tenants, API keys and signing secrets (SPEC §7): the rules, once for both backends."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import datetime
from typing import TypeVar

from duetime.auth import new_signing_secret
from duetime.errors import Conflict, NotFound
from duetime.ids import new_id
from duetime.store.core import rows
from duetime.store.core.plan import Decode, Plan, Row, UniqueViolation, all_, count, execute, one
from duetime.store.core.runner import Runs
from duetime.types import ApiKey, SigningSecret, Tenant, TenantQuotas, TenantUsage

T = TypeVar("T")


def tenant_create(name: str, tenant_id: str | None) -> Plan[Tenant]:
    tid = tenant_id if tenant_id is not None else new_id()
    try:
        tenant: Tenant = yield one("tenant_insert", rows.tenant, id=tid, name=name)
    except UniqueViolation as exc:
        raise Conflict(f"tenant {tid!r} already exists") from exc
    yield execute("signing_secret_insert", id=new_id(), tenant_id=tid, secret=new_signing_secret())
    return tenant


def tenant_get(tenant_id: str) -> Plan[Tenant | None]:
    found: Tenant | None = yield one("tenant_get", rows.tenant, id=tenant_id)
    return found


def _require_tenant(tenant_id: str) -> Plan[None]:
    if (yield from tenant_get(tenant_id)) is None:
        raise NotFound(f"tenant {tenant_id!r} not found")


def api_key_create(tenant_id: str, key_id: str, key_hash: str) -> Plan[ApiKey]:
    yield from _require_tenant(tenant_id)
    try:
        key: ApiKey = yield one(
            "api_key_insert", rows.api_key, id=key_id, tenant_id=tenant_id, key_hash=key_hash
        )
    except UniqueViolation as exc:
        raise Conflict(f"api key {key_id!r} (or its hash) already exists") from exc
    return key


def api_key_get_by_hash(key_hash: str) -> Plan[ApiKey | None]:
    found: ApiKey | None = yield one("api_key_get_by_hash", rows.api_key, key_hash=key_hash)
    return found


def api_key_delete(key_id: str) -> Plan[bool]:
    return bool((yield count("api_key_delete", id=key_id)))


def signing_secret_list(tenant_id: str) -> Plan[list[SigningSecret]]:
    found: list[SigningSecret] = yield all_(
        "signing_secret_list_live", rows.signing_secret, tenant_id=tenant_id
    )
    return found


def signing_secret_rotate(
    tenant_id: str, secret: str, overlap_seconds: float
) -> Plan[list[SigningSecret]]:
    """Every live secret expires within ``overlap_seconds`` (an earlier expiry is kept), then
    ``secret`` is added."""
    yield from _require_tenant(tenant_id)
    overlap = max(0.0, float(overlap_seconds))
    yield execute("signing_secret_expire_live", tenant_id=tenant_id, overlap_seconds=overlap)
    yield execute("signing_secret_insert", id=new_id(), tenant_id=tenant_id, secret=secret)
    return (yield from signing_secret_list(tenant_id))


def tenant_list() -> Plan[list[Tenant]]:
    found: list[Tenant] = yield all_("tenant_list", rows.tenant)
    return found


def tenant_quotas_put(tenant_id: str, quotas: TenantQuotas) -> Plan[Tenant]:
    """Replace the tenant's quotas (the create-rate bucket starts full again)."""
    params = dataclasses.asdict(quotas)
    found: Tenant | None = yield one("tenant_quotas_put", rows.tenant, id=tenant_id, **params)
    if found is None:
        raise NotFound(f"tenant {tenant_id!r} not found")
    return found


def _usage(r: Row, d: type[Decode]) -> tuple[str, TenantUsage]:
    usage = TenantUsage(pending_tasks=int(r["pending_tasks"]), schedules=int(r["schedules"]))
    return r["id"], usage


def tenant_usage_many(tenant_ids: Sequence[str]) -> Plan[dict[str, TenantUsage]]:
    """Each tenant's usage, in one statement (a list of tenants costs one read, not one each)."""
    found: list[tuple[str, TenantUsage]] = yield all_("tenant_usage", _usage, ids=list(tenant_ids))
    return dict(found)


def tenant_usage(tenant_id: str) -> Plan[TenantUsage]:
    usage = yield from tenant_usage_many([tenant_id])
    return usage[tenant_id]


def tenant_delete(tenant_id: str) -> Plan[bool]:
    """Delete a tenant with no work left: its keys, secrets, notification settings and queues
    go with it; ended tasks stay until retention removes them, and its history stays. A tenant
    with tasks not ended or live schedules is a ``Conflict`` saying what is left."""
    if (yield from tenant_get(tenant_id)) is None:
        return False
    usage = yield from tenant_usage(tenant_id)
    if usage.pending_tasks or usage.schedules:
        raise Conflict(
            f"tenant {tenant_id!r} still has {usage.pending_tasks} task(s) not ended and "
            f"{usage.schedules} schedule(s): cancel and delete them first"
        )
    yield execute("tenant_queues_delete", id=tenant_id)
    return bool((yield count("tenant_delete", id=tenant_id)))


_Bucket = tuple[float | None, float | None, datetime | None, datetime]
"""rate, tokens, when tokens were counted, now."""


def _bucket(r: Row, d: type[Decode]) -> _Bucket:
    return r["rate"], r["tokens"], d.opt_time(r["tokens_at"]), d.time(r["now"])


def tenant_creates_take(tenant_id: str, n: int) -> Plan[float | None]:
    """Take ``n`` creates from the tenant's ``max_creates_per_second`` bucket. None when they
    may go ahead (always, without that quota); else the seconds until they may.

    The bucket holds one second's worth (at least 1) and refills continuously. A batch larger
    than the bucket goes ahead when the bucket is full and leaves it in debt, so any batch
    size can pass, at the quota's average rate."""
    found: _Bucket | None = yield one("tenant_bucket_lock", _bucket, id=tenant_id)
    if found is None:
        return None
    rate, stored, at, now = found
    if rate is None:
        return None
    capacity = max(rate, 1.0)
    tokens = capacity
    if stored is not None and at is not None:
        tokens = min(capacity, stored + rate * max(0.0, (now - at).total_seconds()))
    need = min(float(n), capacity)
    if tokens < need:
        return (need - tokens) / rate
    yield execute("tenant_bucket_put", id=tenant_id, tokens=tokens - n, at=now)
    return None


class TenancyMethods(Runs):
    """The tenancy methods of :class:`~duetime.store.protocols.Store`, for both backends."""

    async def tenant_create(self, name: str, *, tenant_id: str | None = None) -> Tenant:
        return await self._run(tenant_create(name, tenant_id), write=True)

    async def tenant_get(self, tenant_id: str) -> Tenant | None:
        return await self._run(tenant_get(tenant_id))

    async def api_key_create(self, tenant_id: str, key_id: str, key_hash: str) -> ApiKey:
        return await self._run(api_key_create(tenant_id, key_id, key_hash), write=True)

    async def api_key_get_by_hash(self, key_hash: str) -> ApiKey | None:
        return await self._run(api_key_get_by_hash(key_hash))

    async def api_key_delete(self, key_id: str) -> bool:
        return await self._run(api_key_delete(key_id), write=True)

    async def signing_secret_list(self, tenant_id: str) -> list[SigningSecret]:
        return await self._run(signing_secret_list(tenant_id))

    async def signing_secret_rotate(
        self, tenant_id: str, secret: str, overlap_seconds: float
    ) -> list[SigningSecret]:
        return await self._run(
            signing_secret_rotate(tenant_id, secret, overlap_seconds), write=True
        )

    async def tenant_list(self) -> list[Tenant]:
        return await self._run(tenant_list())

    async def tenant_quotas_put(self, tenant_id: str, quotas: TenantQuotas) -> Tenant:
        tenant = await self._run(tenant_quotas_put(tenant_id, quotas), write=True)
        self._limits_changed()
        return tenant

    async def tenant_usage(self, tenant_id: str) -> TenantUsage:
        return await self._run(tenant_usage(tenant_id))

    async def tenant_usage_many(self, tenant_ids: Sequence[str]) -> dict[str, TenantUsage]:
        return await self._run(tenant_usage_many(tenant_ids))

    async def tenant_delete(self, tenant_id: str) -> bool:
        return await self._run(tenant_delete(tenant_id), write=True)

    async def tenant_creates_take(self, tenant_id: str, n: int) -> float | None:
        return await self._run(tenant_creates_take(tenant_id, n), write=True)
