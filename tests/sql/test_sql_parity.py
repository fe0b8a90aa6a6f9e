"""One set of rules: the HTTP API's table of refused creates (tests/api/test_tasks_create.py,
``INVALID``) run through both paths on one PostgreSQL store. Every body the API refuses, the SQL
API refuses naming the same field, in a batch (``create_tasks_v1``, the same JSON) and, where the
body's types can be said with SQL arguments, in a single create (``create_task_v1``).

Push targets are the one difference, by design: the SQL API makes worker tasks only, so any
push target is refused (field ``target.type``) where the API may accept or refuse it on another
field."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import asyncpg
import httpx
from sql_helpers import MAX_PAYLOAD_BYTES, Roles

from duetime.store.postgres.backend import PostgresStore
from duetime.types import TaskFilter

API_TESTS = Path(__file__).parent.parent / "api"
WORKER = {"type": "worker"}


def _api_table() -> tuple[list[tuple[dict[str, Any], str]], dict[str, Any]]:
    """The API tests' ``INVALID`` table and its webhook target, read from their module."""
    sys.path.insert(0, str(API_TESTS))
    try:
        spec = importlib.util.spec_from_file_location(
            "api_create_cases", API_TESTS / "test_tasks_create.py"
        )
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(API_TESTS))
    return module.INVALID, module.HOOK


INVALID, HOOK = _api_table()


def as_worker(body: dict[str, Any]) -> dict[str, Any]:
    """The body with the table's webhook target made a worker target (the kind SQL makes)."""
    return {**body, "target": WORKER} if body.get("target") == HOOK else body


def pushes(body: dict[str, Any]) -> bool:
    target = body.get("target")
    return isinstance(target, dict) and target.get("type") in ("http", "amqp", "nats", "redis")


SQL_TYPES = {
    "name": "text",
    "queue": "text",
    "idempotency_key": "text",
    "concurrency_key": "text",
    "payload_ref": "text",
    "delay_seconds": "float8",
    "timeout_seconds": "float8",
    "priority": "int4",
    "depends_on": "text[]",
    "payload": "jsonb",
    "retry": "jsonb",
    "labels": "jsonb",
    "target": "jsonb",
}


def single_call(body: dict[str, Any]) -> tuple[str, list[Any]] | None:
    """``create_task_v1`` with ``body``'s fields as typed arguments, or None when a field's JSON
    type has no SQL argument of that type (a string priority, a numeric run_at, unknown
    fields: the batch checks those)."""
    names: list[str] = []
    values: list[Any] = []
    for name, value in body.items():
        kind = SQL_TYPES.get(name)
        if kind is None:
            return None
        fits = {
            "text": isinstance(value, str),
            "float8": isinstance(value, int | float) and not isinstance(value, bool),
            "int4": isinstance(value, int) and not isinstance(value, bool) and abs(value) < 2**31,
            "text[]": isinstance(value, list) and all(isinstance(v, str) for v in value),
            "jsonb": True,
        }[kind]
        if not fits:
            return None
        names.append(f"{name} => ${len(names) + 1}::{kind}")
        values.append(json.dumps(value) if kind == "jsonb" else value)
    return f"SELECT * FROM duetime.create_task_v1({', '.join(names)})", values


async def sql_field(conn: asyncpg.Connection, sql: str, *values: Any) -> tuple[str, str]:
    """The SQLSTATE and field of the error ``sql`` raises (AssertionError if it succeeds)."""
    try:
        async with conn.transaction():
            await conn.fetch(sql, *values)
    except asyncpg.PostgresError as exc:
        assert str(exc).startswith(f"{exc.column_name}: "), str(exc)
        return exc.sqlstate, str(exc.column_name)
    raise AssertionError(f"accepted: {sql} {values}")


