"""Poison rows for the engine's loops, made in the real stores: raw SQL on the store's own
database (a trigger that refuses one task's writes, a row edited past what the API allows)."""

from __future__ import annotations

import sqlite3
from typing import Any

from duetime.store.postgres.schema import connect as pg_connect


def _sqlite_path(url: str) -> str:
    return url.removeprefix("sqlite:///")


async def sql(url: str, *statements: str) -> None:
    """Run ``statements`` on the database behind a store URL (SQLite or PostgreSQL)."""
    if url.startswith("sqlite:"):
        conn = sqlite3.connect(_sqlite_path(url))
        try:
            for statement in statements:
                conn.execute(statement)
            conn.commit()
        finally:
            conn.close()
        return
    pg = await pg_connect(url, timeout=5)
    try:
        for statement in statements:
            await pg.execute(statement)
    finally:
        await pg.close()


async def refuse(url: str, table: str, event: str, task_id: str, *, unless_error: bool) -> None:
    """A trigger that refuses ``event`` (INSERT or UPDATE) on ``table`` rows of ``task_id``
    (``id`` for ``tasks``, ``task_id`` for ``attempts``). With ``unless_error``, a failure that
    isolation records (an error starting "could not record") is let through."""
    column = "id" if table == "tasks" else "task_id"
    if url.startswith("sqlite:"):
        when = f"NEW.{column} = '{task_id}'"
        if unless_error:
            when += " AND coalesce(NEW.error, '') NOT LIKE 'could not record%'"
        await sql(
            url,
            f"CREATE TRIGGER poison_{table}_{event.lower()} BEFORE {event} ON {table} "
            f"WHEN {when} BEGIN SELECT RAISE(ABORT, 'poison row refused'); END",
        )
        return
    cond = f"NEW.{column} = '{task_id}'::uuid"
    if unless_error:
        cond += " AND coalesce(NEW.error, '') NOT LIKE 'could not record%'"
    name = f"poison_{table}_{event.lower()}"
    await sql(
        url,
        f"CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        f"IF {cond} THEN RAISE EXCEPTION 'poison row refused' USING ERRCODE = '22000'; END IF; "
        "RETURN NEW; END $$",
        f"CREATE TRIGGER {name} BEFORE {event} ON {table} FOR EACH ROW EXECUTE FUNCTION {name}()",
    )


async def set_columns(url: str, table: str, row_id: str, **values: Any) -> None:
    """``UPDATE table SET column = value ... WHERE id = row_id`` (values given as SQL text)."""
    assignments = ", ".join(f"{k} = {v}" for k, v in values.items())
    column = "id" if url.startswith("sqlite:") else "id::text"
    await sql(url, f"UPDATE {table} SET {assignments} WHERE {column} = '{row_id}'")
