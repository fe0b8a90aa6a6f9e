"""Who may create tasks through the SQL API (migration ``0024_sql_api``): a login role granted
one tenant, and the server bounds the API's functions check against.

:meth:`SqlApiMethods.sql_grant` is ``duetime tenant grant-sql TENANT ROLE``: USAGE on the store's
schema and EXECUTE on the API's functions (``sql_api_functions()``), nothing else, and the role's
tenant recorded; the store's ``max_payload_bytes`` is written for the functions to check payloads
against. Run by the store's own role (it owns every object, so it may grant on them).

Workflows requested through ``create_workflow_v1`` (migration ``0031_sql_api_workflows``) are
taken, ended (a refusal is the tenant's ``workflow.request_refused`` event, in the same
transaction) and swept here (:class:`~duetime.store.protocols.SqlRequestStore`) for the node that
makes them (:class:`duetime.api.sql_intake.WorkflowIntake`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from duetime.errors import NotFound, ValidationError
from duetime.store.core.outbox import REQUEST_REFUSED, event_record
from duetime.store.core.plan import Decode, Plan, Row, all_, count, execute, value
from duetime.store.core.runner import Runs
from duetime.store.protocols import RequestEnd
from duetime.types import SqlWorkflowRequest


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


def _request(r: Row, d: type[Decode]) -> tuple[SqlWorkflowRequest, Any]:
    found = SqlWorkflowRequest(
        id=d.ident(r["id"]),
        tenant_id=str(r["tenant_id"]),
        role_name=str(r["role_name"]),
        body=str(r["body"]),
        fingerprint=str(r["fingerprint"]),
    )
    return found, r["requested_at"]


def sql_workflow_requests_take(limit: int, hold_seconds: float) -> Plan[list[SqlWorkflowRequest]]:
    taken: list[tuple[SqlWorkflowRequest, Any]] = yield all_(
        "sql_workflow_requests_take", _request, limit=limit, hold_seconds=hold_seconds
    )
    return [request for request, _ in sorted(taken, key=lambda t: (t[1], t[0].id))]


def _ended(r: Row, d: type[Decode]) -> tuple[str, str]:
    return d.ident(r["id"]), str(r["tenant_id"])


def sql_workflow_requests_end(ended: Sequence[RequestEnd]) -> Plan[int]:
    done: list[tuple[str, str]] = yield all_(
        "sql_workflow_requests_end",
        _ended,
        ids=[request_id for request_id, _, _ in ended],
        workflow_ids=[workflow_id for _, workflow_id, _ in ended],
        problems=[None if p is None else orjson.dumps(p).decode() for _, _, p in ended],
    )
    problems = {request_id: p for request_id, _, p in ended if p is not None}
    for request_id, tenant_id in done:
        problem = problems.get(request_id)
        if problem is not None:  # refused: the tenant's notification, if it asked
            item = {
                "request_id": request_id,
                "status": problem.get("status"),
                "field": problem.get("field"),
                "detail": problem.get("detail"),
            }
            yield from event_record(tenant_id, REQUEST_REFUSED, item)
    return len(done)


def sql_workflow_requests_sweep(older_than_seconds: float, limit: int) -> Plan[int]:
    swept: int = yield count(
        "sql_workflow_requests_sweep", older_than_seconds=older_than_seconds, limit=limit
    )
    return swept


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

    async def sql_workflow_requests_take(
        self, limit: int, hold_seconds: float
    ) -> list[SqlWorkflowRequest]:
        return await self._run(sql_workflow_requests_take(limit, hold_seconds), write=True)

    async def sql_workflow_requests_end(self, ended: Sequence[RequestEnd]) -> int:
        return await self._run(sql_workflow_requests_end(ended), write=True)

    async def sql_workflow_requests_sweep(self, older_than_seconds: float, limit: int) -> int:
        return await self._run(sql_workflow_requests_sweep(older_than_seconds, limit), write=True)