async def test_every_create_the_api_refuses_sql_refuses_naming_the_same_field(
    store: PostgresStore, roles: Roles, api: tuple[httpx.AsyncClient, str]
) -> None:
    client, tenant = api
    role = await roles.make()
    await store.sql_grant(tenant, role, max_payload_bytes=MAX_PAYLOAD_BYTES)
    conn = await roles.connect(role)
    checked_single = 0
    # The functions' patterns read the same whatever the caller's session says of backslashes.
    await conn.execute("SET standard_conforming_strings = off")
    try:
        for body, _field in INVALID:
            body = as_worker(body)
            resp = await client.post("/v1/tasks/batch", json={"tasks": [body]})
            assert resp.status_code == 422, (body, resp.text)
            http_field = resp.json()["field"]
            state, field = await sql_field(
                conn, "SELECT * FROM duetime.create_tasks_v1($1::jsonb)", json.dumps([body])
            )
            if pushes(body):
                assert (state, field) == ("22023", "tasks.0.target.type"), body
                continue
            assert (state, field) == ("22023", http_field), body
            call = single_call(body)
            if call is None or "target" not in body:
                continue
            single = await client.post("/v1/tasks", json=body)
            assert single.status_code == 422, (body, single.text)
            assert await sql_field(conn, *call[:1], *call[1]) == ("22023", single.json()["field"])
            checked_single += 1
    finally:
        await conn.close()
    assert checked_single >= 25
    assert await store.task_list(TaskFilter(tenant_id=tenant)) == []


async def test_bounds_on_values_agree_on_both_paths(
    store: PostgresStore, roles: Roles, api: tuple[httpx.AsyncClient, str]
) -> None:
    """Payload size (413 / 54000, counted on the compact JSON text), integers beyond 64 bits, a
    parent that is not the tenant's, and the batch size."""
    client, tenant = api
    role = await roles.make()
    await store.sql_grant(tenant, role, max_payload_bytes=MAX_PAYLOAD_BYTES)
    conn = await roles.connect(role)
    unknown = "0190c6f2-0000-7000-8000-000000000000"
    cases: list[tuple[dict[str, Any], int, str]] = [
        ({"payload": "x" * 1023}, 413, "54000"),
        ({"payload": {"k": ["y" * 1015, 1, 2]}}, 413, "54000"),
        ({"payload": {"n": 2**70}}, 422, "22023"),
        ({"depends_on": [unknown]}, 422, "22023"),
    ]
    try:
        for extra, status, state in cases:
            body = {"target": WORKER, **extra}
            resp = await client.post("/v1/tasks", json=body)
            assert resp.status_code == status, (body, resp.text)
            call = single_call(body)
            assert call is not None
            assert await sql_field(conn, call[0], *call[1]) == (state, resp.json()["field"])
        fits = {"target": WORKER, "payload": {"k": ["y" * 1012, 1]}}
        assert len(json.dumps(fits["payload"], separators=(",", ":"))) == MAX_PAYLOAD_BYTES
        assert len(json.dumps(fits["payload"])) > MAX_PAYLOAD_BYTES  # as PostgreSQL writes it
        assert (await client.post("/v1/tasks", json=fits)).status_code == 201
        call = single_call(fits)
        assert call is not None
        assert (await conn.fetchrow(call[0], *call[1]))["created"]
        for size in (0, 1001):
            resp = await client.post("/v1/tasks/batch", json={"tasks": [fits] * size})
            assert resp.status_code == 422
            assert await sql_field(
                conn,
                "SELECT * FROM duetime.create_tasks_v1($1::jsonb)",
                json.dumps([fits] * size),
            ) == ("22023", resp.json()["field"])
    finally:
        await conn.close()


async def test_a_repeat_over_http_of_a_task_made_through_sql_answers_it(
    store: PostgresStore, roles: Roles, api: tuple[httpx.AsyncClient, str]
) -> None:
    client, tenant = api
    role = await roles.make()
    await store.sql_grant(tenant, role, max_payload_bytes=MAX_PAYLOAD_BYTES)
    conn = await roles.connect(role)
    try:
        made = await conn.fetchrow(
            "SELECT * FROM duetime.create_task_v1(idempotency_key => 'k', queue => 'q')"
        )
        sql_id = str(made["id"])
        resp = await client.post(
            "/v1/tasks", json={"target": WORKER, "idempotency_key": "k", "queue": "q"}
        )
        assert resp.status_code == 200 and resp.json()["id"] == sql_id
        resp = await client.post("/v1/tasks", json={"target": WORKER, "idempotency_key": "h"})
        again = await conn.fetchrow("SELECT * FROM duetime.create_task_v1(idempotency_key => 'h')")
        assert str(again["id"]) == resp.json()["id"] and not again["created"]
    finally:
        await conn.close()
