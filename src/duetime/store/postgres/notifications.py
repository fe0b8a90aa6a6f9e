"""Tenant notification settings on PostgreSQL (a mixin of the store; one row per tenant)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import TYPE_CHECKING, Any

import asyncpg
import orjson

from duetime.types import NotificationSettings

if TYPE_CHECKING:
    from asyncpg.pool import PoolConnectionProxy

    Conn = PoolConnectionProxy[asyncpg.Record]

_PUT = """
INSERT INTO tenant_notifications (tenant_id, events, target, updated_at)
VALUES ($2, $3::jsonb, $4::jsonb, coalesce($1::timestamptz, now()))
ON CONFLICT (tenant_id) DO UPDATE
    SET events = EXCLUDED.events, target = EXCLUDED.target, updated_at = EXCLUDED.updated_at
RETURNING *
"""
_GET = "SELECT * FROM tenant_notifications WHERE tenant_id = $1"
_DELETE = "DELETE FROM tenant_notifications WHERE tenant_id = $1 RETURNING tenant_id"


def _settings(r: asyncpg.Record) -> NotificationSettings:
    return NotificationSettings(
        tenant_id=r["tenant_id"],
        events=tuple(orjson.loads(r["events"])),
        target=orjson.loads(r["target"]),
        updated_at=r["updated_at"],
    )


class NotificationOps:
    """``notification_put/get/delete`` (the store provides connections and the pinned time)."""

    def _pinned(self) -> datetime | None:
        raise NotImplementedError

    def _connection(self) -> AbstractAsyncContextManager[Conn]:
        raise NotImplementedError

    async def notification_put(
        self, tenant_id: str, events: Sequence[str], target: Mapping[str, Any]
    ) -> NotificationSettings:
        async with self._connection() as conn:
            row = await conn.fetchrow(
                _PUT,
                self._pinned(),
                tenant_id,
                orjson.dumps(list(events)).decode(),
                orjson.dumps(dict(target)).decode(),
            )
        assert row is not None
        return _settings(row)

    async def notification_get(self, tenant_id: str) -> NotificationSettings | None:
        async with self._connection() as conn:
            row = await conn.fetchrow(_GET, tenant_id)
        return None if row is None else _settings(row)

    async def notification_delete(self, tenant_id: str) -> bool:
        async with self._connection() as conn:
            return await conn.fetchval(_DELETE, tenant_id) is not None
