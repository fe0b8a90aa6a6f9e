"""Who may create tasks through the SQL API (migration ``0024_sql_api``): a login role granted
one tenant, and the server bounds the API's functions check against.

:meth:`SqlApiMethods.sql_grant` is ``duetime tenant grant-sql TENANT ROLE``: USAGE on the store's
schema and EXECUTE on the four API functions, nothing else, and the role's tenant recorded; the
store's ``max_payload_bytes`` is written for the functions to check payloads against. Run by the
store's own role (it owns every object, so it may grant on them).
"""

from __future__ import annotations

from duetime.errors import NotFound, ValidationError
from duetime.store.core.plan import Decode, Plan, Row, all_, execute, value
from duetime.store.core.runner import Runs


def _producer(r: Row, _d: type[Decode]) -> tuple[str, str]:
    return str(r["role_name"]), str(r["tenant_id"])


def sql_grant(tenant_id: str, role: str, max_payload_bytes: int) -> Plan[None]:
    yield execute("sql_api_grant", role=role, tenant_id=tenant_id)
    yield execute("sql_api_settings_put", max_payload_bytes=max_payload_bytes)


def sql_revoke(role: str) -> Plan[bool]:
    had: bool = yield value("sql_api_revoke", role=role)
    return had


def sql_producers() -> Plan[list[tuple[str, str]]]:
    found: list[tuple[str, str]] = yield all_("sql_api_producers", _producer)
    return found


class SqlApiMethods(Runs):
    """The SQL API's grants, on :class:`~duetime.store.postgres.backend.PostgresStore`."""

    async def sql_grant(self, tenant_id: str, role: str, *, max_payload_bytes: int) -> None:
        """Let login role ``role`` create tasks for ``tenant_id`` through the SQL API (a role
        has one tenant: granting another replaces it). ``NotFound`` for an unknown tenant,
        ``ValidationError`` (field ``role``) for a role that does not exist."""
        import asyncpg

        try:
            await self._run(sql_grant(tenant_id, role, max_payload_bytes), write=True)
        except asyncpg.UndefinedObjectError as exc:
            raise ValidationError(str(exc), field="role") from None
        except asyncpg.NoDataFoundError:
            raise NotFound(f"tenant {tenant_id!r} not found") from None

    async def sql_revoke(self, role: str) -> bool:
        """Take the SQL API away from ``role``; False when it had no grant."""
        return await self._run(sql_revoke(role), write=True)

    async def sql_producers(self) -> list[tuple[str, str]]:
        """Every (role, tenant) granted the SQL API."""
        return await self._run(sql_producers())
