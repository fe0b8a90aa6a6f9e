"""Workflows over HTTP: a DAG in one call, every node's status, results flowing to children,
a parent's failure by each child's policy, cancel as a whole, replay of the failed nodes, and
422s naming the node at fault."""

from __future__ import annotations

from typing import Any

import httpx
from api_helpers import assert_problem
from lease_helpers import WORKER

Body = dict[str, Any]


async def _create(api: httpx.AsyncClient, body: Body, status: int = 201) -> Body:
    resp = await api.post("/v1/workflows", json=body)
    assert resp.status_code == status, resp.text
    return dict(resp.json())


async def _lease(api: httpx.AsyncClient, **body: Any) -> list[Body]:
    body.setdefault("worker_id", "w1")
    body.setdefault("wait_seconds", 0)
    body.setdefault("max_tasks", 100)
    resp = await api.post("/v1/queues/default/lease", json=body)
    assert resp.status_code == 200, resp.text
    return list(resp.json()["leases"])


async def _complete(api: httpx.AsyncClient, lease: Body, result: Any) -> None:
    resp = await api.post(f"/v1/leases/{lease['lease_id']}/complete", json={"result": result})
    assert resp.status_code == 200, resp.text


async def _fail(api: httpx.AsyncClient, lease: Body, error: str) -> None:
    resp = await api.post(
        f"/v1/leases/{lease['lease_id']}/fail", json={"error": error, "retryable": False}
    )
    assert resp.status_code == 200, resp.text


def _by_ref(workflow: Body) -> dict[str, Body]:
    return {n["ref"]: n for n in workflow["nodes"]}


DIAMOND: Body = {
    "name": "diamond",
    "defaults": {"target": WORKER, "labels": {"team": "data"}},
    "nodes": [
        {"ref": "extract", "name": "extract"},
        {"ref": "left", "name": "left", "depends_on": ["extract"]},
        {"ref": "right", "name": "right", "depends_on": ["extract"]},
        {"ref": "join", "name": "join", "depends_on": ["left", "right"]},
    ],
}


async def test_a_diamond_runs_in_order_and_each_child_sees_its_parents_results(
    api: httpx.AsyncClient,
) -> None:
    wf = await _create(api, DIAMOND)
    nodes = _by_ref(wf)
    assert wf["status"] == "running" and wf["name"] == "diamond"
    assert nodes["extract"]["status"] == "ready"
    assert {nodes[r]["status"] for r in ("left", "right", "join")} == {"blocked"}
    assert nodes["join"]["depends_on"] == ["left", "right"]
    task = (await api.get(f"/v1/tasks/{nodes['join']['task_id']}")).json()
    assert task["labels"] == {"team": "data", "duetime.workflow": wf["id"], "duetime.ref": "join"}

    (first,) = await _lease(api)
    assert first["task"]["name"] == "extract" and "parents" not in first
    await _complete(api, first, {"rows": 3})
    middle = await _lease(api)
    assert sorted(m["task"]["name"] for m in middle) == ["left", "right"]
    for m in middle:
        (parent,) = m["parents"]
        assert parent["ref"] == "extract" and parent["result"] == {"rows": 3}
        assert parent["status"] == "succeeded" and parent["id"] == nodes["extract"]["task_id"]
        await _complete(api, m, {"side": m["task"]["name"]})
    (last,) = await _lease(api)
    assert [p["ref"] for p in last["parents"]] == ["left", "right"]
    assert [p["result"] for p in last["parents"]] == [{"side": "left"}, {"side": "right"}]
    await _complete(api, last, "done")

    done = (await api.get(f"/v1/workflows/{wf['id']}")).json()
    assert done["status"] == "succeeded" and done["counts"] == {"succeeded": 4}
    assert _by_ref(done)["join"]["result"] == "done"
    assert done["finished_at"] is not None
    listed = (await api.get("/v1/workflows")).json()
    assert [w["id"] for w in listed["items"]] == [wf["id"]]
    assert listed["items"][0]["status"] == "succeeded"
    parents = (await api.get(f"/v1/tasks/{nodes['join']['task_id']}/parents")).json()["items"]
    assert [p["result"] for p in parents] == [{"side": "left"}, {"side": "right"}]
    history = await api.get("/v1/history", params={"label": f"duetime.workflow:{wf['id']}"})
    assert history.status_code == 200, history.text
    assert {e["task_id"] for e in history.json()["items"]} == {n["task_id"] for n in wf["nodes"]}


