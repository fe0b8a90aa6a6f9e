"""``PUT /v1/schedules/by-key/{key}``: declarative schedules over both stores — created once,
changed to match, unchanged without a revision, and exactly one under concurrent declarations."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from api_helpers import TenantKey, assert_problem, make_tenant

WORKER = {"type": "worker"}


def declaration(**fields: Any) -> dict[str, Any]:
    fields.setdefault("cron", "0 2 * * *")
    fields.setdefault("timezone", "America/New_York")
    fields.setdefault("task", {"target": WORKER, "name": "send-report"})
    return fields


async def revisions(api: httpx.AsyncClient, schedule_id: str) -> list[dict[str, Any]]:
    resp = await api.get(f"/v1/schedules/{schedule_id}/revisions")
    assert resp.status_code == 200, resp.text
    return list(resp.json()["items"])


async def test_declare_creates_then_leaves_unchanged_then_changes(api: httpx.AsyncClient) -> None:
    made = await api.put("/v1/schedules/by-key/nightly-report", json=declaration())
    assert made.status_code == 201, made.text
    schedule = made.json()
    assert schedule["key"] == "nightly-report" and schedule["cron"] == "0 2 * * *"

    same = await api.put("/v1/schedules/by-key/nightly-report", json=declaration())
    assert same.status_code == 200, same.text
    assert same.json()["id"] == schedule["id"] and same.json()["version"] == schedule["version"]
    assert len(await revisions(api, schedule["id"])) == 1  # the create only

    moved = await api.put("/v1/schedules/by-key/nightly-report", json=declaration(cron="0 3 * * *"))
    assert moved.status_code == 200, moved.text
    assert moved.json()["id"] == schedule["id"] and moved.json()["cron"] == "0 3 * * *"
    assert moved.json()["version"] == schedule["version"] + 1
    latest = (await revisions(api, schedule["id"]))[0]
    assert latest["before"]["cron"] == "0 2 * * *" and latest["after"]["cron"] == "0 3 * * *"

    listed = (await api.get("/v1/schedules")).json()["items"]
    assert [s["id"] for s in listed] == [schedule["id"]]
    assert (await api.get(f"/v1/schedules/{schedule['id']}")).json()["key"] == "nightly-report"


async def test_declare_keeps_a_pause_and_a_deleted_key_is_declared_afresh(
    api: httpx.AsyncClient,
) -> None:
    first = (await api.put("/v1/schedules/by-key/k", json=declaration())).json()
    assert (await api.post(f"/v1/schedules/{first['id']}/pause", json={})).status_code == 200
    again = await api.put("/v1/schedules/by-key/k", json=declaration())
    assert again.status_code == 200 and again.json()["paused"] is True
    assert (await api.delete(f"/v1/schedules/{first['id']}")).status_code == 200
    fresh = await api.put("/v1/schedules/by-key/k", json=declaration())
    assert fresh.status_code == 201 and fresh.json()["id"] != first["id"]


async def test_keys_are_per_tenant(client: httpx.AsyncClient, tenant: TenantKey) -> None:
    other = await make_tenant(client, "other")
    a = await client.put("/v1/schedules/by-key/k", json=declaration(), headers=tenant.headers)
    b = await client.put("/v1/schedules/by-key/k", json=declaration(), headers=other.headers)
    assert a.status_code == b.status_code == 201
    assert a.json()["id"] != b.json()["id"]


async def test_concurrent_declarations_make_exactly_one(api: httpx.AsyncClient) -> None:
    answers = await asyncio.gather(
        *(api.put("/v1/schedules/by-key/race", json=declaration()) for _ in range(8))
    )
    statuses = sorted(a.status_code for a in answers)
    assert statuses == [200] * 7 + [201], [a.text for a in answers]
    assert len({a.json()["id"] for a in answers}) == 1
    listed = (await api.get("/v1/schedules")).json()["items"]
    assert len(listed) == 1
    assert len(await revisions(api, listed[0]["id"])) == 1


async def test_bad_declarations_change_nothing(api: httpx.AsyncClient) -> None:
    made = (await api.put("/v1/schedules/by-key/k", json=declaration())).json()
    bad = await api.put("/v1/schedules/by-key/k", json=declaration(cron="61 * * * *"))
    assert_problem(bad, 422, "cron")
    assert_problem(await api.put("/v1/schedules/by-key/k", json={"cron": "0 2 * * *"}), 422)
    assert_problem(await api.put("/v1/schedules/by-key/a%01b", json=declaration()), 422, "key")
    still = (await api.get(f"/v1/schedules/{made['id']}")).json()
    assert still["cron"] == "0 2 * * *" and still["version"] == made["version"]


async def test_trigger_refuses_a_body_it_would_ignore(api: httpx.AsyncClient) -> None:
    made = (await api.put("/v1/schedules/by-key/t", json=declaration())).json()
    path = f"/v1/schedules/{made['id']}/trigger"
    assert_problem(await api.post(path, json={"payload": {"n": 2}}), 422, "payload")
    assert (await api.get(f"/v1/tasks?schedule_id={made['id']}")).json()["items"] == []
    assert (await api.post(path)).status_code == 201
    assert (await api.post(path, json={})).status_code in (200, 201)
