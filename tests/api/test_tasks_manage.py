"""GET/PATCH /v1/tasks/{id}, cancel, retry, attempts, and GET /v1/tasks with filters and paging."""

from __future__ import annotations

import base64
from typing import Any

import httpx
from api_helpers import TenantKey, assert_problem, case, make_tenant

from duetime.clock import FakeClock
from duetime.store import Store
from duetime.types import AttemptOutcome, ClaimRequest, Completion, Lease, TargetType, TaskStatus

WORKER = {"type": "worker"}


async def create(api: httpx.AsyncClient, **fields: Any) -> dict[str, Any]:
    resp = await api.post("/v1/tasks", json={"target": WORKER, **fields})
    assert resp.status_code == 201, resp.text
    return dict(resp.json())


async def claim(store: Store, clock: FakeClock) -> Lease:
    (lease,) = await store.task_claim(
        ClaimRequest(worker_id="w1", limit=1, target_types=frozenset({TargetType.WORKER}))
    )
    return lease


async def fail(store: Store, clock: FakeClock, lease: Lease) -> None:
    (result,) = await store.task_complete_many(
        [
            Completion(
                task_id=lease.task.id,
                lease_id=lease.lease_id,
                outcome=AttemptOutcome.FAILED,
                started_at=clock.now(),
                duration_ms=12.5,
                error="boom",
                http_status=500,
                retry_delay_seconds=None,
                worker="w1",
                status=TaskStatus.FAILED,
            )
        ]
    )
    assert result.accepted


def newest(*ids: str) -> list[str]:
    """Listing order: by id, descending (ids made in one millisecond need not follow creation)."""
    return sorted(ids, reverse=True)


# -- read --------------------------------------------------------------------------------------


async def test_get_task(api: httpx.AsyncClient) -> None:
    task = await create(api, name="n", payload={"a": 1})
    resp = await api.get(f"/v1/tasks/{task['id']}")
    assert resp.status_code == 200
    assert resp.json() == task
    upper = await api.get(f"/v1/tasks/{task['id'].upper()}")
    assert upper.status_code == 200 and upper.json()["id"] == task["id"]


async def test_get_missing_task_is_404(api: httpx.AsyncClient) -> None:
    for task_id in ["nope", "0190c6f2-0000-7000-8000-000000000000", "1" * 40]:
        with case(task_id):
            assert_problem(await api.get(f"/v1/tasks/{task_id}"), 404)


async def test_unknown_route_and_method_are_problems(api: httpx.AsyncClient) -> None:
    assert_problem(await api.get("/v1/nothing-here"), 404)
    resp = await api.delete("/v1/tasks")
    assert_problem(resp, 405)
    assert resp.headers["allow"]  # Starlette names the methods of the first matching route


# -- list --------------------------------------------------------------------------------------


