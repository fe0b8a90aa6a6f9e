"""duetime's own PostgreSQL schema: a fresh store leaves nothing in ``public``; a database laid out
before there was one (objects in ``public``, data in them) moves in place at the next migrate and
works on; two deployments in two schemas of one database keep to themselves."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, date, datetime, timedelta

import asyncpg
import pytest

from duetime.errors import ConfigError
from duetime.history.events import HistoryFilter
from duetime.states import after_attempt
from duetime.store.postgres import schema
from duetime.store.postgres.backend import PostgresStore
from duetime.store.postgres.schema import connect as pg_connect
from duetime.store.sql import migrations
from duetime.types import (
    AttemptOutcome,
    ClaimRequest,
    Completion,
    NewSchedule,
    NewTask,
    ScheduleConfig,
    TargetType,
    TaskFilter,
    TaskStatus,
)

SCHEMA_MOVE = "0024_sql_api"
"""The version that brought duetime's own schema: a database laid out before it is in public."""
SQL_API_LATER = ("0030_sql_api_flow", "0031_sql_api_workflows", "0032_sql_api_flow_rules")
"""Later versions that change the SQL API the move's version made: they need it, so a database
laid out before the move has them pending with it."""
WORKER = {"type": "worker"}

PUBLIC_OBJECTS = """
SELECT 'relation ' || c.relname FROM pg_class c
WHERE c.relnamespace = 'public'::regnamespace
UNION ALL
SELECT 'type ' || t.typname FROM pg_type t
WHERE t.typnamespace = 'public'::regnamespace AND t.typname NOT LIKE '\\_%'
  AND t.typrelid = 0
UNION ALL
SELECT 'function ' || p.proname FROM pg_proc p WHERE p.pronamespace = 'public'::regnamespace
ORDER BY 1
"""


@pytest.fixture
async def empty_db(pg_url: str) -> AsyncIterator[str]:
    """The URL of a database with nothing in it (beside the fresh migrated one of ``pg_url``)."""
    name = f"duetime_s_{uuid.uuid4().hex[:12]}"
    admin = await asyncpg.connect(pg_url)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
        yield f"{pg_url.rpartition('/')[0]}/{name}"
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


async def objects_in_public(url: str) -> list[str]:
    conn = await asyncpg.connect(schema.split_url(url)[0])
    try:
        return [r[0] for r in await conn.fetch(PUBLIC_OBJECTS)]
    finally:
        await conn.close()


async def test_a_fresh_store_puts_nothing_in_public(pg_url: str) -> None:
    assert await objects_in_public(pg_url) == []
    conn = await pg_connect(pg_url)
    try:
        where = await conn.fetchval(
            "SELECT relnamespace::regnamespace::text FROM pg_class WHERE oid = 'tasks'::regclass"
        )
    finally:
        await conn.close()
    assert where == "duetime"


def test_the_schema_comes_from_the_store_url() -> None:
    assert schema.split_url("postgresql://h/db") == ("postgresql://h/db", "duetime")
    assert schema.split_url("postgresql://h/db?schema=jobs&sslmode=disable") == (
        "postgresql://h/db?sslmode=disable",
        "jobs",
    )
    for bad in ("Jobs", "a-b", "x" * 51, "", "public;drop"):
        with pytest.raises(ConfigError, match="schema"):
            schema.split_url(f"postgresql://h/db?schema={bad}")
    assert schema.channel("duetime", "ready") == "duetime_ready"


def test_the_move_covers_every_object_a_migration_creates() -> None:
    names = schema.created_names(migrations("duetime.store.postgres"))
    for expected in (
        "tasks",
        "tenants",
        "attempts",
        "history",
        "task_input",
        "task_completion",
        "history_partition_ensure",
        "duetime_actor",
        "schema_migrations",
        "history_id_seq",
        "sql_producers",
        "create_task_v1",
    ):
        assert expected in names
    assert "pg_temp" not in names and "if" not in names


