"""Least privilege on the SQL API: a producer's role creates for its own tenant and does nothing
else — no table, no internal function, no other tenant, no way round through its search path."""

from __future__ import annotations

import json
import uuid

import asyncpg
import pytest
from sql_helpers import MAX_PAYLOAD_BYTES, Roles, as_role

from duetime.errors import NotFound, ValidationError
from duetime.store.postgres.backend import PostgresStore
from duetime.store.sql import migrations
from duetime.types import TaskFilter

ONE = json.dumps([{"target": {"type": "worker"}}])


async def test_a_role_creates_for_its_own_tenant_only(
    store: PostgresStore, tenant: str, roles: Roles
) -> None:
    other = (await store.tenant_create("globex")).id
    role_a, role_b = await roles.make(), await roles.make()
    await store.sql_grant(tenant, role_a, max_payload_bytes=MAX_PAYLOAD_BYTES)
    await store.sql_grant(other, role_b, max_payload_bytes=MAX_PAYLOAD_BYTES)
    a, b = await roles.connect(role_a), await roles.connect(role_b)
    try:
        made_a = await a.fetchval("SELECT id FROM duetime.create_task_v1()")
        made_b = await b.fetchval("SELECT id FROM duetime.create_task_v1()")
        assert [t.id for t in await store.task_list(TaskFilter(tenant_id=tenant))] == [str(made_a)]
        assert [t.id for t in await store.task_list(TaskFilter(tenant_id=other))] == [str(made_b)]
        # B's task is not A's to cancel: to A it does not exist.
        with pytest.raises(asyncpg.PostgresError) as caught:
            await a.fetchval("SELECT duetime.cancel_task_v1($1)", str(made_b))
        assert caught.value.sqlstate == "P0002"
        # Granting A another tenant moves it there; it never holds two.
        await store.sql_grant(other, role_a, max_payload_bytes=MAX_PAYLOAD_BYTES)
        moved = await a.fetchval("SELECT id FROM duetime.create_task_v1()")
        assert str(moved) in {t.id for t in await store.task_list(TaskFilter(tenant_id=other))}
        assert await store.sql_producers() == sorted([(role_a, other), (role_b, other)])
    finally:
        await a.close()
        await b.close()


async def test_a_producer_reads_and_writes_no_table(
    producer: asyncpg.Connection, store: PostgresStore, tenant: str
) -> None:
    await producer.fetchval("SELECT id FROM duetime.create_task_v1()")
    statements = [
        "SELECT * FROM duetime.tasks",
        "SELECT * FROM duetime.tenants",
        "SELECT * FROM duetime.api_keys",
        "SELECT * FROM duetime.sql_producers",
        "UPDATE duetime.tasks SET priority = 1",
        "DELETE FROM duetime.tasks",
        "INSERT INTO duetime.sql_producers VALUES (session_user, 'x')",
        "UPDATE duetime.sql_api_settings SET max_payload_bytes = 1",
        "CREATE TABLE duetime.mine (x int)",
    ]
    for statement in statements:
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await producer.execute(statement)
    # Only the four API functions: the internals (SECURITY INVOKER or not) are not its to run.
    internals = [
        "SELECT duetime.sql_api_store('x', '{}', true, false)",
        "SELECT duetime.sql_api_admit('x', 1, 1.0, 1)",
        "SELECT duetime.sql_api_grant(session_user, 'x')",
        "SELECT duetime.sql_api_revoke(session_user)",
        "SELECT duetime.sql_api_refuse_role()",
    ]
    for statement in internals:
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await producer.execute(statement)
    assert len(await store.task_list(TaskFilter(tenant_id=tenant))) == 1


async def test_a_role_without_a_grant_is_refused(
    store: PostgresStore, tenant: str, roles: Roles
) -> None:
    role = await roles.make()
    conn = await roles.connect(role)
    try:
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await conn.fetchval("SELECT duetime.create_tasks_v1($1::jsonb)", ONE)
        await store.sql_grant(tenant, role, max_payload_bytes=MAX_PAYLOAD_BYTES)
        await conn.fetchval("SELECT duetime.create_tasks_v1($1::jsonb)", ONE)
        assert await store.sql_revoke(role)
        assert not await store.sql_revoke(role)
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await conn.fetchval("SELECT duetime.create_tasks_v1($1::jsonb)", ONE)
    finally:
        await conn.close()


