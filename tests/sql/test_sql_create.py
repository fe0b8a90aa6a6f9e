"""The SQL API's creates and cancels inside the caller's own transaction: what they store, that
a rollback leaves nothing, that a commit wakes a node, idempotency, batches, parents, quotas."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from duetime.store.postgres.backend import PostgresStore
from duetime.store.postgres.schema import connect as pg_connect
from duetime.types import ClaimRequest, TargetType, TaskFilter, TaskStatus, TenantQuotas

WORKER = {"type": "worker"}


async def created(conn: asyncpg.Connection, **args: object) -> asyncpg.Record:
    """``duetime.create_task_v1`` with ``args`` as named arguments (JSON ones as text)."""
    names = list(args)
    casts = {"payload": "jsonb", "labels": "jsonb", "retry": "jsonb", "target": "jsonb"}
    call = ", ".join(
        f"{n} => ${i + 1}" + (f"::{casts[n]}" if n in casts else "") for i, n in enumerate(names)
    )
    values = [json.dumps(v) if n in casts else v for n, v in args.items()]
    row = await conn.fetchrow(f"SELECT * FROM duetime.create_task_v1({call})", *values)
    assert row is not None
    return row


async def test_a_task_is_stored_as_the_node_reads_it(
    store: PostgresStore, tenant: str, producer: asyncpg.Connection
) -> None:
    assert await producer.fetchval("SELECT duetime.api_version()") == 1
    run_at = datetime(2031, 1, 2, 3, 4, 5, tzinfo=UTC)
    row = await created(
        producer,
        queue="emails",
        name="welcome",
        payload={"to": "a@example.com", "n": [1, 2]},
        run_at=run_at,
        priority=7,
        timeout_seconds=12.5,
        retry={"max_attempts": 3},
        labels={"team": "growth"},
        concurrency_key="user-1",
    )
    assert row["created"] is True and row["status"] == "scheduled" and row["run_at"] == run_at
    task = await store.task_get(tenant, str(row["id"]))
    assert task is not None
    assert (task.queue, task.name, task.priority, task.timeout_seconds) == (
        "emails",
        "welcome",
        7,
        12.5,
    )
    assert json.loads(task.payload_json) == {"to": "a@example.com", "n": [1, 2]}
    assert task.target == WORKER and task.labels == {"team": "growth"}
    assert task.retry.max_attempts == 3 and task.retry.initial_delay_seconds == 1.0
    assert task.concurrency_key == "user-1" and task.run_at == run_at
    assert task.status is TaskStatus.SCHEDULED
    # Ids are UUIDv7 as the node makes them: newer tasks list first.
    second = await created(producer, queue="emails")
    listed = await store.task_list(TaskFilter(tenant_id=tenant))
    assert [t.id for t in listed][:2] == [str(second["id"]), str(row["id"])]
    assert str(second["id"])[14] == "7"


async def test_a_rolled_back_transaction_leaves_no_task(
    store: PostgresStore, tenant: str, producer: asyncpg.Connection
) -> None:
    tr = producer.transaction()
    await tr.start()
    row = await created(producer, queue="q", payload={"order": 1})
    await producer.execute(
        "SELECT duetime.create_tasks_v1($1::jsonb)", json.dumps([{"target": WORKER}])
    )
    await tr.rollback()
    assert await store.task_get(tenant, str(row["id"])) is None
    assert (await store.task_list(TaskFilter(tenant_id=tenant))) == []
    assert (await store.tenant_usage(tenant)).pending_tasks == 0


async def test_a_commit_wakes_a_node_and_the_task_can_be_claimed(
    store: PostgresStore, tenant: str, producer: asyncpg.Connection
) -> None:
    seen = store.ready_signal.generation
    async with producer.transaction():
        row = await created(producer, queue="jobs")
        # Inside the transaction nothing is announced yet: NOTIFY is delivered at commit.
        assert not await store.ready_signal.wait_after(seen, 0.3)
    assert await store.ready_signal.wait_after(seen, 10.0)
    leases = await store.task_claim(
        ClaimRequest(
            limit=5,
            lease_seconds=30,
            worker_id="w",
            target_types=frozenset({TargetType.WORKER}),
            tenant_id=tenant,
            queue="jobs",
        )
    )
    assert [lease.task.id for lease in leases] == [str(row["id"])]


async def test_a_scheduled_task_wakes_the_promoter(
    store: PostgresStore, producer: asyncpg.Connection
) -> None:
    store.due_signal.wake()  # consume whatever woke it before
    await store.due_signal.wait(0.01)
    row = await created(producer, delay_seconds=60.0)
    assert row["status"] == "scheduled"
    assert await store.due_signal.wait(10.0)


async def test_idempotency_keys_behave_as_on_http(
    store: PostgresStore, tenant: str, producer: asyncpg.Connection
) -> None:
    first = await created(producer, queue="q", idempotency_key="order-1", payload={"a": 1})
    again = await created(producer, queue="q", idempotency_key="order-1", payload={"a": 1})
    assert first["created"] and not again["created"] and again["id"] == first["id"]
    with pytest.raises(asyncpg.UniqueViolationError) as caught:
        await created(producer, queue="q", idempotency_key="order-1", payload={"a": 2})
    assert caught.value.column_name == "idempotency_key"
    assert str(first["id"]) in str(caught.value)
    # The same request from a session in another time zone, with other float digits, repeats.
    at = datetime(2031, 5, 6, 7, 8, 9, tzinfo=UTC)
    timed = await created(producer, idempotency_key="timed", run_at=at, timeout_seconds=0.1)
    await producer.execute("SET TimeZone = 'Asia/Tokyo'; SET extra_float_digits = 0")
    again = await created(producer, idempotency_key="timed", run_at=at, timeout_seconds=0.1)
    assert not again["created"] and again["id"] == timed["id"]
    await producer.execute("RESET TimeZone; RESET extra_float_digits")
    # A batch answers hits as they are, a key repeated inside it with the first item's task.
    rows = await producer.fetch(
        "SELECT * FROM duetime.create_tasks_v1($1::jsonb)",
        json.dumps(
            [
                {"target": WORKER, "idempotency_key": "order-1", "payload": {"a": 3}},
                {"target": WORKER, "idempotency_key": "order-2"},
                {"target": WORKER, "idempotency_key": "order-2", "priority": 5},
            ]
        ),
    )
    assert [(r["created"], r["id"] == first["id"]) for r in rows] == [
        (False, True),
        (True, False),
        (False, False),
    ]
    assert rows[1]["id"] == rows[2]["id"]
    assert len(await store.task_list(TaskFilter(tenant_id=tenant))) == 3


async def test_a_batch_is_all_or_nothing_in_input_order(
    store: PostgresStore, tenant: str, producer: asyncpg.Connection
) -> None:
    items = [{"target": WORKER, "queue": f"q{i}", "payload": i} for i in range(50)]
    rows = await producer.fetch(
        "SELECT * FROM duetime.create_tasks_v1($1::jsonb)", json.dumps(items)
    )
    tasks = [await store.task_get(tenant, str(r["id"])) for r in rows]
    assert [t.queue for t in tasks if t is not None] == [f"q{i}" for i in range(50)]
    bad = [*items[:3], {"target": WORKER, "queue": "no spaces"}]
    with pytest.raises(asyncpg.InvalidParameterValueError) as caught:
        await producer.fetch("SELECT * FROM duetime.create_tasks_v1($1::jsonb)", json.dumps(bad))
    assert caught.value.column_name == "tasks.3.queue"
    assert str(caught.value).startswith("tasks.3.queue: ")
    assert len(await store.task_list(TaskFilter(tenant_id=tenant, limit=100))) == 50


async def test_parents_block_a_task_and_a_cancelled_parent_fails_it(
    store: PostgresStore, tenant: str, producer: asyncpg.Connection
) -> None:
    parent = await created(producer, queue="q", run_at=datetime.now(UTC) + timedelta(hours=1))
    child = await created(producer, queue="q", depends_on=[str(parent["id"])])
    assert child["status"] == "blocked"
    assert await producer.fetchval("SELECT duetime.cancel_task_v1($1)", str(parent["id"])) == (
        "cancelled"
    )
    task = await store.task_get(tenant, str(child["id"]))
    assert task is not None and task.status is TaskStatus.FAILED
    dead = await created(producer, queue="q", depends_on=[str(parent["id"])])
    assert dead["status"] == "failed"


async def test_cancel_answers_as_the_http_api(
    store: PostgresStore, tenant: str, producer: asyncpg.Connection
) -> None:
    row = await created(producer, queue="q")
    leases = await store.task_claim(
        ClaimRequest(
            limit=1,
            lease_seconds=30,
            worker_id="w",
            target_types=frozenset({TargetType.WORKER}),
            tenant_id=tenant,
            queue="q",
        )
    )
    assert len(leases) == 1
    assert await producer.fetchval("SELECT duetime.cancel_task_v1($1)", str(row["id"])) == "running"
    task = await store.task_get(tenant, str(row["id"]))
    assert task is not None and task.cancel_requested
    waiting = await created(producer, queue="q", delay_seconds=30.0)
    assert await producer.fetchval("SELECT duetime.cancel_task_v1($1)", str(waiting["id"])) == (
        "cancelled"
    )
    with pytest.raises(asyncpg.PostgresError) as ended:
        await producer.fetchval("SELECT duetime.cancel_task_v1($1)", str(waiting["id"]))
    assert ended.value.sqlstate == "55000"
    for unknown in ("0190c6f2-0000-7000-8000-000000000000", "not-an-id"):
        with pytest.raises(asyncpg.PostgresError) as missing:
            await producer.fetchval("SELECT duetime.cancel_task_v1($1)", unknown)
        assert missing.value.sqlstate == "P0002"


async def test_quotas_hold_as_on_http(
    store: PostgresStore, tenant: str, producer: asyncpg.Connection
) -> None:
    await store.tenant_quotas_put(tenant, TenantQuotas(max_pending_tasks=2))
    await created(producer)
    with pytest.raises(asyncpg.PostgresError) as over:
        await producer.fetch(
            "SELECT * FROM duetime.create_tasks_v1($1::jsonb)",
            json.dumps([{"target": WORKER}, {"target": WORKER}]),
        )
    assert (over.value.sqlstate, over.value.constraint_name) == ("DT429", "max_pending_tasks")
    await created(producer)
    await store.tenant_quotas_put(tenant, TenantQuotas(max_creates_per_second=1.0))
    await created(producer)
    with pytest.raises(asyncpg.PostgresError) as fast:
        await created(producer)
    assert (fast.value.sqlstate, fast.value.constraint_name) == ("DT429", "max_creates_per_second")
    assert "retry after" in str(fast.value.hint)


async def test_the_audit_trail_names_the_role(
    store: PostgresStore, tenant: str, producer: asyncpg.Connection
) -> None:
    row = await created(producer)
    role = await producer.fetchval("SELECT session_user")
    conn = await pg_connect(store._url)
    try:
        actors = await conn.fetch(
            "SELECT r.actor FROM history_pending p, unnest(p.rows) AS r WHERE r.task_id = $1",
            row["id"],
        )
    finally:
        await conn.close()
    assert [a["actor"] for a in actors] == [f"sql:{role}"]
    # The setting is the function's own: nothing of it is left in the caller's transaction.
    assert await producer.fetchval("SELECT current_setting('duetime.actor', true)") in (None, "")


async def test_concurrent_creates_through_both_paths_all_land(
    store: PostgresStore, tenant: str, producer: asyncpg.Connection
) -> None:
    async def through_sql() -> None:
        for _ in range(20):
            await created(producer, queue="mixed")

    await asyncio.gather(through_sql(), *(store_create(store, tenant) for _ in range(20)))
    listed = await store.task_list(TaskFilter(tenant_id=tenant, queue="mixed", limit=100))
    assert len(listed) == 40


async def store_create(store: PostgresStore, tenant: str) -> None:
    from duetime.types import NewTask

    await store.task_create_many(
        [NewTask(tenant_id=tenant, target=WORKER, payload_json="null", queue="mixed")]
    )
