"""Tenant notification settings (one row per tenant): the rules, once for both backends."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from duetime.store.core import rows
from duetime.store.core.plan import Json, Plan, count, one
from duetime.store.core.runner import Runs
from duetime.types import NotificationSettings


def notification_put(
    tenant_id: str, events: Sequence[str], target: Mapping[str, Any]
) -> Plan[NotificationSettings]:
    found: NotificationSettings | None = yield one(
        "notification_put", rows.notification_settings,
        tenant_id=tenant_id, events=Json(list(events)), target=Json(dict(target)),
    )  # fmt: skip
    assert found is not None
    return found


def notification_get(tenant_id: str) -> Plan[NotificationSettings | None]:
    found: NotificationSettings | None = yield one(
        "notification_get", rows.notification_settings, tenant_id=tenant_id
    )
    return found


def notification_delete(tenant_id: str) -> Plan[bool]:
    return bool((yield count("notification_delete", tenant_id=tenant_id)))


class NotificationMethods(Runs):
    """``notification_put/get/delete`` of :class:`~duetime.store.protocols.Store`."""

    async def notification_put(
        self, tenant_id: str, events: Sequence[str], target: Mapping[str, Any]
    ) -> NotificationSettings:
        return await self._run(notification_put(tenant_id, events, target), write=True)

    async def notification_get(self, tenant_id: str) -> NotificationSettings | None:
        return await self._run(notification_get(tenant_id))

    async def notification_delete(self, tenant_id: str) -> bool:
        return await self._run(notification_delete(tenant_id), write=True)
