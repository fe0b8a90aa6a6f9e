"""Keyed flow control over HTTP (SPEC §7 "Keyed flow control"): rules on ``PUT /v1/queues``
validated by field, uniqueness windows answering 200 with ``Duetime-Unique``, debounce and
throttle headers, keyed limits and ``GET /v1/queues/{name}``'s keys and reasons, on both
stores."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import httpx
from api_helpers import assert_problem, case
from lease_helpers import WORKER, create, lease

from duetime.clock import FakeClock
from duetime.store import Store


async def put(api: httpx.AsyncClient, name: str, **settings: object) -> dict[str, Any]:
    resp = await api.put(f"/v1/queues/{name}", json=settings)
    assert resp.status_code == 200, resp.text
    return dict(resp.json())


async def post(api: httpx.AsyncClient, **fields: Any) -> httpx.Response:
    fields.setdefault("target", WORKER)
    return await api.post("/v1/tasks", json=fields)


async def test_queue_flow_rules_are_stored_and_shown(api: httpx.AsyncClient) -> None:
    rules = {
        "key_limit": {"key": "payload.customer_id", "rate": "10/s", "burst": 20},
        "unique": {"key": ["name", "payload.order"], "period": "PT1H"},
        "debounce": {"key": "labels.user", "period": "PT5S", "max_wait": "PT1M"},
        "throttle": {"key": "name", "rate": "120/m"},
    }
    got = await put(api, "q", **rules)
    assert got["key_limit"] == {"key": "payload.customer_id", "rate": "10/s", "burst": 20}
    assert got["unique"]["key"] == ["name", "payload.order"]
    assert got["unique"]["states"] == ["scheduled", "blocked", "ready", "running", "retrying",
                                       "succeeded"]  # fmt: skip
    assert got["debounce"] == {"key": "labels.user", "period": "PT5S", "max_wait": "PT1M"}
    assert got["throttle"] == {"key": "name", "rate": "2/s", "burst": 1}
    read = (await api.get("/v1/queues/q")).json()
    assert {k: read[k] for k in rules} == {k: got[k] for k in rules}
    assert read["keys"] == []
    concurrency = await put(api, "c", key_limit={"key": "labels.tenant", "max_concurrency": 2})
    assert concurrency["max_concurrency_per_key"] == 2
    assert concurrency["key_limit"] == {"key": "labels.tenant", "max_concurrency": 2}
    cleared = await put(api, "q")
    assert all(cleared[k] is None for k in rules)


async def test_a_bad_rule_is_a_422_naming_it_and_changes_nothing(api: httpx.AsyncClient) -> None:
    await put(api, "q", throttle={"key": "name", "rate": "1/s"})
    cases: list[tuple[dict[str, Any], str]] = [
        ({"key_limit": {"key": "payload.a..b", "rate": "1/s"}}, "key_limit.key"),
        ({"key_limit": {"key": "name", "rate": "ten"}}, "key_limit.rate"),
        ({"key_limit": {"key": "name"}}, "key_limit"),
        (
            {"key_limit": {"key": "name", "max_concurrency": 2}, "max_concurrency_per_key": 3},
            "key_limit.max_concurrency",
        ),
        ({"unique": {"key": "name", "period": "P1M"}}, "unique.period"),
        ({"unique": {"key": "name", "period": "PT1H", "states": ["gone"]}}, "unique.states.0"),
        (
            {"debounce": {"key": "name", "period": "PT5S", "max_wait": "PT1S"}},
            "debounce.max_wait",
        ),
        ({"throttle": {"key": ["name"] * 5, "rate": "1/s"}}, "throttle.key"),
        ({"throttle": {"key": "name", "rate": "1/s", "bogus": 1}}, "throttle.bogus"),
    ]
    for body, field in cases:
        with case(field):
            assert_problem(await api.put("/v1/queues/q", json=body), 422, field)
    assert (await api.get("/v1/queues/q")).json()["throttle"]["rate"] == "1/s"


async def test_racing_creates_of_one_unique_key_make_one_task_and_tell_each_caller(
    api: httpx.AsyncClient,
) -> None:
    """50 concurrent creates of one key within its window: one 201 ``Duetime-Unique:
    created``, 49 200 ``existing``, every answer the same task."""
    await put(api, "orders", unique={"key": "payload.order", "period": "PT1H"})
    answers = await asyncio.gather(
        *(post(api, queue="orders", payload={"order": 42, "try": i}) for i in range(50))
    )
    codes = Counter((r.status_code, r.headers.get("duetime-unique")) for r in answers)
    assert codes == {(201, "created"): 1, (200, "existing"): 49}
    assert len({r.json()["id"] for r in answers}) == 1
    listed = (await api.get("/v1/tasks", params={"queue": "orders"})).json()["items"]
    assert len(listed) == 1


async def test_a_tasks_own_unique_key_and_its_errors(api: httpx.AsyncClient) -> None:
    first = await post(api, unique={"key": "report-2030-01", "period": "P1D"})
    again = await post(api, unique={"key": "report-2030-01", "period": "P1D"}, payload=1)
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json()["id"] == first.json()["id"]
    by_expr = await post(api, name="n", unique={"key_from": "name", "period": "PT1M"})
    assert by_expr.headers["duetime-unique"] == "created"
    assert_problem(await post(api, unique={"period": "PT1M"}), 422, "unique")
    assert_problem(await post(api, unique={"key": "x", "period": "1h"}), 422, "unique.period")
    resp = await api.post(
        "/v1/tasks/batch",
        json={"tasks": [{"target": WORKER}, {"target": WORKER, "unique": {"key": "x"}}]},
    )
    assert_problem(resp, 422, "tasks.1.unique.period")


async def test_debounce_answers_with_the_waiting_task(
    api: httpx.AsyncClient, clock: FakeClock
) -> None:
    await put(api, "d", debounce={"key": "labels.user", "period": "PT5S"})
    first = await post(api, queue="d", labels={"user": "u1"}, payload={"n": 1})
    assert (first.status_code, first.headers["duetime-debounce"]) == (201, "created")
    clock.advance(1)
    second = await post(api, queue="d", labels={"user": "u1"}, payload={"n": 2})
    assert (second.status_code, second.headers["duetime-debounce"]) == (200, "absorbed")
    body = second.json()
    assert body["id"] == first.json()["id"] and body["payload"] == {"n": 2}
    assert body["absorbed"] == 1 and body["absorbed_at"] is not None
    other = await post(api, queue="d", payload={"n": 3})  # no user label: no debounce
    assert other.status_code == 201 and "duetime-debounce" not in other.headers


async def test_throttle_says_when_it_delays(api: httpx.AsyncClient) -> None:
    await put(api, "t", throttle={"key": "name", "rate": "1/s"})
    first = await post(api, queue="t", name="sync")
    second = await post(api, queue="t", name="sync")
    assert first.headers["duetime-throttle"] == "on_time"
    assert second.headers["duetime-throttle"] == "delayed"
    assert second.json()["status"] == "scheduled" and second.status_code == 201


async def test_keyed_rate_limit_and_why_a_key_waits(
    api: httpx.AsyncClient, clock: FakeClock, store: Store
) -> None:
    """Tasks are keyed when created; a key over its rate waits, and ``GET /v1/queues/{name}``
    says which key and until when."""
    await put(api, "k", key_limit={"key": "payload.customer", "rate": "1/s"})
    for customer in ("c1", "c1", "c1", "c2"):
        made = await create(api, queue="k", payload={"customer": customer})
        assert made["flow_key"] == customer
    plain = await create(api, queue="k", payload={})
    assert plain["flow_key"] == ""
    got = Counter(x["task"]["flow_key"] for x in await lease(api, "k", max_tasks=10))
    assert got == {"c1": 1, "c2": 1, "": 1}
    shown = (await api.get("/v1/queues/k")).json()
    assert "key_limit" in shown["held_by"]
    c1 = next(k for k in shown["keys"] if k["key"] == "c1")
    assert c1["ready"] == 2 and c1["running"] == 1 and c1["held_by"] == ["rate"]
    assert c1["waiting"].startswith("rate limit of key c1 (1/s) in queue k: next start at")
    assert c1["next_start_at"] is not None
    clock.advance(1)
    assert len(await lease(api, "k", max_tasks=10)) == 1


async def test_keyed_concurrency_from_an_expression(api: httpx.AsyncClient) -> None:
    await put(api, "c", key_limit={"key": "labels.tenant", "max_concurrency": 1})
    for _ in range(2):
        made = await create(api, queue="c", labels={"tenant": "t1"})
        assert made["concurrency_key"] == "t1" and made["flow_key"] is None
    own = await create(api, queue="c", labels={"tenant": "t1"}, concurrency_key="mine")
    assert own["concurrency_key"] == "mine"
    assert len(await lease(api, "c", max_tasks=10)) == 2  # t1 once, mine once
    shown = (await api.get("/v1/queues/c")).json()
    t1 = next(k for k in shown["keys"] if k["key"] == "t1")
    assert t1["held_by"] == ["max_concurrency"] and "max_concurrency of 1" in t1["waiting"]


async def test_a_schedules_trigger_and_backfill_key_their_tasks(
    api: httpx.AsyncClient, clock: FakeClock
) -> None:
    """Occurrences a call makes take their keys as a create does (the materializer's too:
    tests/engine/test_materializer.py)."""
    await put(api, "k", key_limit={"key": "payload.customer", "rate": "1/s"})
    made = await api.post(
        "/v1/schedules",
        json={"cron": "0 3 * * *", "task": {"target": WORKER, "queue": "k",
                                            "payload": {"customer": "c9"}}},
    )  # fmt: skip
    assert made.status_code == 201, made.text
    schedule = made.json()["id"]
    triggered = await api.post(f"/v1/schedules/{schedule}/trigger")
    assert triggered.status_code == 201, triggered.text
    assert triggered.json()["flow_key"] == "c9"
    back = await api.post(
        f"/v1/schedules/{schedule}/backfill",
        json={"start": "2029-12-25T00:00:00Z", "end": "2029-12-31T00:00:00Z"},
    )
    assert back.status_code == 200, back.text
    ids = [item["task_id"] for item in back.json()["items"]]
    assert ids
    for task_id in ids:
        assert (await api.get(f"/v1/tasks/{task_id}")).json()["flow_key"] == "c9"


async def test_workflow_nodes_spawned_children_and_followed_tasks_take_their_keys(
    api: httpx.AsyncClient,
) -> None:
    """Tasks made by the graph create (a workflow's nodes, a handler's children, a task with
    callbacks) take their keys under their queue's keyed limits as a plain create does."""
    await put(api, "k", key_limit={"key": "payload.customer", "rate": "5/s"})
    await put(api, "c", key_limit={"key": "labels.tenant", "max_concurrency": 1})
    made = await api.post(
        "/v1/workflows",
        json={"defaults": {"target": WORKER}, "nodes": [
            {"ref": "a", "queue": "k", "payload": {"customer": "c1"}},
            {"ref": "b", "queue": "c", "labels": {"tenant": "t1"}, "depends_on": ["a"]},
            {"ref": "plain", "payload": {"customer": "c2"}},
        ]},
    )  # fmt: skip
    assert made.status_code == 201, made.text
    nodes = {n["ref"]: n["task_id"] for n in made.json()["nodes"]}
    a = (await api.get(f"/v1/tasks/{nodes['a']}")).json()
    b = (await api.get(f"/v1/tasks/{nodes['b']}")).json()
    plain = (await api.get(f"/v1/tasks/{nodes['plain']}")).json()
    assert a["flow_key"] == "c1" and a["concurrency_key"] is None
    assert b["concurrency_key"] == "t1" and b["flow_key"] is None
    assert plain["flow_key"] is None and plain["concurrency_key"] is None
    followed = await post(api, queue="k", payload={"customer": "c3"}, on_success={"target": WORKER})
    assert followed.status_code == 201, followed.text
    assert followed.json()["flow_key"] == "c3"
    (held,) = await lease(api, "k", max_tasks=1)
    spawned = await api.post(
        f"/v1/leases/{held['lease_id']}/children",
        json={"tasks": [{"target": WORKER, "queue": "k", "payload": {"customer": "c4"}}]},
    )
    assert spawned.status_code == 201, spawned.text
    (child,) = spawned.json()["items"]
    assert (await api.get(f"/v1/tasks/{child['id']}")).json()["flow_key"] == "c4"