async def test_list_filters(api: httpx.AsyncClient, store: Store, clock: FakeClock) -> None:
    a = await create(api, name="send", queue="q1", labels={"team": "billing", "env": "prod"})
    b = await create(api, name="send", queue="q2", run_at="2030-02-01T00:00:00Z")
    c = await create(api, name="report", queue="q1", labels={"team": "ops"})
    d = await create(api, name="report", queue="q2", run_at="2030-03-01T00:00:00Z")
    cancelled = (await api.post(f"/v1/tasks/{c['id']}/cancel")).json()
    assert cancelled["status"] == "cancelled"

    async def ids(params: Any) -> list[str]:
        resp = await api.get("/v1/tasks", params=params)
        assert resp.status_code == 200, resp.text
        assert resp.json()["next_cursor"] is None
        return [t["id"] for t in resp.json()["items"]]

    assert await ids({}) == newest(d["id"], c["id"], b["id"], a["id"])  # newest first
    assert await ids({"status": "ready"}) == newest(a["id"])
    assert await ids({"status": "scheduled,cancelled"}) == newest(d["id"], c["id"], b["id"])
    assert await ids([("status", "scheduled"), ("status", "ready")]) == newest(
        d["id"], b["id"], a["id"]
    )
    assert await ids({"queue": "q1"}) == newest(c["id"], a["id"])
    assert await ids({"name": "send"}) == newest(b["id"], a["id"])
    assert await ids({"name": "send", "queue": "q2"}) == newest(b["id"])
    assert await ids({"label": "team:billing"}) == newest(a["id"])
    assert await ids([("label", "team:billing"), ("label", "env:prod")]) == newest(a["id"])
    assert await ids([("label", "team:billing"), ("label", "env:dev")]) == []
    assert await ids({"run_after": "2030-02-01T00:00:00Z"}) == newest(d["id"], b["id"])
    assert await ids({"run_before": "2030-02-01T00:00:00Z"}) == newest(c["id"], a["id"])
    window = {"run_after": "2030-01-15T00:00:00+01:00", "run_before": "2030-02-15T00:00:00Z"}
    assert await ids(window) == newest(b["id"])
    assert await ids({"schedule_id": "none-such"}) == []
    # An unescaped "+" in a query string arrives as a space; it is read as the offset sign.
    raw = await api.get("/v1/tasks?run_after=2030-02-01T01:00:00+01:00")
    assert [t["id"] for t in raw.json()["items"]] == newest(d["id"], b["id"])


BAD_QUERIES: list[tuple[dict[str, str], str]] = [
    ({"status": "done"}, "status"),
    ({"status": "ready,bogus"}, "status"),
    ({"label": "nocolon"}, "label"),
    ({"run_after": "2030-01-01"}, "run_after"),
    ({"run_before": "2030-01-01T00:00:00"}, "run_before"),
    ({"limit": "0"}, "limit"),
    ({"limit": "1001"}, "limit"),
    ({"limit": "ten"}, "limit"),
]


async def test_list_bad_query_is_422(api: httpx.AsyncClient) -> None:
    for params, field in BAD_QUERIES:
        with case(params):
            assert_problem(await api.get("/v1/tasks", params=params), 422, field)


async def test_a_cursor_the_server_did_not_issue_is_400(api: httpx.AsyncClient) -> None:
    for cursor in ("!!!", base64.urlsafe_b64encode(b"not-a-uuid").decode()):
        with case({"cursor": cursor}):
            assert_problem(await api.get("/v1/tasks", params={"cursor": cursor}), 400, "cursor")


async def test_list_cursor_paging(api: httpx.AsyncClient) -> None:
    resp = await api.post("/v1/tasks/batch", json={"tasks": [{"target": WORKER}] * 7})
    made = [t["id"] for t in resp.json()["items"]]
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        params: dict[str, Any] = {"limit": 3}
        if cursor:
            params["cursor"] = cursor
        page = (await api.get("/v1/tasks", params=params)).json()
        seen += [t["id"] for t in page["items"]]
        pages += 1
        cursor = page["next_cursor"]
        if cursor is None:
            break
        assert len(page["items"]) == 3
    assert pages == 3
    assert seen == sorted(made, reverse=True)
    exact = (await api.get("/v1/tasks", params={"limit": 7})).json()
    assert len(exact["items"]) == 7 and exact["next_cursor"] is None
    default = (await api.get("/v1/tasks")).json()
    assert len(default["items"]) == 7


async def test_list_limit_default_is_100(api: httpx.AsyncClient) -> None:
    await api.post("/v1/tasks/batch", json={"tasks": [{"target": WORKER}] * 101})
    page = (await api.get("/v1/tasks")).json()
    assert len(page["items"]) == 100 and page["next_cursor"]
    rest = (await api.get("/v1/tasks", params={"cursor": page["next_cursor"]})).json()
    assert len(rest["items"]) == 1 and rest["next_cursor"] is None


# -- patch -------------------------------------------------------------------------------------


