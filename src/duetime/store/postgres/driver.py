"""Runs :mod:`duetime.store.core` plans on PostgreSQL over one asyncpg connection (the caller
holds the transaction).

asyncpg hands back ``timestamptz`` as aware UTC datetimes, ``uuid`` as UUID objects (made text
here) and ``jsonb`` as JSON text. ``now`` binds the pinned test time, or NULL so the statement's
``coalesce(:now::timestamptz, now())`` reads the database clock.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from datetime import datetime
from enum import Enum
from typing import TYPE_CHECKING, Any, TypeVar

import asyncpg
from asyncpg import exceptions as pgx

from duetime.store.core.plan import (
    NOW,
    Batch,
    Call,
    Decode,
    Json,
    Plan,
    Script,
    Stmt,
    UniqueViolation,
    Wake,
    Woken,
)
from duetime.store.postgres.rows import to_json
from duetime.store.sql import PLAN_FILES, Query, load

if TYPE_CHECKING:
    from asyncpg.pool import PoolConnectionProxy

    Conn = PoolConnectionProxy[asyncpg.Record]

T = TypeVar("T")

QUERIES: Mapping[str, Query] = load(__name__.rpartition(".")[0], "postgres", *PLAN_FILES)
"""The statements the core's plans name, in PostgreSQL's dialect (``:name`` rewritten to
``$n``)."""

STATEMENTS: Mapping[str, Query] = {
    **QUERIES,
    **load(__name__.rpartition(".")[0], "postgres", "schema.sql", "sqlapi.sql"),
}
"""Those, and the statements of PostgreSQL's own plans (:mod:`.schema`, :mod:`.sqlapi`)."""


def _identity(value: Any) -> Any:
    return value


class PgDecode(Decode):
    """Column values as asyncpg returns them (see :class:`~duetime.store.core.plan.Decode`)."""

    time = staticmethod(_identity)
    opt_time = staticmethod(_identity)

    @staticmethod
    def flag(value: Any) -> bool:
        return bool(value)

    @staticmethod
    def ident(value: Any) -> str:
        return str(value)

    @staticmethod
    def opt_ident(value: Any) -> str | None:
        return None if value is None else str(value)

    @staticmethod
    def ids(value: Any) -> tuple[str, ...]:
        return tuple(str(v) for v in value) if value else ()


def encode(value: Any) -> Any:
    """A plan's parameter as asyncpg binds it (JSON as text; lists stay arrays)."""
    if isinstance(value, Json):
        return to_json(value.value)
    if isinstance(value, Mapping):
        return to_json(value)
    if isinstance(value, Enum) and not isinstance(value, str):
        return value.value
    if isinstance(value, tuple | frozenset | set):
        return list(value)
    return value


async def run(
    conn: Conn,
    pinned: datetime | None,
    plan: Plan[T],
    wake: Woken | None = None,
    *,
    timeout: float | None = None,
) -> T:
    """Drive ``plan`` to its end on ``conn`` (inside the caller's transaction); ``timeout``
    replaces the pool's per-statement timeout."""
    reply: Any = None
    error: UniqueViolation | None = None
    while True:
        try:
            request = plan.send(reply) if error is None else plan.throw(error)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        if error is not None:
            raise RuntimeError("a store plan went on after a unique violation") from error
        reply = None
        if isinstance(request, Stmt | Batch):
            try:
                if isinstance(request, Batch):
                    reply = await _batch(conn, pinned, request, timeout)
                else:
                    reply = await _statement(conn, pinned, request, timeout)
            except pgx.UniqueViolationError as exc:
                error = UniqueViolation(str(exc))
        elif request is NOW:
            reply = pinned if pinned is not None else await conn.fetchval("SELECT now()")
        elif isinstance(request, Wake):
            if wake is not None:
                wake.ready |= request.ready
                wake.due |= request.due
                if request.ended:
                    wake.ended.extend(request.ended)
        elif isinstance(request, Call):
            reply = await asyncio.to_thread(request.fn, *request.args)
        elif isinstance(request, Script):
            await conn.execute(request.sql, timeout=timeout)
        else:  # pragma: no cover - a plan yielding something else is a bug
            raise TypeError(f"a store plan yielded {request!r}")


async def _statement(conn: Conn, pinned: datetime | None, stmt: Stmt, timeout: float | None) -> Any:
    query = STATEMENTS[stmt.query]
    params = stmt.params
    try:
        args = [
            pinned if name == "now" and name not in params else encode(params[name])
            for name in query.names
        ]
    except KeyError as exc:
        raise TypeError(f"query {stmt.query!r} needs parameter {exc.args[0]!r}") from None
    mode = stmt.mode
    if mode == "all":
        into = stmt.into
        assert into is not None
        return [into(row, PgDecode) for row in await conn.fetch(query.text, *args, timeout=timeout)]
    if mode == "one":
        row = await conn.fetchrow(query.text, *args, timeout=timeout)
        assert stmt.into is not None
        return None if row is None else stmt.into(row, PgDecode)
    if mode == "value":
        return await conn.fetchval(query.text, *args, timeout=timeout)
    status = await conn.execute(query.text, *args, timeout=timeout)
    if mode == "count":
        tail = status.rpartition(" ")[2]
        return int(tail) if tail.isdigit() else 0
    return None


_PLAIN = frozenset({str, int, float, bool, type(None), datetime})
"""Types asyncpg binds as they are (a batch's values skip :func:`encode`: thousands a round)."""


async def _batch(conn: Conn, pinned: datetime | None, batch: Batch, timeout: float | None) -> Any:
    """PostgreSQL sends a batch as one statement: each parameter is the array of its values."""
    if not batch.rows:
        return None if batch.into is None else []
    query = STATEMENTS[batch.query]
    try:
        args = [
            pinned
            if name == "now"
            else [v if type(v) in _PLAIN else encode(v) for v in (row[name] for row in batch.rows)]
            for name in query.names
        ]
    except KeyError as exc:
        raise TypeError(f"query {batch.query!r} needs parameter {exc.args[0]!r}") from None
    if batch.into is None:
        await conn.execute(query.text, *args, timeout=timeout)
        return None
    into = batch.into
    return [into(row, PgDecode) for row in await conn.fetch(query.text, *args, timeout=timeout)]
