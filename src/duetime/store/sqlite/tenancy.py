"""Tenants, API keys and signing secrets: one transaction function each.

Every function runs on the store's database thread inside a transaction the caller opened; ``now``
is the store's now in microseconds.
"""

from __future__ import annotations

import sqlite3

from duetime.auth import new_signing_secret
from duetime.errors import Conflict, NotFound
from duetime.ids import new_id
from duetime.store.sqlite.queries import QUERIES as Q
from duetime.store.sqlite.rows import (
    api_key_from_row,
    from_micros,
    seconds_to_micros,
    signing_secret_from_row,
    tenant_from_row,
)
from duetime.types import ApiKey, SigningSecret, Tenant


def tenant_create(conn: sqlite3.Connection, now: int, name: str, tenant_id: str | None) -> Tenant:
    """Insert a tenant and its first signing secret. ``Conflict`` if the id is taken."""
    tid = tenant_id if tenant_id is not None else new_id()
    try:
        conn.execute(Q["tenant_insert"], {"id": tid, "name": name, "now": now})
    except sqlite3.IntegrityError as exc:
        raise Conflict(f"tenant {tid!r} already exists") from exc
    conn.execute(
        Q["signing_secret_insert"],
        {"id": new_id(), "tenant_id": tid, "secret": new_signing_secret(), "now": now},
    )
    return Tenant(id=tid, name=name, created_at=from_micros(now))


def tenant_get(conn: sqlite3.Connection, now: int, tenant_id: str) -> Tenant | None:
    row = conn.execute(Q["tenant_get"], {"id": tenant_id}).fetchone()
    return None if row is None else tenant_from_row(row)


def api_key_create(
    conn: sqlite3.Connection, now: int, tenant_id: str, key_id: str, key_hash: str
) -> ApiKey:
    """Store a key hash. ``NotFound`` without the tenant; ``Conflict`` on a reused id or hash."""
    _require_tenant(conn, tenant_id)
    try:
        conn.execute(
            Q["api_key_insert"],
            {"id": key_id, "tenant_id": tenant_id, "key_hash": key_hash, "now": now},
        )
    except sqlite3.IntegrityError as exc:
        raise Conflict(f"api key {key_id!r} (or its hash) already exists") from exc
    return ApiKey(id=key_id, tenant_id=tenant_id, key_hash=key_hash, created_at=from_micros(now))


def api_key_get_by_hash(conn: sqlite3.Connection, now: int, key_hash: str) -> ApiKey | None:
    row = conn.execute(Q["api_key_get_by_hash"], {"key_hash": key_hash}).fetchone()
    return None if row is None else api_key_from_row(row)


def api_key_delete(conn: sqlite3.Connection, now: int, key_id: str) -> bool:
    return conn.execute(Q["api_key_delete"], {"id": key_id}).rowcount > 0


def signing_secret_list(conn: sqlite3.Connection, now: int, tenant_id: str) -> list[SigningSecret]:
    """Secrets not expired by ``now``, oldest first."""
    rows = conn.execute(Q["signing_secret_list_live"], {"tenant_id": tenant_id, "now": now})
    return [signing_secret_from_row(row) for row in rows]


def signing_secret_rotate(
    conn: sqlite3.Connection, now: int, tenant_id: str, secret: str, overlap_seconds: float
) -> list[SigningSecret]:
    """Add ``secret``; every older live secret expires within ``overlap_seconds``."""
    _require_tenant(conn, tenant_id)
    new = new_id()
    conn.execute(
        Q["signing_secret_insert"],
        {"id": new, "tenant_id": tenant_id, "secret": secret, "now": now},
    )
    conn.execute(
        Q["signing_secret_expire_others"],
        {
            "tenant_id": tenant_id,
            "keep_id": new,
            "now": now,
            "expires_at": now + seconds_to_micros(max(0.0, overlap_seconds)),
        },
    )
    return signing_secret_list(conn, now, tenant_id)


def _require_tenant(conn: sqlite3.Connection, tenant_id: str) -> None:
    if conn.execute(Q["tenant_get"], {"id": tenant_id}).fetchone() is None:
        raise NotFound(f"tenant {tenant_id!r} not found")