async def test_patch_waiting_task(api: httpx.AsyncClient) -> None:
    task = await create(api, run_at="2030-06-01T00:00:00Z", payload={"v": 1}, labels={"a": "b"})
    assert task["status"] == "scheduled"
    body = {
        "run_at": "2030-07-01T02:00:00+02:00",
        "payload": [1, 2, 3],
        "priority": 9,
        "labels": {"c": "d"},
    }
    resp = await api.patch(f"/v1/tasks/{task['id']}", json=body)
    assert resp.status_code == 200, resp.text
    changed = resp.json()
    assert changed["run_at"] == "2030-07-01T00:00:00Z"
    assert changed["payload"] == [1, 2, 3]
    assert changed["priority"] == 9
    assert changed["labels"] == {"c": "d"}
    # Only what is given changes; payload null is a value.
    resp = await api.patch(f"/v1/tasks/{task['id']}", json={"payload": None})
    assert resp.json()["payload"] is None and resp.json()["priority"] == 9
    # Moving run_at to the past makes it due now.
    due = await api.patch(f"/v1/tasks/{task['id']}", json={"run_at": "2029-01-01T00:00:00Z"})
    assert due.json()["status"] == "ready"
    assert (await api.get(f"/v1/tasks/{task['id']}")).json() == due.json()


BAD_PATCHES: list[tuple[dict[str, Any], str]] = [
    ({}, "body"),
    ({"run_at": None}, "run_at"),
    ({"run_at": "2030-01-01T00:00:00"}, "run_at"),
    ({"priority": None}, "priority"),
    ({"priority": "high"}, "priority"),
    ({"labels": None}, "labels"),
    ({"labels": {"k": 1}}, "labels.k"),
    ({"queue": "other"}, "queue"),
    ({"delay_seconds": 5}, "delay_seconds"),
]


async def test_patch_validation(api: httpx.AsyncClient) -> None:
    task = await create(api)
    for body, field in BAD_PATCHES:
        with case(body):
            assert_problem(await api.patch(f"/v1/tasks/{task['id']}", json=body), 422, field)
    assert (await api.get(f"/v1/tasks/{task['id']}")).json() == task


async def test_patch_payload_too_big(api: httpx.AsyncClient) -> None:
    task = await create(api)
    resp = await api.patch(f"/v1/tasks/{task['id']}", json={"payload": "z" * 5000})
    assert_problem(resp, 413, "payload")


async def test_patch_missing_task_is_404(api: httpx.AsyncClient) -> None:
    resp = await api.patch("/v1/tasks/0190c6f2-0000-7000-8000-000000000000", json={"priority": 1})
    assert_problem(resp, 404)
    assert_problem(await api.patch("/v1/tasks/xyz", json={"priority": 1}), 404)


async def test_running_and_finished_tasks_refuse_patch(
    api: httpx.AsyncClient, store: Store, clock: FakeClock
) -> None:
    task = await create(api)
    lease = await claim(store, clock)
    assert lease.task.id == task["id"]
    assert_problem(await api.patch(f"/v1/tasks/{task['id']}", json={"priority": 1}), 409)
    await fail(store, clock, lease)
    assert_problem(await api.patch(f"/v1/tasks/{task['id']}", json={"priority": 1}), 409)


# -- cancel, retry, attempts ---------------------------------------------------------------------


async def test_cancel_waiting_task_then_409(api: httpx.AsyncClient) -> None:
    task = await create(api, run_at="2030-06-01T00:00:00Z")
    resp = await api.post(f"/v1/tasks/{task['id']}/cancel")
    assert resp.status_code == 200
    assert resp.json()["status"] == "cancelled"
    assert resp.json()["next_attempt_at"] is None
    assert_problem(await api.post(f"/v1/tasks/{task['id']}/cancel"), 409)
    assert_problem(await api.post("/v1/tasks/not-an-id/cancel"), 404)


async def test_cancel_running_task_is_recorded(
    api: httpx.AsyncClient, store: Store, clock: FakeClock
) -> None:
    task = await create(api)
    await claim(store, clock)
    resp = await api.post(f"/v1/tasks/{task['id']}/cancel")
    assert resp.status_code == 200
    assert resp.json()["status"] == "running"
    assert resp.json()["cancel_requested"] is True