async def legacy_database(url: str) -> dict[str, str]:
    """Migrate ``url`` as duetime did before its schema (every object in ``public``: every
    version but the move itself), with work
    in it: tasks ready, scheduled, blocked, run and ended, a schedule, history in a monthly
    partition; and an application's own table beside it. Returns ids by what they are."""
    old = PostgresStore(f"{url}?schema=public")
    # Every other version is applied in public too, so the tables have the columns this
    # revision's store writes; only the move into the schema is left to do.
    old._migrations = {
        v: s
        for v, s in migrations("duetime.store.postgres").items()
        if v != SCHEMA_MOVE and v not in SQL_API_LATER
    }
    await old.open()
    try:
        assert await old.migrate() == list(old._migrations)
        tenant = (await old.tenant_create("acme")).id
        now = await old.now()
        await old.history_partitions_ensure([date(now.year, now.month, 1)])
        made = await old.task_create_many(
            [
                NewTask(tenant_id=tenant, target=WORKER, queue="run", payload_json='{"n": 1}'),
                NewTask(
                    tenant_id=tenant,
                    target=WORKER,
                    queue="later",
                    run_at=now + timedelta(hours=2),
                    idempotency_key="later-1",
                ),
            ]
        )
        ran, later = made[0].task.id, made[1].task.id
        (child,) = await old.task_create_many(
            [NewTask(tenant_id=tenant, target=WORKER, queue="child", depends_on=(later,))]
        )
        (lease,) = await old.task_claim(
            ClaimRequest(
                worker_id="w",
                limit=1,
                queue="run",
                target_types=frozenset({TargetType.WORKER}),
                tenant_id=tenant,
            )
        )
        await old.task_complete_many(
            [
                Completion(
                    task_id=ran,
                    lease_id=lease.lease_id,
                    outcome=AttemptOutcome.SUCCEEDED,
                    started_at=now,
                    duration_ms=3.0,
                    error=None,
                    http_status=None,
                    retry_delay_seconds=None,
                    worker="w",
                    status=after_attempt(True, None),
                )
            ]
        )
        await old.history_pending_move(1000)
        sched = await old.schedule_create(
            NewSchedule(
                tenant_id=tenant,
                config=ScheduleConfig(
                    cron="0 2 * * *", task={"target": WORKER, "queue": "nightly"}
                ),
                anchor_at=now,
                materialized_until=now,
                key="nightly",
            )
        )
    finally:
        await old.close()
    app = await asyncpg.connect(url)
    try:
        await app.execute("CREATE TABLE orders (id int PRIMARY KEY); INSERT INTO orders VALUES (1)")
    finally:
        await app.close()
    return {
        "tenant": tenant,
        "ran": ran,
        "later": later,
        "child": child.task.id,
        "schedule": sched.id,
    }


