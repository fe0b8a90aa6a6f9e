"""The SQL API under a queue's keyed flow rules (docs/flow-control.md "Creates through the SQL
API"), as a node's create applies them: SQL evaluates a rule's key expression to the key an HTTP
create of the same task gets, or refuses a value it cannot write as the node does; uniqueness
windows (the queue's and a task's own), debounces and throttles keep one ledger with the node's
creates, across both paths, in a batch and under racing creators."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from typing import Any

import asyncpg
import httpx
import pytest
from sql_helpers import MAX_PAYLOAD_BYTES, Roles

from duetime.store.postgres.backend import PostgresStore
from duetime.store.postgres.schema import connect as pg_connect
from duetime.types import TaskFilter, TaskStatus

WORKER = {"type": "worker"}


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


async def create(
    sql: asyncpg.Connection, queue: str, payload: Any = None, **fields: Any
) -> asyncpg.Record:
    """``create_task_v1`` with ``fields`` as named arguments (JSON ones as jsonb; each name
    quoted, as ``"unique"``, a reserved word, must be)."""
    args = {"queue": queue, "payload": payload, **fields}
    cast = {"payload", "labels", "unique"}
    call = ", ".join(
        f'"{n}" => ${i + 1}' + ("::jsonb" if n in cast else "") for i, n in enumerate(args)
    )
    values = [json.dumps(v) if n in cast else v for n, v in args.items()]
    row = await sql.fetchrow(f"SELECT * FROM duetime.create_task_v1({call})", *values)
    assert row is not None
    return row


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


DEBOUNCE = {"key": "labels.user", "period": "PT1M", "max_wait": "PT10M"}


async def test_a_debounce_folds_a_burst_from_both_paths_into_one_run_with_the_last_payload(
    store: PostgresStore, api: tuple[httpx.AsyncClient, str], sql: asyncpg.Connection
) -> None:
    client, tenant = api
    await put_queue(client, "digest", debounce=DEBOUNCE)
    started = await client.post(
        "/v1/tasks",
        json={"target": WORKER, "queue": "digest", "labels": {"user": "u1"}, "payload": 0},
    )
    assert started.status_code == 201, started.text
    rows = [await create(sql, "digest", n, labels={"user": "u1"}) for n in range(1, 1000)]
    assert all(not r["created"] for r in rows)
    assert {str(r["id"]) for r in rows} == {started.json()["id"]}
    # The node's create reads the burst SQL kept going.
    last = await client.post(
        "/v1/tasks",
        json={"target": WORKER, "queue": "digest", "labels": {"user": "u1"}, "payload": 1000},
    )
    assert last.status_code == 200 and last.headers["Duetime-Debounce"] == "absorbed"
    (task,) = await store.task_list(TaskFilter(tenant_id=tenant))
    assert task.status == TaskStatus.SCHEDULED and json.loads(task.payload_json) == 1000
    assert task.absorbed == 1000
    # Never past max_wait from the burst's first create.
    assert task.run_at <= task.created_at + timedelta(minutes=10)


async def test_a_batch_folds_its_own_burst_and_counts_what_it_absorbed(
    store: PostgresStore, api: tuple[httpx.AsyncClient, str], sql: asyncpg.Connection
) -> None:
    client, tenant = api
    await put_queue(client, "digest", debounce=DEBOUNCE)
    items = [{"queue": "digest", "labels": {"user": u}, "payload": n}
             for n, u in enumerate(["a", "b", "a", "a", "b"])]  # fmt: skip
    rows = await batch(sql, items)
    assert [r["created"] for r in rows] == [True, True, False, False, False]
    assert rows[2]["id"] == rows[3]["id"] == rows[0]["id"] and rows[4]["id"] == rows[1]["id"]
    a = await store.task_get(tenant, str(rows[0]["id"]))
    b = await store.task_get(tenant, str(rows[1]["id"]))
    assert a is not None and b is not None
    assert (json.loads(a.payload_json), a.absorbed) == (3, 2)
    assert (json.loads(b.payload_json), b.absorbed) == (4, 1)
    assert a.status == TaskStatus.SCHEDULED and rows[3]["run_at"] == rows[0]["run_at"]
    # A later call absorbs into the stored task.
    later = await create(sql, "digest", 5, labels={"user": "a"})
    assert (later["id"], later["created"]) == (rows[0]["id"], False)
    a = await store.task_get(tenant, str(rows[0]["id"]))
    assert a is not None and (json.loads(a.payload_json), a.absorbed) == (5, 3)


async def test_a_throttle_spaces_the_creates_of_a_key_on_both_paths(
    api: tuple[httpx.AsyncClient, str], sql: asyncpg.Connection
) -> None:
    client, _ = api
    await put_queue(client, "spaced", throttle={"key": "labels.user", "rate": "1/s", "burst": 2})
    rows = [await create(sql, "spaced", n, labels={"user": "u"}) for n in range(3)]
    over_http = await client.post(
        "/v1/tasks", json={"target": WORKER, "queue": "spaced", "labels": {"user": "u"}}
    )
    assert over_http.status_code == 201, over_http.text
    assert over_http.headers["Duetime-Throttle"] == "delayed"
    # A burst of 2 at once, then one a second, whichever path the create took.
    assert [r["status"] for r in rows] == ["ready", "ready", "scheduled"]
    http_at = datetime.fromisoformat(over_http.json()["run_at"])
    assert http_at - rows[2]["run_at"] == timedelta(seconds=1)
    other = await create(sql, "spaced", 0, labels={"user": "v"})
    assert other["status"] == "ready"
    # In a batch, each item sees the earlier ones.
    spaced = await batch(sql, [{"queue": "spaced", "labels": {"user": "w"}}] * 4)
    assert [r["status"] for r in spaced] == ["ready", "ready", "scheduled", "scheduled"]
    assert spaced[3]["run_at"] - spaced[2]["run_at"] == timedelta(seconds=1)


async def test_a_keyed_rate_limit_takes_the_tasks_own_key_as_http_does(
    pg_url: str, api: tuple[httpx.AsyncClient, str], sql: asyncpg.Connection
) -> None:
    client, _ = api
    await put_queue(client, "keyed", key_limit={"key": "payload.customer", "rate": "10/s"})
    one = await create(sql, "keyed", {"customer": "other"}, concurrency_key="c-1")
    assert one["created"]
    rows = await batch(
        sql, [{"queue": "keyed", "concurrency_key": "c-2"}, {"queue": "other", "payload": 1}]
    )
    over_http = await client.post(
        "/v1/tasks", json={"target": WORKER, "queue": "keyed", "concurrency_key": "c-1"}
    )
    assert over_http.status_code == 201, over_http.text
    ids = [str(one["id"]), str(rows[0]["id"]), str(rows[1]["id"]), over_http.json()["id"]]
    assert await flow_keys(pg_url, ids) == ["c-1", "c-2", None, "c-1"]


LONG = "é" * 150  # 300 bytes of UTF-8: stored as its digest
KEYED_TASKS: list[tuple[Any, dict[str, Any]]] = [
    ("payload.customer", {"payload": {"customer": "c-1"}}),
    ("payload.customer", {"payload": {"customer": 42}}),
    ("payload.customer", {"payload": {"customer": -7}}),
    ("payload.customer", {"payload": {"customer": True}}),
    ("payload.customer", {"payload": {"customer": None}}),
    ("payload.customer", {"payload": {"customer": ""}}),
    ("payload.customer", {"payload": {"other": 1}}),
    ("payload.customer", {"payload": ["customer"]}),
    ("payload.customer", {"payload": "customer"}),
    ("payload.customer", {"payload": {"customer": LONG}}),
    ("payload.a.b", {"payload": {"a": {"b": "deep", "c": 1}}}),
    ("payload.a.b", {"payload": {"a": ["b"]}}),
    ("payload", {"payload": "whole"}),
    ("payload", {"payload": 12}),
    ("name", {"name": "sync-1"}),
    ("name", {}),
    ("labels.team", {"labels": {"team": "blue"}}),
    ("labels.team", {"labels": {"other": "x"}}),
    (
        ["payload.s", "payload.customer", "labels.team"],
        {"payload": {"s": 'q"uote\\ /\n\t\u0001\u007f é', "customer": 5}},
    ),
    (["name", "payload.flag"], {"payload": {"flag": False}}),
    (["name", "payload.flag"], {}),
    (["payload.customer", "payload.x"], {"payload": {"customer": LONG, "x": "y"}}),
]


@pytest.mark.parametrize(("expression", "task"), KEYED_TASKS)
async def test_sql_evaluates_a_key_expression_to_the_key_an_http_create_gets(
    pg_url: str,
    api: tuple[httpx.AsyncClient, str],
    sql: asyncpg.Connection,
    expression: Any,
    task: dict[str, Any],
) -> None:
    client, _ = api
    await put_queue(client, "keyed", key_limit={"key": expression, "rate": "10/s"})
    item = {"queue": "keyed", **task}
    over_http = await client.post("/v1/tasks", json={"target": WORKER, **item})
    assert over_http.status_code == 201, over_http.text
    rows = await batch(sql, [item])
    one = await create(
        sql, "keyed", task.get("payload"), name=task.get("name"), labels=task.get("labels", {})
    )
    http_key, *sql_keys = await flow_keys(
        pg_url, [over_http.json()["id"], str(rows[0]["id"]), str(one["id"])]
    )
    assert sql_keys == [http_key, http_key]


@pytest.mark.parametrize(
    ("payload", "kind"),
    [
        ({"customer": 1.5}, "a number with a fraction"),
        ({"customer": {"id": 1}}, "an object"),
        ({"customer": [1]}, "an array"),
    ],
)
async def test_a_key_value_sql_cannot_write_as_the_node_refuses_the_create(
    store: PostgresStore,
    api: tuple[httpx.AsyncClient, str],
    sql: asyncpg.Connection,
    payload: dict[str, Any],
    kind: str,
) -> None:
    client, tenant = api
    await put_queue(client, "keyed", key_limit={"key": "payload.customer", "max_concurrency": 1})
    with pytest.raises(asyncpg.InvalidParameterValueError) as caught:
        await batch(sql, [{"queue": "keyed", "payload": {"customer": "c"}},
                          {"queue": "keyed", "payload": payload}])  # fmt: skip
    assert caught.value.column_name == "tasks.1.payload"
    assert f"whose value here is {kind}" in str(caught.value)
    assert "create this task over HTTP" in str(caught.value)
    assert await store.task_list(TaskFilter(tenant_id=tenant)) == []
    # A task that gives its own concurrency key needs no expression.
    row = await create(sql, "keyed", payload, concurrency_key="own")
    assert row["created"]


async def test_per_key_concurrency_gives_the_evaluated_key_as_the_concurrency_key(
    store: PostgresStore, api: tuple[httpx.AsyncClient, str], sql: asyncpg.Connection
) -> None:
    client, tenant = api
    await put_queue(client, "per-key", key_limit={"key": "payload.customer", "max_concurrency": 1})
    rows = await batch(sql, [{"queue": "per-key", "payload": {"customer": "c-9"}}])
    over_http = await client.post(
        "/v1/tasks", json={"target": WORKER, "queue": "per-key", "payload": {"customer": "c-9"}}
    )
    by_sql = await store.task_get(tenant, str(rows[0]["id"]))
    by_http = await store.task_get(tenant, over_http.json()["id"])
    assert by_sql is not None and by_http is not None
    assert by_sql.concurrency_key == by_http.concurrency_key == "c-9"


UNIQUE = {"key": "payload.order", "period": "PT1H"}


async def test_a_uniqueness_window_answers_with_its_task_on_both_paths(
    store: PostgresStore, api: tuple[httpx.AsyncClient, str], sql: asyncpg.Connection
) -> None:
    client, tenant = api
    await put_queue(client, "once", unique=UNIQUE)
    first = await create(sql, "once", {"order": 7})
    assert first["created"] and first["status"] == "ready"
    again = await create(sql, "once", {"order": 7, "note": "other fields"})
    assert (again["id"], again["created"], again["status"]) == (first["id"], False, "ready")
    # The node's create reads the same ledger: answered with the SQL-made task.
    over_http = await client.post(
        "/v1/tasks", json={"target": WORKER, "queue": "once", "payload": {"order": 7}}
    )
    assert over_http.status_code == 200, over_http.text
    assert over_http.headers["Duetime-Unique"] == "existing"
    assert over_http.json()["id"] == str(first["id"])
    # And the other way round: a window taken over HTTP answers a SQL create.
    taken = await client.post(
        "/v1/tasks", json={"target": WORKER, "queue": "once", "payload": {"order": 8}}
    )
    assert taken.status_code == 201, taken.text
    answered = await create(sql, "once", {"order": 8})
    assert (str(answered["id"]), answered["created"]) == (taken.json()["id"], False)
    # A batch: a later item with an earlier one's key is that task; another key is made; a
    # task without the key is made outside any window.
    rows = await batch(
        sql,
        [{"queue": "once", "payload": {"order": 9}}, {"queue": "once", "payload": {"order": 9}},
         {"queue": "once", "payload": {"order": 7}}, {"queue": "once", "payload": {"x": 1}}],
    )  # fmt: skip
    assert [r["created"] for r in rows] == [True, False, False, True]
    assert rows[1]["id"] == rows[0]["id"] and rows[1]["status"] == "ready"
    assert rows[2]["id"] == first["id"]
    made = await store.task_list(TaskFilter(tenant_id=tenant))
    assert len(made) == 4
    # A cancelled task frees its key (the default states): the next create makes a task.
    cancelled = await sql.fetchval("SELECT duetime.cancel_task_v1($1)", str(first["id"]))
    assert cancelled is not None
    fresh = await create(sql, "once", {"order": 7})
    assert fresh["created"] and fresh["id"] != first["id"]


async def test_a_window_is_taken_only_if_the_callers_transaction_commits(
    api: tuple[httpx.AsyncClient, str], sql: asyncpg.Connection
) -> None:
    client, _ = api
    await put_queue(client, "once", unique=UNIQUE)
    tx = sql.transaction()
    await tx.start()
    rolled_back = await create(sql, "once", {"order": 1})
    await tx.rollback()
    made = await create(sql, "once", {"order": 1})
    assert made["created"] and made["id"] != rolled_back["id"]


async def test_a_repeated_idempotency_key_is_answered_before_the_window(
    api: tuple[httpx.AsyncClient, str], sql: asyncpg.Connection
) -> None:
    client, _ = api
    await put_queue(client, "once", unique=UNIQUE)
    keyed = await create(sql, "once", {"order": 1}, idempotency_key="k-1")
    windowed = await create(sql, "once", {"order": 2})
    # The same idempotency key with another order: its own task, whatever window order 2 holds.
    repeat = await create(sql, "once", {"order": 1}, idempotency_key="k-1")
    assert (repeat["id"], repeat["created"]) == (keyed["id"], False)
    assert windowed["id"] != keyed["id"]


async def test_a_window_whose_task_left_the_hot_store_answers_its_id_or_refuses_a_batch(
    pg_url: str, api: tuple[httpx.AsyncClient, str], sql: asyncpg.Connection
) -> None:
    client, _ = api
    await put_queue(client, "once", unique=UNIQUE)
    first = await create(sql, "once", {"order": 3})
    admin = await pg_connect(pg_url)
    try:  # retention's delete of a finished task, in short
        await admin.execute("DELETE FROM tasks WHERE id = $1", first["id"])
    finally:
        await admin.close()
    retired = await create(sql, "once", {"order": 3})
    assert tuple(retired) == (first["id"], False, None, None)
    with pytest.raises(asyncpg.UniqueViolationError) as caught:
        await batch(sql, [{"queue": "once", "payload": {"order": 4}},
                          {"queue": "once", "payload": {"order": 3}}])  # fmt: skip
    assert caught.value.column_name == "tasks.1.queue"
    assert f"held by task {first['id']}" in str(caught.value)


async def test_racing_creators_of_one_key_on_both_paths_make_one_task(
    store: PostgresStore,
    api: tuple[httpx.AsyncClient, str],
    sql: asyncpg.Connection,
    roles: Roles,
) -> None:
    client, tenant = api
    await put_queue(client, "once", unique=UNIQUE)
    role = await roles.make()
    await store.sql_grant(tenant, role, max_payload_bytes=MAX_PAYLOAD_BYTES)
    conns = [await roles.connect(role) for _ in range(25)]
    try:
        start = asyncio.Event()

        async def by_sql(conn: asyncpg.Connection) -> tuple[str, bool]:
            await start.wait()
            row = await create(conn, "once", {"order": 99})
            return str(row["id"]), bool(row["created"])

        async def by_http() -> tuple[str, bool]:
            await start.wait()
            resp = await client.post(
                "/v1/tasks", json={"target": WORKER, "queue": "once", "payload": {"order": 99}}
            )
            assert resp.status_code in (200, 201), resp.text
            return resp.json()["id"], resp.status_code == 201

        racing = [asyncio.create_task(by_sql(c)) for c in conns]
        racing += [asyncio.create_task(by_http()) for _ in range(25)]
        await asyncio.sleep(0.05)
        start.set()
        answers = await asyncio.gather(*racing)
    finally:
        for conn in conns:
            await conn.close()
    assert len({task_id for task_id, _ in answers}) == 1
    assert sum(created for _, created in answers) == 1
    assert len(await store.task_list(TaskFilter(tenant_id=tenant))) == 1


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


async def test_a_producer_names_each_tasks_window_key_in_a_label(
    api: tuple[httpx.AsyncClient, str], sql: asyncpg.Connection
) -> None:
    client, _ = api
    await put_queue(client, "deduped", unique={"key": "labels.dedupe", "period": "PT1H"})
    first = await create(sql, "deduped", {"n": 1}, labels={"dedupe": "order-42"})
    again = await create(sql, "deduped", {"n": 2}, labels={"dedupe": "order-42"})
    other = await create(sql, "deduped", {"n": 3}, labels={"dedupe": "order-43"})
    unlabelled = [await create(sql, "deduped", {"n": 4}, labels={}) for _ in range(2)]
    assert first["created"] and (again["id"], again["created"]) == (first["id"], False)
    assert other["created"] and other["id"] != first["id"]
    assert all(row["created"] for row in unlabelled)


async def test_a_tasks_own_window_answers_on_both_paths_and_replaces_its_queues(
    api: tuple[httpx.AsyncClient, str], sql: asyncpg.Connection
) -> None:
    client, _ = api
    first = await create(sql, "own", unique={"key": "report-2030-01", "period": "P1D"})
    again = await create(sql, "own", 1, unique={"key": "report-2030-01", "period": "P1D"})
    assert first["created"] and (again["id"], again["created"]) == (first["id"], False)
    over_http = await client.post(
        "/v1/tasks",
        json={"target": WORKER, "queue": "own", "unique": {"key": "report-2030-01",
                                                            "period": "P1D"}},
    )  # fmt: skip
    assert over_http.status_code == 200 and over_http.json()["id"] == str(first["id"])
    # key_from evaluates on the task; in a batch, an item's own window as over HTTP.
    by_name = await create(sql, "own", name="n-1", unique={"key_from": "name", "period": "PT1M"})
    rows = await batch(
        sql,
        [{"queue": "own", "name": "n-1", "unique": {"key_from": "name", "period": "PT1M"}},
         {"queue": "own", "name": "n-2", "unique": {"key_from": ["name"], "period": "PT1M",
                                                     "states": ["ready"]}}],
    )  # fmt: skip
    assert [r["created"] for r in rows] == [False, True] and rows[0]["id"] == by_name["id"]
    # A task's own window replaces its queue's; one without a value leaves the queue's.
    await put_queue(client, "windowed", unique={"key": "payload.order", "period": "PT1H"})
    queued = await create(sql, "windowed", {"order": 1}, unique={"key": "mine", "period": "PT1H"})
    other = await create(sql, "windowed", {"order": 1})
    assert other["created"] and other["id"] != queued["id"]
    fallback = await create(
        sql, "windowed", {"order": 1}, unique={"key_from": "labels.none", "period": "PT1H"}
    )
    assert (fallback["id"], fallback["created"]) == (other["id"], False)


# A task's own windows the API refuses; True where its words are duetime's rules' (the others are
# the model's words for a JSON type, length or missing field: the field is the same).
BAD_OWN: list[tuple[Any, bool]] = [
    ("x", False),
    ({"period": "PT1M"}, True),
    ({"key": "x", "key_from": "name", "period": "PT1M"}, True),
    ({"key": "", "period": "PT1M"}, False),
    ({"key": 5, "period": "PT1M"}, False),
    ({"key": "x"}, False),
    ({"key": "x", "period": "1h"}, True),
    ({"key": "x", "period": "PT"}, True),
    ({"key": "x", "period": "P1DT"}, True),
    ({"key": "x", "period": "P367D"}, True),
    ({"key": "x", "period": "PT0.0001S"}, True),
    ({"key": "x", "period": "PT1M", "states": []}, False),
    ({"key": "x", "period": "PT1M", "states": ["ready", "done"]}, True),
    ({"key": "x", "period": "PT1M", "states": "ready"}, False),
    ({"key": "x", "period": "PT1M", "other": 1}, False),
    ({"key_from": [], "period": "PT1M"}, True),
    ({"key_from": ["name", 1], "period": "PT1M"}, True),
    ({"key_from": "labels.-x", "period": "PT1M"}, True),
    ({"key_from": "payload.12", "period": "PT1M"}, True),
    ({"key_from": ["name", "payload.a..b"], "period": "PT1M"}, True),
    ({"key_from": "queue", "period": "PT1M"}, True),
    ({"key_from": ["name", "name", "name", "name", "name"], "period": "PT1M"}, True),
]


@pytest.mark.parametrize(
    ("unique", "same_words"), BAD_OWN, ids=[json.dumps(u)[:50] for u, _ in BAD_OWN]
)
async def test_a_tasks_own_window_is_refused_as_over_http(
    store: PostgresStore,
    api: tuple[httpx.AsyncClient, str],
    sql: asyncpg.Connection,
    unique: Any,
    same_words: bool,
) -> None:
    client, tenant = api
    over_http = await client.post(
        "/v1/tasks/batch",
        json={"tasks": [{"target": WORKER}, {"target": WORKER, "unique": unique}]},
    )
    assert over_http.status_code == 422, over_http.text
    problem = over_http.json()
    with pytest.raises(asyncpg.InvalidParameterValueError) as caught:
        await batch(sql, [{}, {"unique": unique}])
    assert caught.value.column_name == problem["field"]
    first = problem["errors"][0]
    if same_words:
        assert str(caught.value) == f"{first['field']}: {first['detail']}"
    single = problem["field"].removeprefix("tasks.1.")
    with pytest.raises(asyncpg.InvalidParameterValueError) as caught:
        await create(sql, "own", unique=unique)
    assert caught.value.column_name == single
    assert await store.task_list(TaskFilter(tenant_id=tenant)) == []