async def test_retry_failed_task_and_attempts(
    api: httpx.AsyncClient, store: Store, clock: FakeClock
) -> None:
    task = await create(api)
    assert (await api.get(f"/v1/tasks/{task['id']}/attempts")).json() == {"items": []}
    assert_problem(await api.post(f"/v1/tasks/{task['id']}/retry"), 409)  # ready: nothing to replay
    await fail(store, clock, await claim(store, clock))
    failed = (await api.get(f"/v1/tasks/{task['id']}")).json()
    assert failed["status"] == "failed"
    assert failed["attempts"] == 1
    assert failed["last_error"] == "boom"
    dead = (await api.get("/v1/tasks", params={"status": "failed"})).json()["items"]
    assert [t["id"] for t in dead] == [task["id"]]

    attempts = (await api.get(f"/v1/tasks/{task['id']}/attempts")).json()["items"]
    assert len(attempts) == 1
    (attempt,) = attempts
    assert attempt["task_id"] == task["id"]
    assert attempt["number"] == 1
    assert attempt["outcome"] == "failed"
    assert attempt["error"] == "boom"
    assert attempt["http_status"] == 500
    assert attempt["duration_ms"] == 12.5
    assert attempt["worker"] == "w1"
    assert attempt["started_at"].endswith("Z") and attempt["finished_at"].endswith("Z")

    resp = await api.post(f"/v1/tasks/{task['id']}/retry")
    assert resp.status_code == 200, resp.text
    replayed = resp.json()
    assert replayed["status"] == "ready"
    assert replayed["last_error"] is None
    assert_problem(await api.post(f"/v1/tasks/{task['id']}/retry"), 409)
    assert_problem(await api.post("/v1/tasks/0190c6f2-0000-7000-8000-000000000000/retry"), 404)


async def test_retry_cancelled_task(api: httpx.AsyncClient) -> None:
    task = await create(api)
    await api.post(f"/v1/tasks/{task['id']}/cancel")
    resp = await api.post(f"/v1/tasks/{task['id']}/retry")
    assert resp.status_code == 200 and resp.json()["status"] == "ready"


async def test_attempts_of_missing_task_is_404(api: httpx.AsyncClient) -> None:
    assert_problem(await api.get("/v1/tasks/0190c6f2-0000-7000-8000-000000000000/attempts"), 404)
    assert_problem(await api.get("/v1/tasks/zzz/attempts"), 404)


# -- tenant isolation ----------------------------------------------------------------------------


async def test_another_tenants_task_is_404_everywhere(
    client: httpx.AsyncClient, tenant: TenantKey
) -> None:
    other = await make_tenant(client, "other")
    a = (await client.post("/v1/tasks", json={"target": WORKER}, headers=tenant.headers)).json()
    b = (await client.post("/v1/tasks", json={"target": WORKER}, headers=other.headers)).json()
    path = f"/v1/tasks/{a['id']}"
    as_b = other.headers
    assert_problem(await client.get(path, headers=as_b), 404)
    assert_problem(await client.patch(path, json={"priority": 1}, headers=as_b), 404)
    assert_problem(await client.post(f"{path}/cancel", headers=as_b), 404)
    assert_problem(await client.post(f"{path}/retry", headers=as_b), 404)
    assert_problem(await client.get(f"{path}/attempts", headers=as_b), 404)
    listed = (await client.get("/v1/tasks", headers=as_b)).json()["items"]
    assert [t["id"] for t in listed] == newest(b["id"])
    # B cannot make its task depend on A's either.
    dep = {"target": WORKER, "depends_on": [a["id"]]}
    assert_problem(await client.post("/v1/tasks", json=dep, headers=as_b), 422, "depends_on")
    # A's task is untouched.
    mine = (await client.get(path, headers=tenant.headers)).json()
    assert mine["status"] == "ready" and mine["priority"] == 0
