"""duetime.sdk.sql on every connection it takes: asyncpg, psycopg 3 (sync and async), SQLAlchemy
sessions (sync and async); the SDK's task specs and defaults; a task handle deferring inside a
given connection; a rollback leaves nothing; workflows requested on each."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from sql_helpers import MAX_PAYLOAD_BYTES, Roles, as_role
from sqlalchemy import create_engine
from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine
from sqlalchemy.orm import Session

from duetime import errors
from duetime.api.app import create_app
from duetime.api.sql_intake import WorkflowIntake
from duetime.clock import SystemClock
from duetime.config import Settings
from duetime.sdk import sql
from duetime.sdk.models import RetrySpec, TaskSpec
from duetime.sdk.worker import Worker
from duetime.sdk.workflows import Flow, chain, group, step
from duetime.store.postgres.backend import PostgresStore
from duetime.types import TaskFilter, TaskStatus


@pytest.fixture
async def role_url(store: PostgresStore, tenant: str, roles: Roles, pg_url: str) -> str:
    role = await roles.make()
    await store.sql_grant(tenant, role, max_payload_bytes=MAX_PAYLOAD_BYTES)
    return as_role(pg_url, role)


SPECS = [
    {"queue": "a", "payload": {"n": 1}},
    TaskSpec(target={"type": "worker"}, queue="b", retry=RetrySpec(max_attempts=2)),
    {"queue": "c", "idempotency_key": "k-1"},
    {"queue": "c", "idempotency_key": "k-1"},
]


async def test_asyncpg_connection(role_url: str, store: PostgresStore, tenant: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(role_url)
    try:
        async with conn.transaction():
            one = await sql.create_task(
                conn,
                queue="emails",
                payload={"to": "x"},
                run_at=datetime.now(UTC) + timedelta(hours=1),
                labels={"team": "a"},
                retry={"max_attempts": 2},
                depends_on=[],
                priority=3,
                timeout_seconds=5.0,
            )
            many = await sql.create_tasks(conn, SPECS)
        rolled = conn.transaction()
        await rolled.start()
        gone = await sql.create_task(conn, queue="never")
        await rolled.rollback()
    finally:
        await conn.close()
    assert one.created and one.status == "scheduled"
    task = await store.task_get(tenant, one.id)
    assert task is not None and task.labels == {"team": "a"} and task.retry.max_attempts == 2
    assert task.priority == 3 and task.timeout_seconds == 5.0
    assert json.loads(task.payload_json) == {"to": "x"}
    assert [m.created for m in many] == [True, True, True, False] and many[2].id == many[3].id
    second = await store.task_get(tenant, many[1].id)
    assert second is not None and second.retry.max_attempts == 2 and second.queue == "b"
    assert await store.task_get(tenant, gone.id) is None


def test_psycopg_connection(role_url: str) -> None:
    window = {"key": "report-1", "period": "PT1H"}
    with psycopg.connect(role_url) as conn:
        made = sql.create_task(conn, queue="p", payload=[1, 2], depends_on=[])
        many = sql.create_tasks(conn, SPECS[:2])
        conn.rollback()
        again = sql.create_task(conn, queue="p", idempotency_key="kept")
        # A task's own uniqueness window, one create and one batch item.
        windowed = sql.create_task(conn, queue="p", unique=window)
        (answered,) = sql.create_tasks(conn, [{"queue": "p", "unique": window}])
        conn.commit()
        with conn.cursor() as cur:
            cur.execute("SELECT duetime.api_version()")
            assert cur.fetchone() == (1,)
    assert made.created and len(many) == 2 and again.created and again.status == "ready"
    assert windowed.created and (answered.id, answered.created) == (windowed.id, False)


async def test_psycopg_async_connection(role_url: str, store: PostgresStore, tenant: str) -> None:
    async with await psycopg.AsyncConnection.connect(role_url) as conn:
        made = await sql.create_task(conn, queue="pa", delay_seconds=30.0)
        many = await sql.create_tasks(conn, [{"queue": "pa"}, {"queue": "pb"}])
        await conn.commit()
    assert made.status == "scheduled" and [m.created for m in many] == [True, True]
    stored = await store.task_get(tenant, many[1].id)
    assert stored is not None and stored.queue == "pb"


def test_sqlalchemy_session(role_url: str, pg_url: str) -> None:
    engine = create_engine(role_url.replace("postgresql://", "postgresql+psycopg://"))
    try:
        with Session(engine) as session, session.begin():
            made = sql.create_task(session, queue="s", payload={"x": None})
            many = sql.create_tasks(session, SPECS)
        with Session(engine) as session:
            gone = sql.create_task(session, queue="never")
            session.rollback()
    finally:
        engine.dispose()
    assert made.created and [m.created for m in many] == [True, True, True, False]
    with psycopg.connect(pg_url) as admin:
        ids = [made.id, gone.id]
        found = admin.execute("SELECT id::text FROM duetime.tasks WHERE id::text = ANY(%s)", [ids])
        assert [row[0] for row in found.fetchall()] == [made.id]


async def test_sqlalchemy_async_session(role_url: str, store: PostgresStore, tenant: str) -> None:
    engine = create_async_engine(role_url.replace("postgresql://", "postgresql+asyncpg://"))
    try:
        async with AsyncSession(engine) as session, session.begin():
            made = await sql.create_task(session, queue="sa", payload={"k": "v"})
        async with AsyncSession(engine) as session:
            gone = await sql.create_tasks(session, [{"queue": "never"}])
            await session.rollback()
    finally:
        await engine.dispose()
    assert await store.task_get(tenant, made.id) is not None
    assert await store.task_get(tenant, gone[0].id) is None
    assert {t.queue for t in await store.task_list(TaskFilter(tenant_id=tenant))} == {"sa"}


async def test_a_task_handle_defers_inside_a_given_connection(
    role_url: str, store: PostgresStore, tenant: str
) -> None:
    import asyncpg

    worker = Worker("http://127.0.0.1:9", queues=["reports"], api_key="unused")

    @worker.task(priority=4, retry={"max_attempts": 7})
    async def send_report(job: object) -> None:
        return None

    conn = await asyncpg.connect(role_url)
    try:
        async with conn.transaction():
            made = await send_report.defer_in(conn, {"day": "2026-12-01"}, delay_seconds=10)
    finally:
        await conn.close()
    task = await store.task_get(tenant, made.id)
    assert task is not None
    assert (task.name, task.queue, task.priority, task.status) == (
        "send_report",
        "reports",
        4,
        TaskStatus.SCHEDULED,
    )
    assert task.retry.max_attempts == 7 and json.loads(task.payload_json) == {"day": "2026-12-01"}


async def test_a_task_handles_uniqueness_window_holds_inside_a_given_connection(
    role_url: str,
) -> None:
    import asyncpg

    worker = Worker("http://127.0.0.1:9", queues=["reports"], api_key="unused")

    @worker.task(unique={"key_from": "payload.day", "period": "P1D"})
    async def daily_report(job: object) -> None:
        return None

    conn = await asyncpg.connect(role_url)
    try:
        first = await daily_report.defer_in(conn, {"day": "2026-12-01"})
        again = await daily_report.defer_in(conn, {"day": "2026-12-01"})
        other = await daily_report.defer_in(conn, {"day": "2026-12-02"})
    finally:
        await conn.close()
    assert first.created and (again.id, again.created) == (first.id, False)
    assert other.created and other.id != first.id


def test_a_malformed_spec_is_refused_before_anything_is_sent() -> None:
    with pytest.raises(errors.ValidationError) as caught:
        sql.create_task(object(), priority="high")  # type: ignore[call-overload]
    assert caught.value.field == "priority"
    with pytest.raises(TypeError, match="asyncpg connection, a psycopg 3 connection"):
        sql.create_task(object(), queue="q")  # type: ignore[call-overload]
    with pytest.raises(ValueError, match="schema"):
        sql.create_tasks(object(), [], schema="bad; DROP")  # type: ignore[call-overload]


def _flow() -> Flow:
    return chain(step("fetch", payload={"n": 1}), group(step("left"), step("right")))


async def test_a_workflow_requested_on_each_kind_of_connection(
    role_url: str, store: PostgresStore, tenant: str
) -> None:
    import asyncpg

    conn = await asyncpg.connect(role_url)
    try:
        async with conn.transaction():
            mine = await sql.create_workflow(
                conn, _flow(), name="daily", defaults={"target": {"type": "worker"}}
            )
        pending = await sql.workflow_request(conn, mine.id)
    finally:
        await conn.close()
    with psycopg.connect(role_url) as sync_conn:
        theirs = sql.create_workflow(
            sync_conn,
            _flow(),
            defaults={"target": {"type": "worker"}},
            idempotency_key="w-1",
        )
    engine = create_async_engine(role_url.replace("postgresql://", "postgresql+psycopg://"))
    try:
        async with AsyncSession(engine) as session, session.begin():
            again = await sql.create_workflow(
                session,
                _flow(),
                defaults={"target": {"type": "worker"}},
                idempotency_key="w-1",
            )
            refused = await sql.create_workflow(session, [{"ref": "a", "depends_on": ["a"]}])
    finally:
        await engine.dispose()
    assert mine.created and pending.state == "pending" and pending.workflow_id is None
    assert theirs.created and (again.id, again.created) == (theirs.id, False)
    app = create_app(Settings(max_payload_bytes=MAX_PAYLOAD_BYTES), store)
    intake = WorkflowIntake(store, app.state.services.creator, SystemClock())
    assert await intake.run_once() == 3
    made = await store.workflow_get(tenant, mine.id)
    assert made is not None and made.workflow.name == "daily"
    assert sorted(n.ref for n in made.nodes) == ["fetch", "left", "right"]
    with psycopg.connect(role_url) as sync_conn:
        ended = sql.workflow_request(sync_conn, refused.id)
    assert ended.state == "refused" and ended.problem is not None
    assert ended.problem["status"] == 422 and ended.problem["field"] == "nodes.0.target"
