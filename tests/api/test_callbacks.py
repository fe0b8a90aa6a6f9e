"""Callbacks per task: ``on_success``, ``on_failure`` and ``on_end`` tasks made in the transaction
of the end, carrying the outcome; a result over the inline bound travels by reference; children
spawned under a lease are made once, whatever the retries."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from api_helpers import ADMIN_TOKEN, assert_problem
from lease_helpers import WORKER, create, lease

from duetime.config import Settings

Body = dict[str, Any]


@pytest.fixture
def settings() -> Settings:
    """Results up to 256 KiB: one over the 64 KiB inline bound fits."""
    return Settings(admin_token=ADMIN_TOKEN, max_payload_bytes=256 * 1024)


async def _ack(
    api: httpx.AsyncClient, held: Body, result: Any = None, error: str | None = None
) -> None:
    if error is None:
        resp = await api.post(f"/v1/leases/{held['lease_id']}/complete", json={"result": result})
    else:
        resp = await api.post(
            f"/v1/leases/{held['lease_id']}/fail", json={"error": error, "retryable": False}
        )
    assert resp.status_code == 200, resp.text


async def _labelled(api: httpx.AsyncClient, task_id: str) -> list[Body]:
    resp = await api.get("/v1/tasks", params={"label": f"duetime.callback_of:{task_id}"})
    return list(resp.json()["items"])


def _callback(queue: str) -> Body:
    return {"target": WORKER, "queue": queue}


async def test_each_end_makes_the_callbacks_its_status_fires(api: httpx.AsyncClient) -> None:
    good = await create(
        api,
        name="good",
        on_success=_callback("cb"),
        on_failure=_callback("cb"),
        on_end=_callback("cb"),
    )
    bad = await create(
        api,
        name="bad",
        on_success=_callback("cb"),
        on_failure=_callback("cb"),
        on_end=_callback("cb"),
    )
    for held in await lease(api, max_tasks=10):
        if held["task"]["name"] == "good":
            await _ack(api, held, {"rows": 7})
        else:
            await _ack(api, held, error="HTTP 410: gone")
    made = {t["labels"]["duetime.callback"]: t for t in await _labelled(api, good["id"])}
    assert set(made) == {"on_success", "on_end"}
    body = made["on_success"]["payload"]
    assert body["callback"] == "on_success" and body["task_id"] == good["id"]
    assert body["status"] == "succeeded" and body["result"] == {"rows": 7}
    assert made["on_success"]["queue"] == "cb" and made["on_success"]["name"] == "on_success"
    assert made["on_success"]["status"] == "ready"
    failed = {t["labels"]["duetime.callback"]: t for t in await _labelled(api, bad["id"])}
    assert set(failed) == {"on_failure", "on_end"}
    assert failed["on_failure"]["payload"]["error"] == "HTTP 410: gone"
    assert "result" not in failed["on_failure"]["payload"]
    # The callbacks are tasks: leased and acked like any, in the history.
    delivered = await lease(api, "cb", max_tasks=10)
    assert {x["task"]["name"] for x in delivered} == {"on_success", "on_failure", "on_end"}


async def test_a_cancel_makes_on_end_and_a_parents_failure_makes_on_failure(
    api: httpx.AsyncClient,
) -> None:
    waiting = await create(api, run_at="2099-01-01T00:00:00Z", on_end=_callback("cb"))
    await api.post(f"/v1/tasks/{waiting['id']}/cancel")
    (made,) = await _labelled(api, waiting["id"])
    assert (
        made["payload"]["status"] == "cancelled" and made["labels"]["duetime.callback"] == "on_end"
    )
    parent = await create(api, name="parent")
    child = await create(api, depends_on=[parent["id"]], on_failure=_callback("cb"))
    (held,) = await lease(api)
    await _ack(api, held, error="broken")
    (made,) = await _labelled(api, child["id"])
    assert made["payload"]["status"] == "failed"
    assert made["payload"]["error"] == "a task it depends on failed or was cancelled"


async def test_a_large_result_travels_by_reference(api: httpx.AsyncClient) -> None:
    parent = await create(api, name="big", on_success=_callback("cb"))
    child = await create(api, depends_on=[parent["id"]])
    (held,) = await lease(api)
    large = {"blob": "x" * (70 * 1024)}
    await _ack(api, held, large)
    (leased,) = await lease(api)
    assert leased["task"]["id"] == child["id"]
    (seen,) = leased["parents"]
    assert seen["result"] is None and seen["result_ref"] == f"/v1/tasks/{parent['id']}/result"
    fetched = await api.get(seen["result_ref"])
    assert fetched.json() == large and fetched.headers["duetime-task-status"] == "succeeded"
    (callback,) = await _labelled(api, parent["id"])
    assert callback["payload"]["result_ref"] == seen["result_ref"]
    assert "result" not in callback["payload"]


async def test_a_callback_target_is_checked_like_the_tasks_own(api: httpx.AsyncClient) -> None:
    bad = {"target": WORKER, "on_failure": {"target": {"type": "http", "url": "ftp://x"}}}
    assert_problem(await api.post("/v1/tasks", json=bad), 422, "on_failure.target.url")
    assert (await api.get("/v1/tasks")).json()["items"] == []


async def test_spawned_children_are_made_once_per_call_key(api: httpx.AsyncClient) -> None:
    parent = await create(api, name="fan")
    (held,) = await lease(api)
    spawn = {"tasks": [{"target": WORKER, "name": "leaf", "payload": i} for i in range(300)]}
    url = f"/v1/leases/{held['lease_id']}/children"
    first = await api.post(url, json=spawn)
    assert first.status_code == 201, first.text
    again = await api.post(url, json=spawn)
    assert again.status_code == 200
    assert [t["id"] for t in again.json()["items"]] == [t["id"] for t in first.json()["items"]]
    other = await api.post(url, json={**spawn, "key": "second"})
    assert other.status_code == 201
    children = (await api.get(f"/v1/tasks/{parent['id']}/children")).json()
    assert len(children["items"]) == 600 and children["ended"] is False
    assert {t["labels"]["duetime.parent"] for t in children["items"]} == {parent["id"]}
    # A lease no longer current spawns nothing.
    await _ack(api, held, "spawned")
    assert_problem(await api.post(url, json={**spawn, "key": "late"}), 409)
    keyed = {"tasks": [{"target": WORKER, "idempotency_key": "mine"}]}
    assert_problem(await api.post(url, json=keyed), 422)


async def test_children_waited_for_answer_when_every_child_ended(api: httpx.AsyncClient) -> None:
    parent = await create(api, name="fan")
    (held,) = await lease(api)
    spawn = {"tasks": [{"target": WORKER, "name": "leaf", "queue": "leaves"} for _ in range(20)]}
    made = await api.post(f"/v1/leases/{held['lease_id']}/children", json=spawn)
    assert made.status_code == 201
    waiter = asyncio.create_task(api.get(f"/v1/tasks/{parent['id']}/children", params={"wait": 30}))
    leaves = await lease(api, "leaves", max_tasks=50)
    assert len(leaves) == 20
    body = {"items": [{"lease_id": x["lease_id"], "result": i} for i, x in enumerate(leaves)]}
    assert (await api.post("/v1/leases/complete", json=body)).status_code == 200
    answer = (await waiter).json()
    assert answer["ended"] is True and {t["status"] for t in answer["items"]} == {"succeeded"}
