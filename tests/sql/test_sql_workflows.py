"""Workflows through the SQL API: ``create_workflow_v1`` records the body of ``POST
/v1/workflows`` in the caller's transaction, and a node's intake (``duetime.api.sql_intake``)
makes it after the commit, under the returned id, with the route's rules — or records the
problem the route would have answered. Rounds of the intake are run here one at a time."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import httpx
import orjson
import pytest
from fastapi import FastAPI
from sql_helpers import MAX_PAYLOAD_BYTES, Roles

from duetime.api.routes.workflows import make_workflow
from duetime.api.sql_intake import WorkflowIntake
from duetime.api.workflow_schemas import WorkflowCreate
from duetime.clock import SystemClock
from duetime.errors import StoreUnavailable
from duetime.store.postgres.backend import PostgresStore
from duetime.store.postgres.schema import connect as pg_connect

WORKER = {"type": "worker"}
CHAIN = {
    "name": "nightly",
    "defaults": {"target": WORKER, "queue": "etl"},
    "nodes": [
        {"ref": "extract", "payload": {"day": 1}},
        {"ref": "transform", "depends_on": ["extract"]},
        {"ref": "load", "depends_on": ["transform"]},
    ],
}
REFUSED = [
    # a cycle, a dangling ref, a ref used twice, a node without a target, a default no node may
    # take, an unknown field, and one the route's body model refuses outright
    {
        "defaults": {"target": WORKER},
        "nodes": [
            {"ref": "a"},
            {"ref": "b", "depends_on": ["c"]},
            {"ref": "c", "depends_on": ["b"]},
        ],
    },
    {"defaults": {"target": WORKER}, "nodes": [{"ref": "a", "depends_on": ["zz"]}]},
    {"defaults": {"target": WORKER}, "nodes": [{"ref": "a"}, {"ref": "a"}]},
    {"nodes": [{"ref": "a"}, {"ref": "b", "target": {"type": "http"}}]},
    {"defaults": {"ref": "x"}, "nodes": [{"ref": "a", "target": WORKER}]},
    {"nodes": [{"ref": "a", "target": WORKER, "colour": "red"}]},
    {"nodes": []},
]


def _intake(node: FastAPI, store: PostgresStore, **kwargs: Any) -> WorkflowIntake:
    return WorkflowIntake(store, node.state.services.creator, SystemClock(), **kwargs)


async def _request(conn: asyncpg.Connection, body: dict[str, Any]) -> asyncpg.Record:
    found = await conn.fetchrow(
        "SELECT * FROM duetime.create_workflow_v1($1::jsonb)", orjson.dumps(body).decode()
    )
    assert found is not None
    return found


async def _state(conn: asyncpg.Connection, request_id: Any) -> asyncpg.Record:
    found = await conn.fetchrow("SELECT * FROM duetime.workflow_request_v1($1)", request_id)
    assert found is not None
    return found


@pytest.fixture
async def granted(store: PostgresStore, roles: Roles, api: tuple[httpx.AsyncClient, str]) -> Any:
    """A producer's connection granted the tenant of the API client."""
    client, tenant = api
    role = await roles.make()
    await store.sql_grant(tenant, role, max_payload_bytes=MAX_PAYLOAD_BYTES)
    conn = await roles.connect(role)
    try:
        yield conn, role, client, tenant
    finally:
        await conn.close()


async def test_a_committed_request_becomes_the_workflow_under_its_id(
    store: PostgresStore, node: FastAPI, granted: Any
) -> None:
    conn, role, client, _tenant = granted
    intake = _intake(node, store)
    async with conn.transaction():
        made = await _request(conn, CHAIN)
        assert made["created"] is True
        assert await intake.run_once() == 0  # not visible before the commit
    assert await store.requests_signal.wait(10.0)  # the commit's NOTIFY woke the node
    assert (await _state(conn, made["id"]))["state"] == "pending"
    assert await intake.run_once() == 1
    state = await _state(conn, made["id"])
    assert state["state"] == "made" and state["workflow_id"] == made["id"]
    assert state["problem"] is None and state["ended_at"] is not None
    resp = await client.get(f"/v1/workflows/{made['id']}")
    assert resp.status_code == 200, resp.text
    workflow = resp.json()
    assert workflow["name"] == "nightly"
    nodes = {n["ref"]: n for n in workflow["nodes"]}
    assert nodes["transform"]["depends_on"] == ["extract"]
    assert nodes["load"]["depends_on"] == ["transform"]
    assert {n["status"] for n in nodes.values()} == {"ready", "blocked"}
    first = (await client.get(f"/v1/tasks/{nodes['extract']['task_id']}")).json()
    assert first["queue"] == "etl" and first["payload"] == {"day": 1}
    history = await client.get(f"/v1/history?task_id={nodes['extract']['task_id']}")
    assert history.status_code == 200, history.text
    created = [e for e in history.json()["items"] if e["from_status"] is None]
    assert created and created[0]["actor"] == f"sql:{role}"
    assert await intake.run_once() == 0  # made once


