"""``GET /v1/history``, queue ``retention`` and attempts of retired tasks through the API, on
both stores (hot tier; the archive is the test's own directory)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from api_helpers import assert_problem, make_tenant

from duetime.clock import FakeClock
from duetime.config import Settings
from duetime.history.retention import RetentionPolicy
from duetime.store import Store
from duetime.types import AttemptOutcome, ClaimRequest, Completion, TargetType, TaskStatus

WORKER = {"type": "worker"}
DAY = 86400.0


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    from api_helpers import ADMIN_TOKEN

    return Settings(
        admin_token=ADMIN_TOKEN, max_payload_bytes=1024, archive_url=str(tmp_path / "archive")
    )


async def fail_all(store: Store, clock: FakeClock) -> None:
    leases = await store.task_claim(
        ClaimRequest(worker_id="w9", limit=100, target_types=frozenset({TargetType.WORKER}))
    )
    await store.task_complete_many(
        [
            Completion(
                task_id=x.task.id, lease_id=x.lease_id, outcome=AttemptOutcome.FAILED,
                started_at=clock.now(), duration_ms=2.0, error="nope", http_status=502,
                retry_delay_seconds=None, worker="w9",
                status=TaskStatus.FAILED,
            )
            for x in leases
        ]
    )  # fmt: skip


async def test_history_of_changes_with_actor_and_paging(
    api: httpx.AsyncClient, client: httpx.AsyncClient, store: Store, clock: FakeClock
) -> None:
    ids = []
    for _ in range(3):
        resp = await api.post("/v1/tasks", json={"target": WORKER, "name": "bill"})
        ids.append(resp.json()["id"])
    clock.advance(5)
    await fail_all(store, clock)
    clock.advance(5)
    assert (await api.post(f"/v1/tasks/{ids[0]}/retry")).status_code == 200

    one = (await api.get("/v1/history", params={"task_id": ids[0]})).json()["items"]
    kinds = [(e["kind"], e["from_status"], e["to_status"]) for e in one]
    assert kinds[0] == ("task", "failed", "ready")
    assert one[0]["actor"].startswith("key:")  # the API key that replayed it
    assert ("attempt", None, None) in kinds

    failed = await api.get(
        "/v1/history", params={"kind": "attempt", "outcome": "failed", "name": "bill"}
    )
    items = failed.json()["items"]
    assert len(items) == 3 and {e["http_status"] for e in items} == {502}
    assert items[0]["at"].endswith("Z") and items[0]["worker"] == "w9"

    seen, cursor = [], None
    while True:
        params = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        page = (await api.get("/v1/history", params=params)).json()
        seen += [e["id"] for e in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    everything = (await api.get("/v1/history", params={"limit": 1000})).json()["items"]
    assert seen == [e["id"] for e in everything] and len(seen) == 3 * 4 + 1

    # Another tenant sees none of it.
    other = await make_tenant(client, "other")
    theirs = await client.get("/v1/history", headers=other.headers)
    assert theirs.json() == {"items": [], "next_cursor": None}


async def test_history_bad_filters_are_422(api: httpx.AsyncClient) -> None:
    assert_problem(await api.get("/v1/history", params={"kind": "nope"}), 422, "kind")
    assert_problem(await api.get("/v1/history", params={"outcome": "meh"}), 422, "outcome")
    assert_problem(await api.get("/v1/history", params={"cursor": "zzz"}), 400, "cursor")
    assert_problem(await api.get("/v1/history", params={"since": "yesterday"}), 422, "since")
    assert_problem(await api.get("/v1/history", params={"label": "x"}), 422, "label")
    assert_problem(
        await api.get(
            "/v1/history",
            params={"since": "2030-02-01T00:00:00Z", "until": "2030-01-01T00:00:00Z"},
        ),
        422,
        "until",
    )


async def test_queue_retention_and_attempts_after_retirement(
    api: httpx.AsyncClient, store: Store, clock: FakeClock
) -> None:
    put = await api.put("/v1/queues/mail", json={"retention": {"failed": "P1D"}})
    assert put.status_code == 200, put.text
    assert put.json()["retention"] == {"failed": "P1D"}
    assert (await api.get("/v1/queues/mail")).json()["retention"] == {"failed": "P1D"}
    listed = (await api.get("/v1/queues")).json()["items"]
    assert [q["retention"] for q in listed] == [{"failed": "P1D"}]
    assert_problem(
        await api.put("/v1/queues/mail", json={"retention": {"failed": "soon"}}),
        422,
        "retention.failed",
    )
    assert_problem(
        await api.put("/v1/queues/mail", json={"retention": {"running": "P1D"}}),
        422,
        "retention.running",
    )

    task = (await api.post("/v1/tasks", json={"target": WORKER, "queue": "mail"})).json()
    await fail_all(store, clock)
    clock.advance(2 * DAY)
    defaults = RetentionPolicy(7 * DAY, 30 * DAY, 7 * DAY)
    assert await store.task_retention_sweep(defaults, 100) == 1
    assert_problem(await api.get(f"/v1/tasks/{task['id']}"), 404)
    attempts = (await api.get(f"/v1/tasks/{task['id']}/attempts")).json()["items"]
    assert [(a["number"], a["outcome"], a["error"]) for a in attempts] == [(1, "failed", "nope")]

    # PUT replaces the settings as a whole: without retention the queue is back on defaults.
    assert (await api.put("/v1/queues/mail", json={})).json()["retention"] == {}


async def test_schedule_changes_are_in_the_history(api: httpx.AsyncClient, tenant: object) -> None:
    made = await api.post(
        "/v1/schedules",
        json={"every": "PT1M", "task": {"target": WORKER, "name": "tick", "queue": "cron"}},
    )
    assert made.status_code == 201, made.text
    sid = made.json()["id"]
    paused = await api.post(f"/v1/schedules/{sid}/pause", json={"note": "deploy"})
    assert paused.status_code == 200
    assert (await api.patch(f"/v1/schedules/{sid}", json={"every": "PT5M"})).status_code == 200
    found = (await api.get("/v1/history", params={"schedule_id": sid, "kind": "schedule"})).json()
    actions = [(e["to_status"], e["name"], e["queue"]) for e in reversed(found["items"])]
    assert [a[0] for a in actions] == ["create", "pause", "update"]
    assert actions[0][1:] == ("tick", "cron")
    update = found["items"][0]
    assert update["fields"]["every"] == ["PT1M", "PT5M"]
    assert update["actor"] and update["actor"] != "api"