async def test_a_parents_failure_fails_runs_or_cancels_each_child_by_its_policy(
    api: httpx.AsyncClient,
) -> None:
    wf = await _create(
        api,
        {
            "defaults": {"target": WORKER},
            "nodes": [
                {"ref": "a", "name": "a"},
                {"ref": "fails", "name": "fails", "depends_on": ["a"]},
                {"ref": "runs", "name": "runs", "depends_on": ["a"], "on_parent_failure": "run"},
                {"ref": "cancels", "depends_on": ["a"], "on_parent_failure": "cancel"},
                {"ref": "after", "depends_on": ["fails"]},
                {"ref": "after_cancel", "depends_on": ["cancels"], "on_parent_failure": "run"},
            ],
        },
    )
    (a,) = await _lease(api)
    await _fail(api, a, "boom")
    nodes = _by_ref((await api.get(f"/v1/workflows/{wf['id']}")).json())
    assert nodes["a"]["status"] == "failed"
    assert nodes["fails"]["status"] == "failed" and nodes["after"]["status"] == "failed"
    assert nodes["cancels"]["status"] == "cancelled"
    assert nodes["runs"]["status"] == "ready" and nodes["after_cancel"]["status"] == "ready"
    leased = {m["task"]["name"] or m["task"]["id"]: m for m in await _lease(api)}
    seen = leased["runs"]["parents"][0]
    assert seen["status"] == "failed" and seen["error"] == "boom" and seen["result"] is None
    assert (await api.get(f"/v1/workflows/{wf['id']}")).json()["status"] == "running"


async def test_cancel_ends_every_waiting_node_and_replay_runs_the_failed_ones_again(
    api: httpx.AsyncClient,
) -> None:
    wf = await _create(api, DIAMOND)
    nodes = _by_ref(wf)
    (first,) = await _lease(api)
    await _fail(api, first, "flaky")
    failed = (await api.get(f"/v1/workflows/{wf['id']}")).json()
    assert failed["status"] == "failed" and failed["counts"] == {"failed": 4}

    replayed = (await api.post(f"/v1/workflows/{wf['id']}/replay")).json()
    again = _by_ref(replayed)
    assert replayed["status"] == "running"
    assert again["extract"]["status"] == "ready"
    assert {again[r]["status"] for r in ("left", "right", "join")} == {"blocked"}
    (first,) = await _lease(api)
    await _complete(api, first, 1)
    assert {m["task"]["name"] for m in await _lease(api)} == {"left", "right"}

    cancelled = (await api.post(f"/v1/workflows/{wf['id']}/cancel")).json()
    after = _by_ref(cancelled)
    assert after["join"]["status"] == "cancelled" and after["extract"]["status"] == "succeeded"
    running = (await api.get(f"/v1/tasks/{nodes['left']['task_id']}")).json()
    assert running["status"] == "running" and running["cancel_requested"] is True


async def test_a_cycle_or_a_dangling_ref_is_a_422_naming_the_node(api: httpx.AsyncClient) -> None:
    cycle = {
        "defaults": {"target": WORKER},
        "nodes": [
            {"ref": "a"},
            {"ref": "b", "depends_on": ["c"]},
            {"ref": "c", "depends_on": ["b"]},
        ],
    }
    problem = assert_problem(await api.post("/v1/workflows", json=cycle), 422, "nodes.1.depends_on")
    assert "b → c → b" in str(problem["detail"]) or "c → b → c" in str(problem["detail"])
    dangling = {"defaults": {"target": WORKER}, "nodes": [{"ref": "a", "depends_on": ["zz"]}]}
    problem = assert_problem(
        await api.post("/v1/workflows", json=dangling), 422, "nodes.0.depends_on"
    )
    assert "'zz'" in str(problem["detail"])
    twice = {"defaults": {"target": WORKER}, "nodes": [{"ref": "a"}, {"ref": "a"}]}
    assert_problem(await api.post("/v1/workflows", json=twice), 422, "nodes.1.ref")
    no_target = {"nodes": [{"ref": "a"}, {"ref": "b", "target": {"type": "http"}}]}
    assert_problem(await api.post("/v1/workflows", json=no_target), 422, "nodes.0.target")
    bad_default = {"defaults": {"ref": "x"}, "nodes": [{"ref": "a", "target": WORKER}]}
    assert_problem(await api.post("/v1/workflows", json=bad_default), 422, "defaults")
    assert (await api.get("/v1/tasks")).json()["items"] == []


async def test_the_same_idempotency_key_is_the_same_workflow(api: httpx.AsyncClient) -> None:
    body = {**DIAMOND, "idempotency_key": "nightly-1"}
    first = await _create(api, body)
    again = await _create(api, body, status=200)
    assert again["id"] == first["id"] and len(again["nodes"]) == 4
    other = {**body, "name": "another"}
    assert_problem(await api.post("/v1/workflows", json=other), 409)
    assert len((await api.get("/v1/tasks")).json()["items"]) == 4
