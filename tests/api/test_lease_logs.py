"""Logs a worker attaches to an attempt (SPEC §8 "Audit trail"): ``logs`` on lease complete and
fail, single and batch, kept with the attempt (at most 64 KiB of UTF-8, cut, never refused) and
shown by ``GET /v1/tasks/{id}/attempts`` and ``GET /v1/history``, on both stores (on PostgreSQL
completions take the by-lease-id fast path, with and without logs)."""

from __future__ import annotations

import httpx
from api_helpers import assert_problem
from lease_helpers import NO_JITTER, attempts, create, lease, task

from duetime.clock import FakeClock
from duetime.history.retention import RetentionPolicy
from duetime.store import Store
from duetime.store.recorded import LOGS_LIMIT_BYTES
from duetime.text import REPLACEMENT

DAY = 86400.0


async def test_complete_and_fail_keep_their_logs_on_the_attempt(
    api: httpx.AsyncClient, store: Store, clock: FakeClock
) -> None:
    made = await create(api, retry=NO_JITTER)
    (first,) = await lease(api, worker_id="w-1")
    failed = await api.post(
        f"/v1/leases/{first['lease_id']}/fail",
        json={"error": "boom", "logs": "step 1 ok\nstep 2 failed\n"},
    )
    assert failed.status_code == 200, failed.text
    assert failed.json()["task_status"] == "retrying"
    clock.advance(1)  # the backoff (NO_JITTER: 1 s), then the promoter makes it ready
    assert await store.task_promote_due(10) == 1
    (second,) = await lease(api, worker_id="w-2")
    done = await api.post(
        f"/v1/leases/{second['lease_id']}/complete",
        json={"result": {"n": 2}, "logs": "all\tgood"},
    )
    assert done.status_code == 200, done.text
    assert done.json()["task_status"] == "succeeded"
    got = await attempts(api, made["id"])
    assert [(a["number"], a["outcome"], a["logs"], a["worker"]) for a in got] == [
        (1, "failed", "step 1 ok\nstep 2 failed\n", "w-1"),
        (2, "succeeded", "all\tgood", "w-2"),
    ]
    assert all(a["response"] is None for a in got)  # only webhook attempts have one
    assert (await task(api, made["id"]))["result"] == {"n": 2}

    history = await api.get("/v1/history", params={"task_id": made["id"], "kind": "attempt"})
    assert history.status_code == 200, history.text
    by_number = {e["attempt"]: e for e in history.json()["items"]}
    assert by_number[1]["logs"] == "step 1 ok\nstep 2 failed\n"
    assert by_number[2]["logs"] == "all\tgood"


async def test_completions_without_logs_record_none(api: httpx.AsyncClient) -> None:
    made = await create(api)
    (got,) = await lease(api)
    resp = await api.post(f"/v1/leases/{got['lease_id']}/complete", json={"result": 1})
    assert resp.status_code == 200, resp.text
    (attempt,) = await attempts(api, made["id"])
    assert (attempt["outcome"], attempt["logs"]) == ("succeeded", None)
    empty = await api.post(f"/v1/leases/{got['lease_id']}/complete")  # stale by now
    assert empty.status_code == 409


async def test_batch_forms_keep_each_items_logs(api: httpx.AsyncClient) -> None:
    made = [await create(api, retry=NO_JITTER) for _ in range(4)]
    leases = await lease(api, max_tasks=4)
    by_task = {x["task"]["id"]: x["lease_id"] for x in leases}
    ids = [t["id"] for t in made]
    completed = await api.post(
        "/v1/leases/complete",
        json={
            "items": [
                {"lease_id": by_task[ids[0]], "result": 1, "logs": "first"},
                {"lease_id": by_task[ids[1]], "result": 2},
            ]
        },
    )
    assert completed.status_code == 200, completed.text
    assert [i["status"] for i in completed.json()["items"]] == ["ok", "ok"]
    failed = await api.post(
        "/v1/leases/fail",
        json={
            "items": [
                {"lease_id": by_task[ids[2]], "error": "e", "logs": "third\n"},
                {"lease_id": by_task[ids[3]], "error": "e", "retryable": False},
            ]
        },
    )
    assert failed.status_code == 200, failed.text
    assert [i["task_status"] for i in failed.json()["items"]] == ["retrying", "failed"]
    logs = [(await attempts(api, task_id))[0]["logs"] for task_id in ids]
    assert logs == ["first", None, "third\n", None]


