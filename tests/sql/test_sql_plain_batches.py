"""Batches of plain items (ADR 0015): ``sql_api_plain`` builds every item exactly as the per-item
checks (``sql_api_spec``, then ``sql_api_task``) build it, and gives up (NULL) on any batch with
an item those checks might refuse or that takes a shape it leaves to them. The API's table of
refused bodies runs through ``create_tasks_v1`` in tests/sql/test_sql_parity.py, which names
each refusal's field whichever way the batch went."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest
from sql_helpers import MAX_PAYLOAD_BYTES

from duetime.store.postgres.schema import connect as pg_connect

WORKER = {"type": "worker"}
PLAIN: list[dict[str, Any]] = [
    {"target": WORKER},
    {"target": WORKER, "queue": "emails", "payload": {"to": "a@example.com", "n": [1, 2.5]}},
    {
        "target": WORKER,
        "name": "welcome é",
        "queue": "q.1:x-y_z",
        "payload": "text",
        "idempotency_key": "k-1",
        "priority": -32768,
        "timeout_seconds": 0.001,
        "delay_seconds": 1.25,
        "concurrency_key": "user-1",
        "labels": {"team": "growth", "a/b.c-d_e": ""},
        "depends_on": [],
    },
    {
        "target": WORKER,
        "idempotency_key": "k-2",
        "priority": 32767,
        "timeout_seconds": 3600,
        "delay_seconds": 0,
        "payload": None,
    },
    {
        "target": WORKER,
        "name": None,
        "concurrency_key": None,
        "run_at": None,
        "retry": None,
        "payload_ref": None,
        "delay_seconds": None,
        "labels": {},
        "idempotency_key": "k-3",
    },
]
# Items the per-item checks take (or refuse) themselves.
NOT_PLAIN: list[dict[str, Any]] = [
    {"target": WORKER, "run_at": "2031-01-01T00:00:00Z"},
    {"target": WORKER, "retry": {"max_attempts": 2}},
    {"target": WORKER, "depends_on": ["01936b2e-0000-7000-8000-000000000000"]},
    {"target": WORKER, "payload_ref": "s3://bucket/key"},
    {"target": {"type": "http", "url": "https://example.com/"}},
    {"target": WORKER, "queue": ""},
    {"target": WORKER, "queue": None},
    {"target": WORKER, "name": ""},
    {"target": WORKER, "name": "tab\there"},
    {"target": WORKER, "priority": 1.0},
    {"target": WORKER, "priority": 40000},
    {"target": WORKER, "timeout_seconds": 0},
    {"target": WORKER, "delay_seconds": -1},
    {"target": WORKER, "labels": {"bad key": "x"}},
    {"target": WORKER, "labels": {"k": 1}},
    {"target": WORKER, "labels": None},
    {"target": WORKER, "payload": {"n": 12345678901234567890}},
    {"target": WORKER, "payload": "x" * (MAX_PAYLOAD_BYTES + 1)},
    {"target": WORKER, "unknown": 1},
    {"queue": "no-target"},
    [],
]


@pytest.fixture
async def owner(pg_url: str, tenant: str) -> AsyncIterator[asyncpg.Connection]:
    """A connection as the schema's owner, who may call the API's inner functions."""
    conn = await pg_connect(pg_url)
    try:
        yield conn
    finally:
        await conn.close()


async def test_a_plain_batch_is_built_as_the_per_item_checks_build_it(
    owner: asyncpg.Connection, tenant: str
) -> None:
    items = json.dumps(PLAIN)
    # One statement, so both builds read the same statement_timestamp() for delay_seconds.
    rows = await owner.fetch(
        """
        WITH built AS (
            SELECT duetime.sql_api_plain($1, $2, $3::jsonb) AS plain,
                   ARRAY(SELECT duetime.sql_api_spec('tasks.' || (s.ord - 1) || '.', $1, $2,
                                             (s.ord - 1)::integer, s.spec)
                         FROM jsonb_array_elements($3::jsonb) WITH ORDINALITY AS s (spec, ord)
                         ORDER BY s.ord) AS each
        )
        SELECT to_jsonb(b.plain[k]) - 'id' AS plain, to_jsonb(b.each[k]) - 'id' AS each,
               (b.plain[k]).id AS plain_id, (b.each[k]).id AS each_id
        FROM built AS b, generate_subscripts(b.plain, 1) AS k
        """,
        tenant,
        MAX_PAYLOAD_BYTES,
        items,
    )
    assert len(rows) == len(PLAIN)
    for row in rows:
        assert json.loads(row["plain"]) == json.loads(row["each"])
        assert row["plain_id"].version == row["each_id"].version == 7
    assert any(json.loads(row["plain"])["request_hash"] for row in rows)


@pytest.mark.parametrize("item", NOT_PLAIN, ids=[json.dumps(i)[:60] for i in NOT_PLAIN])
async def test_a_batch_with_any_other_item_goes_item_by_item(
    owner: asyncpg.Connection, tenant: str, item: Any
) -> None:
    items = json.dumps([*PLAIN[:2], item])
    assert await owner.fetchval("SELECT duetime.sql_api_plain($1, $2, $3::jsonb)", tenant,
                                MAX_PAYLOAD_BYTES, items) is None  # fmt: skip


async def test_a_repeated_idempotency_key_goes_item_by_item(
    owner: asyncpg.Connection, tenant: str
) -> None:
    items = [{"target": WORKER, "idempotency_key": "same"}] * 2
    assert await owner.fetchval("SELECT duetime.sql_api_plain($1, $2, $3::jsonb)", tenant,
                                MAX_PAYLOAD_BYTES, json.dumps(items)) is None  # fmt: skip


async def test_a_single_create_repeats_a_plain_batch_items_idempotency_key(
    producer: asyncpg.Connection,
) -> None:
    """The fingerprint of a task made in a plain batch is the one a single create computes."""
    item = {"target": WORKER, "queue": "q", "payload": {"a": 1}, "idempotency_key": "once",
            "priority": 3, "timeout_seconds": 12.5, "labels": {"t": "x"}}  # fmt: skip
    made = await producer.fetch("SELECT * FROM duetime.create_tasks_v1($1::jsonb)",
                                json.dumps([item, {"target": WORKER}]))  # fmt: skip
    again = await producer.fetchrow(
        "SELECT * FROM duetime.create_task_v1(queue => 'q', payload => '{\"a\": 1}', "
        "idempotency_key => 'once', priority => 3, timeout_seconds => 12.5, "
        'labels => \'{"t": "x"}\')'
    )
    assert again is not None
    assert (again["id"], again["created"]) == (made[0]["id"], False)
    with pytest.raises(asyncpg.UniqueViolationError):
        await producer.fetchrow(
            "SELECT * FROM duetime.create_task_v1(queue => 'q', idempotency_key => 'once')"
        )
