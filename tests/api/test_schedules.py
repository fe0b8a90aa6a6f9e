"""``/v1/schedules``: every call and its errors, over both stores, with the store's time pinned to
the test clock (2030-01-01T00:00Z unless moved)."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from api_helpers import TenantKey, assert_problem, case, make_tenant

from duetime.clock import FakeClock
from duetime.engine.leader import Leader
from duetime.engine.materializer import Materializer
from duetime.store import Store

WORKER = {"type": "worker"}
HOOK = {"type": "http", "url": "https://example.com/hook"}


def body(**fields: Any) -> dict[str, Any]:
    fields.setdefault("task", {"target": WORKER, "name": "report", "payload": {"n": 1}})
    if not {"cron", "every", "rrule"} & set(fields):
        fields["every"] = "PT1M"
    return fields


async def create(api: httpx.AsyncClient, **fields: Any) -> dict[str, Any]:
    resp = await api.post("/v1/schedules", json=body(**fields))
    assert resp.status_code == 201, resp.text
    return dict(resp.json())


async def materialize(store: Store, clock: FakeClock) -> int:
    leader = Leader(store, "node-a", ttl_seconds=10, clock=clock)
    await leader.run_once()
    return await Materializer(store, leader, clock).run_once()


async def schedule_tasks(api: httpx.AsyncClient, schedule_id: str) -> list[dict[str, Any]]:
    resp = await api.get("/v1/tasks", params={"schedule_id": schedule_id, "limit": 1000})
    assert resp.status_code == 200
    return sorted(resp.json()["items"], key=lambda t: t["scheduled_for"])


def ts(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


async def test_create_returns_the_schedule_with_next_run_and_description(
    api: httpx.AsyncClient, tenant: TenantKey
) -> None:
    resp = await api.post(
        "/v1/schedules",
        json=body(cron="0 2 * * *", timezone="America/New_York", jitter_seconds=30,
                  task={"target": HOOK, "name": "report", "retry": {"max_attempts": 3}}),
    )  # fmt: skip
    assert resp.status_code == 201, resp.text
    s = resp.json()
    assert s["cron"] == "0 2 * * *" and s["every"] is None and s["rrule"] is None
    assert s["timezone"] == "America/New_York" and s["jitter_seconds"] == 30
    assert s["dst"] == {"nonexistent": "run_after_gap", "ambiguous": "first"}
    assert (s["overlap"], s["catchup"]) == ("allow", "latest")
    assert (s["catchup_window_seconds"], s["catchup_max_runs"]) == (86400, 100)
    assert s["next_run_at"] == "2030-01-01T07:00:00Z"  # 02:00 EST
    assert s["description"] == "At 02:00 every day (America/New_York)"
    assert s["task"]["target"]["url"] == "https://example.com/hook"
    assert s["task"]["retry"]["max_attempts"] == 3 and s["task"]["queue"] == "default"
    assert s["paused"] is False and s["version"] == 1
    assert s["created_at"] == "2030-01-01T00:00:00Z"
    revs = (await api.get(f"/v1/schedules/{s['id']}/revisions")).json()["items"]
    assert [(r["action"], r["actor"]) for r in revs] == [("create", tenant.key_id)]
    assert revs[0]["after"]["cron"] == "0 2 * * *" and revs[0]["before"] == {}


async def test_create_validation_names_the_field(api: httpx.AsyncClient) -> None:
    cases: list[tuple[dict[str, Any], int, str]] = [
        ({"every": "PT1M"}, 422, "task"),
        ({"task": {"target": WORKER}}, 422, "cron"),
        (body(cron="* * * * *", every="PT1M"), 422, "every"),
        (body(cron="61 * * * *"), 422, "cron"),
        (body(every="PT0S"), 422, "every"),
        (body(every="1 hour"), 422, "every"),
        (body(rrule="FREQ=SOMETIMES"), 422, "rrule"),
        (body(timezone="Mars/Olympus"), 422, "timezone"),
        (body(dst={"nonexistent": "later"}), 422, "dst.nonexistent"),
        (body(dst={"ambiguous": "twice"}), 422, "dst.ambiguous"),
        (body(dst={"fold": "first"}), 422, "dst.fold"),
        (body(jitter_seconds=-1), 422, "jitter_seconds"),
        (body(overlap="maybe"), 422, "overlap"),
        (body(catchup_max_runs=-1), 422, "catchup_max_runs"),
        (body(start_at="2030-02-01T00:00:00Z", end_at="2030-01-01T00:00:00Z"), 422, "end_at"),
        (body(start_at="2030-02-01T00:00:00"), 422, "start_at"),
        (body(task={"target": {"type": "http", "url": "ftp://x"}}), 422, "task.target.url"),
        (body(task={"name": "x"}), 422, "task.target"),
        (body(task={"target": WORKER, "run_at": "2030-01-01T00:00:00Z"}), 422, "task.run_at"),
        (body(task={"target": WORKER, "payload": "x" * 2000}), 413, "task.payload"),
        (body(color="blue"), 422, "color"),
    ]
    for payload, status, field in cases:
        with case(field):
            resp = await api.post("/v1/schedules", json=payload)
            assert_problem(resp, status, field)
    assert (await api.get("/v1/schedules")).json()["items"] == []


async def test_create_never_firing_expression_is_refused(api: httpx.AsyncClient) -> None:
    resp = await api.post("/v1/schedules", json=body(cron="0 0 30 2 *"))
    problem = assert_problem(resp, 422, "cron")
    assert "never" in str(problem["detail"]) or "February" in str(problem["detail"])


async def test_list_filters_and_pages(api: httpx.AsyncClient, client: httpx.AsyncClient) -> None:
    made = [
        await create(api, task={"target": WORKER, "name": f"n{i % 2}", "queue": f"q{i % 3}"})
        for i in range(5)
    ]
    ids = [s["id"] for s in reversed(made)]
    first = (await api.get("/v1/schedules", params={"limit": 2})).json()
    assert [s["id"] for s in first["items"]] == ids[:2] and first["next_cursor"]
    rest = (await api.get("/v1/schedules", params={"cursor": first["next_cursor"]})).json()
    assert [s["id"] for s in rest["items"]] == ids[2:] and rest["next_cursor"] is None
    by_name = (await api.get("/v1/schedules", params={"name": "n1"})).json()["items"]
    assert {s["id"] for s in by_name} == {made[1]["id"], made[3]["id"]}
    by_queue = (await api.get("/v1/schedules", params={"queue": "q0"})).json()["items"]
    assert {s["id"] for s in by_queue} == {made[0]["id"], made[3]["id"]}
    await api.post(f"/v1/schedules/{made[2]['id']}/pause")
    paused = (await api.get("/v1/schedules", params={"paused": "true"})).json()["items"]
    assert [s["id"] for s in paused] == [made[2]["id"]]
    assert_problem(await api.get("/v1/schedules", params={"cursor": "!!"}), 400, "cursor")
    other = await make_tenant(client, "other")
    theirs = await client.get("/v1/schedules", headers=other.headers)
    assert theirs.json()["items"] == []
    assert_problem(await client.get(f"/v1/schedules/{made[0]['id']}", headers=other.headers), 404)


async def test_get_unknown_is_404(api: httpx.AsyncClient) -> None:
    for path in ("", "/ticks", "/revisions", "/upcoming"):
        assert_problem(await api.get(f"/v1/schedules/nope{path}"), 404)
    for path in ("/pause", "/resume", "/trigger"):
        assert_problem(await api.post(f"/v1/schedules/nope{path}"), 404)
    assert_problem(await api.patch("/v1/schedules/nope", json={"every": "PT5M"}), 404)
    assert_problem(await api.delete("/v1/schedules/nope"), 404)


async def test_patch_remakes_occurrences_not_started_and_records_a_revision(
    api: httpx.AsyncClient, store: Store, clock: FakeClock, tenant: TenantKey
) -> None:
    s = await create(api, every="PT20S")
    await materialize(store, clock)
    before = await schedule_tasks(api, s["id"])
    assert [t["scheduled_for"] for t in before] == [
        "2030-01-01T00:00:20Z", "2030-01-01T00:00:40Z", "2030-01-01T00:01:00Z",
    ]  # fmt: skip
    resp = await api.patch(
        f"/v1/schedules/{s['id']}",
        json={"cron": "* * * * *", "task": {"target": WORKER, "name": "v2"}},
    )
    assert resp.status_code == 200, resp.text
    changed = resp.json()
    assert changed["cron"] == "* * * * *" and changed["every"] is None
    assert changed["version"] == 2 and changed["next_run_at"] == "2030-01-01T00:01:00Z"
    assert await schedule_tasks(api, s["id"]) == []  # the unstarted ones are gone
    await materialize(store, clock)
    after = await schedule_tasks(api, s["id"])
    assert [(t["scheduled_for"], t["name"]) for t in after] == [("2030-01-01T00:01:00Z", "v2")]
    [rev, _] = (await api.get(f"/v1/schedules/{s['id']}/revisions")).json()["items"]
    assert rev["action"] == "update" and rev["actor"] == tenant.key_id
    assert rev["before"]["every"] == "PT20S" and rev["after"]["every"] is None
    assert rev["after"]["cron"] == "* * * * *" and rev["after"]["task"]["name"] == "v2"
    assert "timezone" not in rev["before"]  # only the fields that changed
    # A patch that changes nothing writes no revision.
    same = await api.patch(f"/v1/schedules/{s['id']}", json={"cron": "* * * * *"})
    assert same.json()["version"] == 2


async def test_patch_validation(api: httpx.AsyncClient) -> None:
    s = await create(api)
    path = f"/v1/schedules/{s['id']}"
    assert_problem(await api.patch(path, json={}), 422)
    assert_problem(await api.patch(path, json={"cron": None}), 422, "cron")
    assert_problem(await api.patch(path, json={"every": "PT-1M"}), 422, "every")
    assert_problem(await api.patch(path, json={"cron": "x", "every": "PT1M"}), 422, "every")
    assert_problem(await api.patch(path, json={"timezone": "Nowhere"}), 422, "timezone")
    assert_problem(
        await api.patch(path, json={"task": {"target": {"type": "http", "url": "x"}}}),
        422,
        "task.target.url",
    )
    cleared = await api.patch(path, json={"end_at": None, "jitter_seconds": 5})
    assert cleared.status_code == 200 and cleared.json()["jitter_seconds"] == 5


async def test_delete_cancels_pending_occurrences(
    api: httpx.AsyncClient, store: Store, clock: FakeClock
) -> None:
    s = await create(api, every="PT20S")
    await materialize(store, clock)
    resp = await api.delete(f"/v1/schedules/{s['id']}")
    assert resp.status_code == 200
    assert resp.json() == {"id": s["id"], "deleted": True, "cancelled_tasks": 3}
    assert {t["status"] for t in await schedule_tasks(api, s["id"])} == {"cancelled"}
    assert_problem(await api.get(f"/v1/schedules/{s['id']}"), 404)
    assert_problem(await api.delete(f"/v1/schedules/{s['id']}"), 404)
    assert (await api.get("/v1/schedules")).json()["items"] == []


async def test_pause_and_resume(
    api: httpx.AsyncClient, store: Store, clock: FakeClock, tenant: TenantKey
) -> None:
    s = await create(api, every="PT20S")
    await materialize(store, clock)
    resp = await api.post(f"/v1/schedules/{s['id']}/pause", json={"note": "db migration"})
    assert resp.status_code == 200, resp.text
    paused = resp.json()
    assert paused["paused"] is True and paused["pause_note"] == "db migration"
    assert paused["next_run_at"] is None and paused["paused_at"] == "2030-01-01T00:00:00Z"
    assert await schedule_tasks(api, s["id"]) == []  # made ahead, withdrawn
    clock.advance(70)
    await materialize(store, clock)
    resumed = (await api.post(f"/v1/schedules/{s['id']}/resume")).json()
    assert resumed["paused"] is False and resumed["pause_note"] is None
    assert resumed["next_run_at"] == "2030-01-01T00:01:20Z"
    again = await api.post(f"/v1/schedules/{s['id']}/resume")
    assert again.json()["version"] == resumed["version"]  # not paused: nothing to do
    await materialize(store, clock)
    ticks = (await api.get(f"/v1/schedules/{s['id']}/ticks")).json()["items"]
    paused_ticks = [t["at"] for t in ticks if t["outcome"] == "skipped_paused"]
    assert sorted(paused_ticks) == [
        "2030-01-01T00:00:20Z", "2030-01-01T00:00:40Z", "2030-01-01T00:01:00Z",
    ]  # fmt: skip
    made = [t["scheduled_for"] for t in await schedule_tasks(api, s["id"])]
    assert min(made) == "2030-01-01T00:01:20Z"  # no burst for the paused time
    revs = (await api.get(f"/v1/schedules/{s['id']}/revisions")).json()["items"]
    assert [r["action"] for r in revs] == ["resume", "pause", "create"]
    assert revs[1]["after"] == {"paused": True, "pause_note": "db migration"}
    assert revs[0]["actor"] == tenant.key_id
    bad = await api.post(f"/v1/schedules/{s['id']}/resume", json={"catchup": "sometimes"})
    assert_problem(bad, 422, "catchup")


async def test_trigger_runs_one_now_also_while_paused(
    api: httpx.AsyncClient, clock: FakeClock
) -> None:
    s = await create(api, cron="0 3 * * *")
    await api.post(f"/v1/schedules/{s['id']}/pause")
    resp = await api.post(f"/v1/schedules/{s['id']}/trigger")
    assert resp.status_code == 201, resp.text
    task = resp.json()
    assert task["schedule_id"] == s["id"] and task["status"] == "ready"
    assert task["scheduled_for"] == "2030-01-01T00:00:00Z" and task["name"] == "report"
    assert task["payload"] == {"n": 1}
    repeat = await api.post(f"/v1/schedules/{s['id']}/trigger")  # the same instant
    assert repeat.status_code == 200 and repeat.json()["id"] == task["id"]
    clock.advance(1)
    other = await api.post(f"/v1/schedules/{s['id']}/trigger")
    assert other.status_code == 201 and other.json()["id"] != task["id"]
    ticks = (await api.get(f"/v1/schedules/{s['id']}/ticks")).json()["items"]
    assert [(t["outcome"], t["task_id"]) for t in ticks] == [
        ("triggered", other.json()["id"]),
        ("triggered", task["id"]),
    ]


async def test_backfill_is_throttled_and_makes_each_occurrence_once(
    api: httpx.AsyncClient, clock: FakeClock
) -> None:
    s = await create(api, cron="0 * * * *")
    clock.advance(6 * 3600)
    payload = {"start": "2030-01-01T01:00:00Z", "end": "2030-01-01T05:00:00Z",
               "rate_per_second": 2}  # fmt: skip
    resp = await api.post(f"/v1/schedules/{s['id']}/backfill", json=payload)
    assert resp.status_code == 200, resp.text
    out = resp.json()
    assert (out["created"], out["existing"], out["truncated"]) == (5, 0, False)
    assert [i["scheduled_for"] for i in out["items"]] == [
        f"2030-01-01T0{h}:00:00Z" for h in range(1, 6)
    ]
    run_ats = [ts(i["run_at"]) for i in out["items"]]
    assert [(b - a).total_seconds() for a, b in itertools.pairwise(run_ats)] == [0.5] * 4
    assert run_ats[0] == clock.now()
    again = (await api.post(f"/v1/schedules/{s['id']}/backfill", json=payload)).json()
    assert (again["created"], again["existing"]) == (0, 5)
    ticks = (await api.get(f"/v1/schedules/{s['id']}/ticks")).json()["items"]
    assert [t["outcome"] for t in ticks] == ["backfilled"] * 5
    short = {**payload, "max_runs": 2, "start": "2030-01-01T00:00:00Z"}
    cut = (await api.post(f"/v1/schedules/{s['id']}/backfill", json=short)).json()
    assert cut["truncated"] is True and cut["created"] == 1 and cut["existing"] == 1
    future = {**payload, "end": "2030-01-02T00:00:00Z"}
    assert_problem(await api.post(f"/v1/schedules/{s['id']}/backfill", json=future), 422, "end")
    backwards = {**payload, "start": "2030-01-01T05:00:00Z", "end": "2030-01-01T01:00:00Z"}
    assert_problem(await api.post(f"/v1/schedules/{s['id']}/backfill", json=backwards), 422, "end")
    assert_problem(
        await api.post(f"/v1/schedules/{s['id']}/backfill", json={**payload, "rate_per_second": 0}),
        422,
        "rate_per_second",
    )


async def test_upcoming_in_the_zone_offset_with_dst_notes(api: httpx.AsyncClient) -> None:
    s = await create(api, cron="30 2 * * *", timezone="America/New_York")
    resp = await api.get(
        f"/v1/schedules/{s['id']}/upcoming",
        params={"after": "2030-03-09T12:00:00Z", "count": 3},
    )
    assert resp.status_code == 200, resp.text
    items = resp.json()["items"]
    assert [i["at"] for i in items] == [
        "2030-03-10T03:00:00-04:00",  # 02:30 does not exist that day
        "2030-03-11T02:30:00-04:00",
        "2030-03-12T02:30:00-04:00",
    ]
    assert "DST gap" in items[0]["note"] and items[1]["note"] is None
    default = (await api.get(f"/v1/schedules/{s['id']}/upcoming")).json()["items"]
    assert len(default) == 10 and default[0]["at"] == "2030-01-01T02:30:00-05:00"
    too_many = await api.get(f"/v1/schedules/{s['id']}/upcoming", params={"count": 1001})
    assert_problem(too_many, 422, "count")
    bad = await api.get(f"/v1/schedules/{s['id']}/upcoming", params={"after": "tomorrow"})
    assert_problem(bad, 422, "after")


async def test_ticks_page_newest_first_and_filter(
    api: httpx.AsyncClient, store: Store, clock: FakeClock
) -> None:
    s = await create(api, every="PT10S")
    await materialize(store, clock)
    first = (await api.get(f"/v1/schedules/{s['id']}/ticks", params={"limit": 4})).json()
    assert [t["at"] for t in first["items"]] == [
        "2030-01-01T00:01:00Z", "2030-01-01T00:00:50Z",
        "2030-01-01T00:00:40Z", "2030-01-01T00:00:30Z",
    ]  # fmt: skip
    assert all(t["outcome"] == "fired" and t["task_id"] for t in first["items"])
    rest = await api.get(f"/v1/schedules/{s['id']}/ticks", params={"cursor": first["next_cursor"]})
    assert [t["at"] for t in rest.json()["items"]] == [
        "2030-01-01T00:00:20Z", "2030-01-01T00:00:10Z",
    ]  # fmt: skip
    assert rest.json()["next_cursor"] is None
    none = await api.get(f"/v1/schedules/{s['id']}/ticks", params={"outcome": "missed"})
    assert none.json()["items"] == []
    bad = await api.get(f"/v1/schedules/{s['id']}/ticks", params={"outcome": "exploded"})
    assert_problem(bad, 422, "outcome")
    bad_cursor = await api.get(f"/v1/schedules/{s['id']}/ticks", params={"cursor": "Zm9v"})
    assert_problem(bad_cursor, 400, "cursor")


async def test_revisions_page(api: httpx.AsyncClient) -> None:
    s = await create(api)
    for jitter in (1, 2, 3):
        await api.patch(f"/v1/schedules/{s['id']}", json={"jitter_seconds": jitter})
    first = (await api.get(f"/v1/schedules/{s['id']}/revisions", params={"limit": 3})).json()
    assert [r["after"].get("jitter_seconds") for r in first["items"]] == [3, 2, 1]
    rest = await api.get(
        f"/v1/schedules/{s['id']}/revisions", params={"cursor": first["next_cursor"]}
    )
    assert [r["action"] for r in rest.json()["items"]] == ["create"]


async def test_schedules_are_in_the_openapi_document(client: httpx.AsyncClient) -> None:
    doc = (await client.get("/openapi.json")).json()
    for path in (
        "/v1/schedules",
        "/v1/schedules/{schedule_id}",
        "/v1/schedules/{schedule_id}/pause",
        "/v1/schedules/{schedule_id}/resume",
        "/v1/schedules/{schedule_id}/trigger",
        "/v1/schedules/{schedule_id}/backfill",
        "/v1/schedules/{schedule_id}/upcoming",
        "/v1/schedules/{schedule_id}/ticks",
        "/v1/schedules/{schedule_id}/revisions",
    ):
        assert path in doc["paths"], path
    assert "ScheduleCreate" in doc["components"]["schemas"]
    assert doc["paths"]["/v1/schedules"]["post"]["security"] == [{"ApiKey": []}]


@pytest.mark.parametrize("auth", [None, "Bearer wrong"])
async def test_schedules_need_a_key(client: httpx.AsyncClient, auth: str | None) -> None:
    headers = {"Authorization": auth} if auth else {}
    resp = await client.post("/v1/schedules", json=body(), headers=headers)
    assert_problem(resp, 401)


async def test_catchup_after_downtime_through_the_api(
    api: httpx.AsyncClient, store: Store, clock: FakeClock
) -> None:
    s = await create(api, every="PT1M", catchup="all", catchup_max_runs=2)
    clock.set(datetime(2030, 1, 1, 0, 10, 30, tzinfo=UTC))  # no node ran for 10 minutes
    await materialize(store, clock)
    ticks = (await api.get(f"/v1/schedules/{s['id']}/ticks", params={"limit": 1000})).json()
    outcomes = [t["outcome"] for t in reversed(ticks["items"])]
    # 00:01..00:09 are over a minute late: 2 caught up, the rest missed; 00:10 is on time.
    assert outcomes == ["missed"] * 7 + ["caught_up"] * 2 + ["fired", "fired"]
    assert timedelta(0) < clock.now() - ts(ticks["items"][1]["at"]) <= timedelta(minutes=1)