async def test_a_rolled_back_request_leaves_nothing(
    store: PostgresStore, node: FastAPI, granted: Any
) -> None:
    conn, _, client, _tenant = granted
    tx = conn.transaction()
    await tx.start()
    made = await _request(conn, CHAIN)
    await tx.rollback()
    assert await _intake(node, store).run_once() == 0
    with pytest.raises(asyncpg.NoDataFoundError):
        await _state(conn, made["id"])
    assert (await client.get("/v1/workflows")).json()["items"] == []
    assert (await client.get("/v1/tasks")).json()["items"] == []


async def test_a_refused_request_records_the_problem_the_route_answers(
    store: PostgresStore, node: FastAPI, granted: Any
) -> None:
    conn, _, client, _tenant = granted
    intake = _intake(node, store)
    for body in REFUSED:
        made = await _request(conn, body)
        assert await intake.run_once() == 1
        state = await _state(conn, made["id"])
        answered = await client.post("/v1/workflows", json=body)
        assert answered.status_code == 422, answered.text
        assert state["state"] == "refused" and state["workflow_id"] is None
        assert orjson.loads(state["problem"]) == answered.json(), body
    assert (await client.get("/v1/workflows")).json()["items"] == []
    assert (await client.get("/v1/tasks")).json()["items"] == []


async def test_an_idempotency_key_answers_the_request_and_then_the_workflow(
    store: PostgresStore, node: FastAPI, granted: Any
) -> None:
    conn, _, client, _ = granted
    body = {**CHAIN, "idempotency_key": "nightly-1"}
    first = await _request(conn, body)
    again = await _request(conn, body)  # no node has made it yet: the request answers
    assert (again["id"], again["created"]) == (first["id"], False)
    with pytest.raises(asyncpg.UniqueViolationError) as refused:
        await _request(conn, {**body, "name": "another"})
    assert refused.value.column_name == "idempotency_key"
    assert await _intake(node, store).run_once() == 1
    after = await _request(conn, body)  # made: the workflow answers
    assert (after["id"], after["created"]) == (first["id"], False)
    over_http = await client.post("/v1/workflows", json=body)
    assert over_http.status_code == 200, over_http.text  # across paths: the existing workflow
    assert over_http.json()["id"] == str(first["id"])
    assert len((await client.get("/v1/workflows")).json()["items"]) == 1


async def test_a_key_a_refused_request_held_is_free_again(
    store: PostgresStore, node: FastAPI, granted: Any
) -> None:
    conn, _, client, _ = granted
    broken = {"idempotency_key": "k", "nodes": [{"ref": "a", "depends_on": ["zz"]}]}
    first = await _request(conn, {**broken, "defaults": {"target": WORKER}})
    intake = _intake(node, store)
    await intake.run_once()
    assert (await _state(conn, first["id"]))["state"] == "refused"
    fixed = await _request(conn, {**CHAIN, "idempotency_key": "k"})
    assert fixed["created"] is True and fixed["id"] != first["id"]
    await intake.run_once()
    assert (await client.get(f"/v1/workflows/{fixed['id']}")).status_code == 200