async def test_a_database_laid_out_in_public_moves_with_its_data_and_works_on(
    empty_db: str,
) -> None:
    ids = await legacy_database(empty_db)
    before = await objects_in_public(empty_db)
    assert "relation tasks" in before and "function history_partition_ensure" in before
    store = PostgresStore(empty_db)
    await store.open()
    try:
        # The bookkeeping is read where it is: only what came after is pending.
        assert await store.migrations_pending() == [SCHEMA_MOVE, *SQL_API_LATER]
        assert await store.migrate() == [SCHEMA_MOVE, *SQL_API_LATER]
        assert await store.migrations_pending() == []
        # Only the application's table (its index and row type) is left in public.
        assert await objects_in_public(empty_db) == ["relation orders", "relation orders_pkey"]

        tenant = ids["tenant"]
        ran = await store.task_get(tenant, ids["ran"])
        assert ran is not None and ran.status is TaskStatus.SUCCEEDED and ran.attempts == 1
        assert ran.payload_json == '{"n": 1}'
        later = await store.task_get(tenant, ids["later"])
        assert later is not None and later.status is TaskStatus.SCHEDULED
        child = await store.task_get(tenant, ids["child"])
        assert child is not None and child.status is TaskStatus.BLOCKED
        assert (await store.schedule_get(tenant, ids["schedule"])) is not None
        assert (await store.tenant_usage(tenant)).pending_tasks == 2
        events = await store.history_query(HistoryFilter(tenant_id=tenant, task_id=ids["ran"]))
        assert [e.to_status for e in events if e.kind == "task"][:1] == ["succeeded"]
        assert len(await store.history_attempts(tenant, ids["ran"])) == 1
        conn = await pg_connect(empty_db)
        try:
            parts = await conn.fetch(
                "SELECT c.relnamespace::regnamespace::text AS ns FROM pg_inherits i "
                "JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'history'::regclass"
            )
            assert {p["ns"] for p in parts} == {"duetime"} and len(parts) >= 2
        finally:
            await conn.close()

        # The node works on: an idempotent repeat, a create, a claim, an ack, the child.
        (repeat,) = await store.task_create_many(
            [NewTask(tenant_id=tenant, target=WORKER, queue="later", idempotency_key="later-1")]
        )
        assert not repeat.created and repeat.task.id == ids["later"]
        await store.task_create_many([NewTask(tenant_id=tenant, target=WORKER, queue="run")])
        (lease,) = await store.task_claim(
            ClaimRequest(
                worker_id="w",
                limit=5,
                queue="run",
                target_types=frozenset({TargetType.WORKER}),
                tenant_id=tenant,
            )
        )
        done = await store.task_complete_many(
            [
                Completion(
                    task_id=lease.task.id,
                    lease_id=lease.lease_id,
                    outcome=AttemptOutcome.SUCCEEDED,
                    started_at=datetime.now(UTC),
                    duration_ms=1.0,
                    error=None,
                    http_status=None,
                    retry_delay_seconds=None,
                    worker="w",
                    status=after_attempt(True, None),
                )
            ]
        )
        assert len(done) == 1
        assert (await store.task_cancel(tenant, ids["later"])).status is TaskStatus.CANCELLED
        child = await store.task_get(tenant, ids["child"])
        assert child is not None and child.status is TaskStatus.FAILED
        assert await store.history_partitions_ensure(
            [date(2040, 1, 1)]
        ) == 1 and await objects_in_public(empty_db) == ["relation orders", "relation orders_pkey"]
    finally:
        await store.close()


async def test_two_deployments_in_two_schemas_of_one_database_keep_apart(pg_url: str) -> None:
    one = PostgresStore(pg_url)
    two = PostgresStore(f"{pg_url}?schema=duetime_two")
    await one.open()
    await two.open()
    try:
        assert "0001_init" in await two.migrate()
        a = (await one.tenant_create("a")).id
        b = (await two.tenant_create("b", tenant_id=a)).id  # the same id, another deployment
        seen = two.ready_signal.generation
        await one.task_create_many(
            [NewTask(tenant_id=a, target={"type": "http", "url": "https://x.test/"})]
        )
        assert not await two.ready_signal.wait_after(seen, 0.3)
        assert await two.task_list(TaskFilter(tenant_id=b)) == []
        assert len(await one.task_list(TaskFilter(tenant_id=a))) == 1
        assert two.ready_signal.channel == "duetime_two_ready"
    finally:
        await one.close()
        await two.close()


async def test_another_tools_tables_in_public_are_left_alone(empty_db: str) -> None:
    """An application's own ``schema_migrations`` and ``tasks`` in public are not duetime's: a
    fresh store makes its own in its schema and moves nothing."""
    app = await asyncpg.connect(empty_db)
    try:
        await app.execute(
            "CREATE TABLE schema_migrations (version text PRIMARY KEY);"
            "INSERT INTO schema_migrations VALUES ('0001_init');"
            "CREATE TABLE tasks (id int PRIMARY KEY, title text)"
        )
    finally:
        await app.close()
    store = PostgresStore(empty_db)
    await store.open()
    try:
        assert "0001_init" in await store.migrate()
        tenant = (await store.tenant_create("t")).id
        await store.task_create_many([NewTask(tenant_id=tenant, target=WORKER)])
    finally:
        await store.close()
    assert await objects_in_public(empty_db) == [
        "relation schema_migrations",
        "relation schema_migrations_pkey",
        "relation tasks",
        "relation tasks_pkey",
    ]
