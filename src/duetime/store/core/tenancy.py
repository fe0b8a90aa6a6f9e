"""Tenants, API keys and signing secrets (SPEC §7): the rules, once for both backends."""

from __future__ import annotations

from typing import TypeVar

from duetime.auth import new_signing_secret
from duetime.errors import Conflict, NotFound
from duetime.ids import new_id
from duetime.store.core import rows
from duetime.store.core.plan import Plan, UniqueViolation, all_, count, execute, one
from duetime.store.core.runner import Runs
from duetime.types import ApiKey, SigningSecret, Tenant

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
    if (yield one("tenant_get", rows.tenant, id=tenant_id)) is None:
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