async def test_a_node_stopping_after_it_made_the_workflow_makes_no_second(
    store: PostgresStore, node: FastAPI, granted: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    conn, _, client, _tenant = granted
    made = await _request(conn, CHAIN)
    intake = _intake(node, store, hold_seconds=0.0)  # taken again at once
    record = store.sql_workflow_requests_end

    async def lost(*args: Any, **kwargs: Any) -> bool:
        raise StoreUnavailable("the node went away before it recorded the request")

    monkeypatch.setattr(store, "sql_workflow_requests_end", lost)
    with pytest.raises(StoreUnavailable):
        await intake.run_once()
    assert (await _state(conn, made["id"]))["state"] == "pending"
    monkeypatch.setattr(store, "sql_workflow_requests_end", record)
    await asyncio.sleep(0.01)
    assert await intake.run_once() == 1
    state = await _state(conn, made["id"])
    assert state["state"] == "made" and state["workflow_id"] == made["id"]
    assert len((await client.get("/v1/tasks")).json()["items"]) == 3
    assert len((await client.get("/v1/workflows")).json()["items"]) == 1


async def test_requests_are_the_tenants_own_and_bounded(
    store: PostgresStore, node: FastAPI, granted: Any, roles: Roles, pg_url: str
) -> None:
    conn, _, _, tenant = granted
    made = await _request(conn, CHAIN)
    other_tenant = (await store.tenant_create("other")).id
    other_role = await roles.make()
    await store.sql_grant(other_tenant, other_role, max_payload_bytes=MAX_PAYLOAD_BYTES)
    other = await roles.connect(other_role)
    try:
        with pytest.raises(asyncpg.NoDataFoundError):
            await _state(other, made["id"])
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await other.fetch("SELECT * FROM duetime.sql_workflow_requests")
    finally:
        await other.close()
    with pytest.raises(asyncpg.InvalidParameterValueError) as not_object:
        await conn.fetchrow("SELECT * FROM duetime.create_workflow_v1('[1]'::jsonb)")
    assert not_object.value.column_name == "body"
    owner = await pg_connect(pg_url)
    try:  # 999 more requests no node has taken: the tenant's 1,001st is refused
        await owner.execute(
            "INSERT INTO sql_workflow_requests (id, tenant_id, role_name, body, fingerprint, "
            "requested_at) SELECT gen_random_uuid(), $1, 'r', '{}', 'sql:x', now() "
            "FROM generate_series(1, 999)",
            tenant,
        )
    finally:
        await owner.close()
    with pytest.raises(asyncpg.PostgresError) as full:
        await _request(conn, CHAIN)
    assert full.value.sqlstate == "DT429"
    assert full.value.constraint_name == "pending_workflow_requests"


async def test_ended_requests_are_swept_after_a_day(
    store: PostgresStore, node: FastAPI, granted: Any, pg_url: str
) -> None:
    conn, _, _, _ = granted
    made = await _request(conn, CHAIN)
    await _intake(node, store).run_once()
    assert await store.sql_workflow_requests_sweep(86_400.0, 100) == 0
    owner = await pg_connect(pg_url)
    try:
        await owner.execute(
            "UPDATE sql_workflow_requests SET ended_at = now() - interval '25 hours' WHERE id = $1",
            made["id"],
        )
    finally:
        await owner.close()
    assert await store.sql_workflow_requests_sweep(86_400.0, 100) == 1
    with pytest.raises(asyncpg.NoDataFoundError):
        await _state(conn, made["id"])


async def test_concurrent_callers_of_one_key_get_one_request(
    store: PostgresStore, node: FastAPI, granted: Any, roles: Roles
) -> None:
    conn, _, client, tenant = granted
    role = await roles.make()
    await store.sql_grant(tenant, role, max_payload_bytes=MAX_PAYLOAD_BYTES)
    second = await roles.connect(role)
    body = {**CHAIN, "idempotency_key": "race"}
    try:
        tx = conn.transaction()
        await tx.start()
        first = await _request(conn, body)
        racing = asyncio.ensure_future(_request(second, body))
        await asyncio.sleep(0.2)
        assert not racing.done()  # waits on the first caller's key
        await tx.commit()
        raced = await asyncio.wait_for(racing, 10)
    finally:
        await second.close()
    assert first["created"] and (raced["id"], raced["created"]) == (first["id"], False)
    assert await _intake(node, store).run_once() == 1
    assert len((await client.get("/v1/workflows")).json()["items"]) == 1


async def test_a_node_losing_the_race_to_another_records_the_other_ones_workflow(
    store: PostgresStore, node: FastAPI, granted: Any
) -> None:
    conn, _, client, _ = granted
    made = await _request(conn, CHAIN)
    body = WorkflowCreate.model_validate(CHAIN)
    # Another node (whose hold ran out while it worked) made the workflow under the request's
    # id and has not recorded it yet; this node takes the request as if never taken.
    other, _ = await make_workflow(
        node.state.services.creator, store, granted[3], body, workflow_id=str(made["id"])
    )
    assert await _intake(node, store).run_once() == 1
    state = await _state(conn, made["id"])
    assert state["state"] == "made" and state["workflow_id"] == made["id"]
    assert len((await client.get("/v1/tasks")).json()["items"]) == len(other.nodes) == 3


async def test_a_refusal_is_the_tenants_notification_event_when_it_asked(
    store: PostgresStore, node: FastAPI, granted: Any, pg_url: str
) -> None:
    conn, _, client, _ = granted
    asked = await client.put(
        "/v1/tenant/notifications",
        json={
            "events": ["workflow.request_refused"],
            "target": {"type": "http", "url": "http://127.0.0.1:9/notify"},
        },
    )
    assert asked.status_code == 200, asked.text
    await _request(conn, CHAIN)
    refused = await _request(conn, REFUSED[1])
    assert await _intake(node, store).run_once() == 2
    owner = await pg_connect(pg_url)
    try:  # the refusal's event only, written with the refusal
        (row,) = await owner.fetch("SELECT type, item::text AS item FROM notification_events")
    finally:
        await owner.close()
    item = orjson.loads(row["item"])
    assert row["type"] == "workflow.request_refused"
    assert item["request_id"] == str(refused["id"])
    assert item["status"] == 422 and item["field"] == "nodes.0.depends_on"