async def test_the_search_path_gives_no_way_round(
    store: PostgresStore, tenant: str, roles: Roles, pg_url: str
) -> None:
    """A caller's own objects named as duetime's (a temporary sql_producers mapping it to another
    tenant, a schema of its own first on its path with look-alikes of duetime's functions and of
    a built-in) change nothing."""
    other = (await store.tenant_create("globex")).id
    role = await roles.make()
    admin = await asyncpg.connect(pg_url)
    try:
        await admin.execute(f"CREATE SCHEMA {role}_own AUTHORIZATION {role}")
    finally:
        await admin.close()
    await store.sql_grant(tenant, role, max_payload_bytes=MAX_PAYLOAD_BYTES)
    conn = await roles.connect(role)
    try:
        await conn.execute(
            f"""
            CREATE TEMP TABLE sql_producers (role_name text, tenant_id text);
            INSERT INTO sql_producers VALUES (session_user, '{other}');
            CREATE FUNCTION {role}_own.sql_api_store(tenant text, fresh duetime.task_input[],
                                                     single boolean, parents boolean)
                RETURNS duetime.task_created_v1[]
                LANGUAGE sql AS $$ SELECT '{{}}'::duetime.task_created_v1[] $$;
            CREATE FUNCTION {role}_own.statement_timestamp() RETURNS timestamptz
                LANGUAGE sql AS $$ SELECT '2000-01-01'::timestamptz $$;
            SET search_path = pg_temp, {role}_own, public;
            """
        )
        row = await conn.fetchrow("SELECT * FROM duetime.create_task_v1()")
        assert row is not None and row["created"]
        assert row["run_at"].year > 2000
        assert [t.id for t in await store.task_list(TaskFilter(tenant_id=tenant))] == [
            str(row["id"])
        ]
        assert await store.task_list(TaskFilter(tenant_id=other)) == []
        # Without its grant, its own mapping to another tenant gets it nothing.
        await store.sql_revoke(role)
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await conn.fetchval("SELECT duetime.create_tasks_v1($1::jsonb)", ONE)
    finally:
        await conn.close()


async def test_granting_needs_a_role_and_a_tenant(
    store: PostgresStore, tenant: str, roles: Roles, fresh_role_name: str
) -> None:
    with pytest.raises(ValidationError) as no_role:
        await store.sql_grant(tenant, fresh_role_name, max_payload_bytes=MAX_PAYLOAD_BYTES)
    assert no_role.value.field == "role"
    role = await roles.make()
    with pytest.raises(NotFound):
        await store.sql_grant("no-such-tenant", role, max_payload_bytes=MAX_PAYLOAD_BYTES)
    assert await store.sql_producers() == []


async def test_a_role_granted_before_the_single_create_took_a_window_keeps_it(
    pg_url: str, roles: Roles
) -> None:
    """``create_task_v1`` is made again with its new last argument (migration 0032): a role
    granted under the earlier signature may call it, old calls and new alike."""
    name = f"dt_regrant_{uuid.uuid4().hex[:10]}"
    admin = await asyncpg.connect(pg_url)
    await admin.execute(f'CREATE DATABASE "{name}"')
    url = f"{pg_url.rpartition('/')[0]}/{name}"
    store = PostgresStore(url)
    try:
        store._migrations = {
            v: s for v, s in migrations("duetime.store.postgres").items() if v < "0032"
        }
        await store.open()
        await store.migrate()
        tenant = (await store.tenant_create("acme")).id
        role = await roles.make()
        await store.sql_grant(tenant, role, max_payload_bytes=MAX_PAYLOAD_BYTES)
        store._migrations = migrations("duetime.store.postgres")
        assert await store.migrate() == [v for v in store._migrations if v >= "0032"]
        conn = await asyncpg.connect(as_role(url, role))
        try:
            old_call = await conn.fetchrow("SELECT * FROM duetime.create_task_v1(queue => 'q')")
            window = '{"key": "k", "period": "PT1H"}'
            call = "SELECT * FROM duetime.create_task_v1(queue => 'q', \"unique\" => $1::jsonb)"
            first, again = await conn.fetchrow(call, window), await conn.fetchrow(call, window)
        finally:
            await conn.close()
        assert old_call is not None and old_call["created"]
        assert first is not None and again is not None
        assert (again["id"], again["created"]) == (first["id"], False)
    finally:
        await store.close()
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()
