"""The SQL API under a queue's keyed flow rules (docs/flow-control.md "Creates through the SQL
API"): a keyed limit takes the task's own concurrency key as its key, exactly as an HTTP create of
the same task; a rule only a node can apply (a key expression to evaluate, a uniqueness window, a
debounce, a throttle) refuses the create, naming the field, and creates nothing."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import httpx
import pytest
from sql_helpers import MAX_PAYLOAD_BYTES, Roles

from duetime.store.postgres.backend import PostgresStore
from duetime.store.postgres.schema import connect as pg_connect
from duetime.types import TaskFilter

WORKER = {"type": "worker"}
RULES: dict[str, dict[str, Any]] = {
    "unique": {"key": "payload.order", "period": "PT1H"},
    "debounce": {"key": "labels.user", "period": "PT5S", "max_wait": "PT1M"},
    "throttle": {"key": "name", "rate": "2/s"},
}


@pytest.fixture
async def sql(
    store: PostgresStore, api: tuple[httpx.AsyncClient, str], roles: Roles
) -> AsyncIterator[asyncpg.Connection]:
    """A producer of the API client's tenant."""
    role = await roles.make()
    await store.sql_grant(api[1], role, max_payload_bytes=MAX_PAYLOAD_BYTES)
    conn = await roles.connect(role)
    try:
        yield conn
    finally:
        await conn.close()


async def put_queue(client: httpx.AsyncClient, name: str, **rules: object) -> None:
    resp = await client.put(f"/v1/queues/{name}", json=rules)
    assert resp.status_code == 200, resp.text


async def batch(sql: asyncpg.Connection, items: list[dict[str, Any]]) -> list[asyncpg.Record]:
    items = [{"target": WORKER, **item} for item in items]
    return list(
        await sql.fetch("SELECT * FROM duetime.create_tasks_v1($1::jsonb)", json.dumps(items))
    )


async def flow_keys(pg_url: str, ids: list[str]) -> list[str | None]:
    conn = await pg_connect(pg_url)
    try:
        rows = await conn.fetch(
            "SELECT id::text, flow_key FROM tasks WHERE id = ANY($1::uuid[])", ids
        )
    finally:
        await conn.close()
    found = {r["id"]: r["flow_key"] for r in rows}
    return [found[i] for i in ids]


@pytest.mark.parametrize("rule", sorted(RULES))
async def test_a_rule_only_a_node_applies_refuses_the_create(
    store: PostgresStore,
    api: tuple[httpx.AsyncClient, str],
    sql: asyncpg.Connection,
    rule: str,
) -> None:
    client, tenant = api
    await put_queue(client, "ruled", **{rule: RULES[rule]})
    with pytest.raises(asyncpg.InvalidParameterValueError) as caught:
        await sql.fetchrow("SELECT * FROM duetime.create_task_v1(queue => 'ruled')")
    assert caught.value.column_name == "queue"
    assert str(caught.value).startswith("queue: queue 'ruled' has a ")
    assert "create its tasks over HTTP" in str(caught.value)
    # In a batch the item is named, and its neighbours in other queues are not made either.
    with pytest.raises(asyncpg.InvalidParameterValueError) as caught:
        await batch(sql, [{"queue": "plain"}, {"queue": "plain"}, {"queue": "ruled"}])
    assert caught.value.column_name == "tasks.2.queue"
    assert await store.task_list(TaskFilter(tenant_id=tenant)) == []
    # The same task over HTTP is made under the rule.
    made = await client.post(
        "/v1/tasks",
        json={
            "target": WORKER,
            "queue": "ruled",
            "name": "n",
            "payload": {"order": 1},
            "labels": {"user": "u"},
        },
    )
    assert made.status_code == 201, made.text


async def test_a_keyed_rate_limit_takes_the_tasks_own_key_as_http_does(
    pg_url: str, api: tuple[httpx.AsyncClient, str], sql: asyncpg.Connection
) -> None:
    client, _ = api
    await put_queue(client, "keyed", key_limit={"key": "payload.customer", "rate": "10/s"})
    one = await sql.fetchrow(
        "SELECT * FROM duetime.create_task_v1(queue => 'keyed', concurrency_key => 'c-1')"
    )
    assert one is not None and one["created"]
    rows = await batch(
        sql, [{"queue": "keyed", "concurrency_key": "c-2"}, {"queue": "other", "payload": 1}]
    )
    over_http = await client.post(
        "/v1/tasks", json={"target": WORKER, "queue": "keyed", "concurrency_key": "c-1"}
    )
    assert over_http.status_code == 201, over_http.text
    ids = [str(one["id"]), str(rows[0]["id"]), str(rows[1]["id"]), over_http.json()["id"]]
    assert await flow_keys(pg_url, ids) == ["c-1", "c-2", None, "c-1"]
    # Without a concurrency key the key is an expression on the payload, which SQL leaves to
    # the node: refused, naming the field that would make it creatable here.
    with pytest.raises(asyncpg.InvalidParameterValueError) as caught:
        await batch(sql, [{"queue": "keyed", "concurrency_key": "c-3"},
                          {"queue": "keyed", "payload": {"customer": "c-4"}}])  # fmt: skip
    assert caught.value.column_name == "tasks.1.concurrency_key"
    assert "payload.customer" in str(caught.value)


async def test_a_key_of_the_concurrency_key_itself_needs_no_node(
    pg_url: str, api: tuple[httpx.AsyncClient, str], sql: asyncpg.Connection
) -> None:
    client, _ = api
    await put_queue(
        client, "by-key", key_limit={"key": "concurrency_key", "rate": "5/s", "max_concurrency": 2}
    )
    rows = await batch(sql, [{"queue": "by-key"}, {"queue": "by-key", "concurrency_key": "k"}])
    over_http = await client.post("/v1/tasks", json={"target": WORKER, "queue": "by-key"})
    assert over_http.status_code == 201, over_http.text
    ids = [str(rows[0]["id"]), str(rows[1]["id"]), over_http.json()["id"]]
    assert await flow_keys(pg_url, ids) == ["", "k", ""]