async def test_logs_past_64_kib_are_cut_not_refused(api: httpx.AsyncClient) -> None:
    made = [await create(api) for _ in range(3)]
    leases = await lease(api, max_tasks=3)
    by_task = {x["task"]["id"]: x["lease_id"] for x in leases}
    ascii_logs = "a" * (LOGS_LIMIT_BYTES + 5000)
    wide_logs = "\u00e9" * LOGS_LIMIT_BYTES  # 2 bytes each: twice the limit
    hostile = "ok\x00\x01 line\n"
    one = await api.post(f"/v1/leases/{by_task[made[0]['id']]}/complete", json={"logs": ascii_logs})
    assert one.status_code == 200, one.text
    two = await api.post(
        f"/v1/leases/{by_task[made[1]['id']]}/fail", json={"error": "e", "logs": wide_logs}
    )
    assert two.status_code == 200, two.text
    three = await api.post(
        "/v1/leases/complete",
        json={"items": [{"lease_id": by_task[made[2]["id"]], "logs": hostile}]},
    )
    assert three.status_code == 200, three.text
    kept = [(await attempts(api, t["id"]))[0]["logs"] for t in made]
    assert kept[0] == "a" * LOGS_LIMIT_BYTES
    assert kept[1] == "\u00e9" * (LOGS_LIMIT_BYTES // 2)
    assert len(kept[1].encode()) == LOGS_LIMIT_BYTES
    assert kept[2] == f"ok{REPLACEMENT}{REPLACEMENT} line\n"


async def test_logs_must_be_text_of_bounded_size(api: httpx.AsyncClient) -> None:
    await create(api)
    (got,) = await lease(api)
    path = f"/v1/leases/{got['lease_id']}/complete"
    assert_problem(await api.post(path, json={"logs": 5}), 422, "logs")
    assert_problem(await api.post(path, json={"logs": "x" * 1_000_001}), 422, "logs")
    fail = f"/v1/leases/{got['lease_id']}/fail"
    assert_problem(await api.post(fail, json={"error": "e", "logs": ["a"]}), 422, "logs")
    ok = await api.post(path, json={"logs": None})  # null: no logs
    assert ok.status_code == 200, ok.text


async def test_logs_of_a_task_with_dependents_and_after_retirement(
    api: httpx.AsyncClient, store: Store, clock: FakeClock
) -> None:
    # A parent's completion takes the general path on every store (it settles dependents).
    parent = await create(api, queue="mail")
    child = await create(api, queue="mail", depends_on=[parent["id"]])
    (got,) = await lease(api, "mail")
    assert got["task"]["id"] == parent["id"]
    resp = await api.post(f"/v1/leases/{got['lease_id']}/complete", json={"logs": "parent ran"})
    assert resp.status_code == 200, resp.text
    assert (await task(api, child["id"]))["status"] == "ready"
    (child_lease,) = await lease(api, "mail")
    resp = await api.post(
        f"/v1/leases/{child_lease['lease_id']}/fail",
        json={"error": "nope", "retryable": False, "logs": "child failed\n"},
    )
    assert resp.status_code == 200, resp.text

    clock.advance(40 * DAY)
    defaults = RetentionPolicy(7 * DAY, 30 * DAY, 7 * DAY)
    assert await store.task_retention_sweep(defaults, 100) == 2
    assert_problem(await api.get(f"/v1/tasks/{parent['id']}"), 404)
    # The history keeps the attempts, logs included.
    assert [a["logs"] for a in await attempts(api, parent["id"])] == ["parent ran"]
    assert [a["logs"] for a in await attempts(api, child["id"])] == ["child failed\n"]
