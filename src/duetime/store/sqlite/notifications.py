"""Tenant notification settings on SQLite (a mixin of the store; one row per tenant)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import orjson

from duetime.store.sqlite.rows import dumps, from_micros
from duetime.types import NotificationSettings

T = TypeVar("T")

_PUT = """
INSERT INTO tenant_notifications (tenant_id, events, target, updated_at) VALUES (?, ?, ?, ?)
ON CONFLICT (tenant_id) DO UPDATE
    SET events = excluded.events, target = excluded.target, updated_at = excluded.updated_at
"""
_GET = "SELECT * FROM tenant_notifications WHERE tenant_id = ?"
_DELETE = "DELETE FROM tenant_notifications WHERE tenant_id = ?"


def _settings(row: Any) -> NotificationSettings:
    return NotificationSettings(
        tenant_id=row["tenant_id"],
        events=tuple(orjson.loads(row["events"])),
        target=orjson.loads(row["target"]),
        updated_at=from_micros(row["updated_at"]),
    )


def _get(conn: sqlite3.Connection, tenant_id: str) -> NotificationSettings | None:
    row = conn.execute(_GET, (tenant_id,)).fetchone()
    return None if row is None else _settings(row)


def _put(
    conn: sqlite3.Connection, now: int, tenant_id: str, events: list[str], target: str
) -> NotificationSettings:
    conn.execute(_PUT, (tenant_id, dumps(events), target, now))
    found = _get(conn, tenant_id)
    assert found is not None
    return found


class NotificationOps:
    """``notification_put/get/delete`` (the store provides ``_read``/``_write``)."""

    async def _read(self, body: Callable[[sqlite3.Connection, int], T]) -> T:
        raise NotImplementedError

    async def _write(
        self, body: Callable[[sqlite3.Connection, int], T], *, integrity_retries: int = 0
    ) -> T:
        raise NotImplementedError

    async def notification_put(
        self, tenant_id: str, events: Sequence[str], target: Mapping[str, Any]
    ) -> NotificationSettings:
        names, text = list(events), dumps(dict(target))
        return await self._write(lambda conn, now: _put(conn, now, tenant_id, names, text))

    async def notification_get(self, tenant_id: str) -> NotificationSettings | None:
        return await self._read(lambda conn, now: _get(conn, tenant_id))

    async def notification_delete(self, tenant_id: str) -> bool:
        return await self._write(lambda conn, now: conn.execute(_DELETE, (tenant_id,)).rowcount > 0)
