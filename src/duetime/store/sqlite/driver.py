"""Runs :mod:`duetime.store.core` plans on SQLite, on the store's database thread.

Values cross as the schema stores them: timestamps as INTEGER microseconds since the epoch (UTC),
JSON (and lists, which SQLite reads with ``json_each``) as text, booleans as 0/1.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any, TypeVar

import orjson

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
from duetime.store.sql import PLAN_FILES, Query, load
from duetime.store.sqlite.rows import dumps, from_micros, to_micros

T = TypeVar("T")

QUERIES: Mapping[str, Query] = load(__name__.rpartition(".")[0], "sqlite", *PLAN_FILES)
"""The statements plans name, in SQLite's dialect."""


class SqliteDecode(Decode):
    """Column values as SQLite returns them."""

    time = staticmethod(from_micros)

    @staticmethod
    def opt_time(value: Any) -> datetime | None:
        return None if value is None else from_micros(value)

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
        return tuple(orjson.loads(value)) if value else ()


def encode(value: Any) -> Any:
    """A plan's parameter as SQLite stores it."""
    if isinstance(value, datetime):
        return to_micros(value)
    if isinstance(value, Json):
        return dumps(value.value)
    if isinstance(value, Mapping):
        return dumps(dict(value))
    if isinstance(value, list | tuple | frozenset | set):
        return dumps(list(value))
    if isinstance(value, timedelta):
        return round(value.total_seconds() * 1_000_000)
    return value


def run(conn: sqlite3.Connection, now: int, plan: Plan[T], wake: Woken | None = None) -> T:
    """Drive ``plan`` to its end inside the caller's transaction; returns its value. Wake
    requests are merged into ``wake`` (a mutable :class:`Wakeups`) when given."""
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
                    reply = _batch(conn, now, request)
                else:
                    reply = _statement(conn, now, request)
            except sqlite3.IntegrityError as exc:
                if "UNIQUE" not in str(exc):
                    raise
                error = UniqueViolation(str(exc))
        elif request is NOW:
            reply = from_micros(now)
        elif isinstance(request, Wake):
            if wake is not None:
                wake.ready |= request.ready
                wake.due |= request.due
                if request.ended:
                    wake.ended.extend(request.ended)
        elif isinstance(request, Call):
            reply = request.fn(*request.args)
        elif isinstance(request, Script):
            for statement in split_statements(request.sql):
                conn.execute(statement)
        else:  # pragma: no cover - a plan yielding something else is a bug
            raise TypeError(f"a store plan yielded {request!r}")


def _statement(conn: sqlite3.Connection, now: int, stmt: Stmt) -> Any:
    query = QUERIES[stmt.query]
    params = stmt.params
    try:
        bound = {
            name: now if name == "now" and name not in params else encode(params[name])
            for name in query.names
        }
    except KeyError as exc:
        raise TypeError(f"query {stmt.query!r} needs parameter {exc.args[0]!r}") from None
    cursor = conn.execute(query.text, bound)
    mode = stmt.mode
    if mode == "all" or mode == "one":
        into = stmt.into
        assert into is not None
        # sqlite3.Row finds a name by scanning every column; a dict per row is much cheaper for
        # converters that read many columns (a task row: 37).
        keys = [column[0] for column in cursor.description]
        if mode == "all":
            return [into(dict(zip(keys, row, strict=True)), SqliteDecode) for row in cursor]
        row = cursor.fetchone()
        return None if row is None else into(dict(zip(keys, row, strict=True)), SqliteDecode)
    if mode == "value":
        row = cursor.fetchone()
        return None if row is None else row[0]
    if mode == "count":
        return cursor.rowcount
    return None


_PLAIN = frozenset({str, int, float, bool, type(None)})


def _batch(conn: sqlite3.Connection, now: int, batch: Batch) -> Any:
    """SQLite runs a batch's statement once per row (binding fast: thousands a round)."""
    query = QUERIES[batch.query]

    def bind(params: Mapping[str, Any]) -> dict[str, Any]:
        bound = {}
        for name in query.names:
            v = now if name == "now" else params[name]
            bound[name] = v if type(v) in _PLAIN else encode(v)
        return bound

    try:
        rows = [bind(params) for params in batch.rows]
    except KeyError as exc:
        raise TypeError(f"query {batch.query!r} needs parameter {exc.args[0]!r}") from None
    if batch.into is None:
        conn.executemany(query.text, rows)
        return None
    into = batch.into
    return [into(r, SqliteDecode) for bound in rows for r in conn.execute(query.text, bound)]


def split_statements(script: str) -> list[str]:
    """Split a script into complete statements (``sqlite3.complete_statement`` knows about
    strings, comments and trigger bodies); a trailing comment-only remainder is dropped."""
    statements: list[str] = []
    buffer = ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            statements.append(buffer.strip())
            buffer = ""
    leftover = "\n".join(
        line for line in buffer.splitlines() if line.strip() and not line.strip().startswith("--")
    )
    if leftover:
        raise ValueError(f"migration ends with an incomplete statement: {leftover[:80]!r}")
    return statements
