"""Worker acks with hostile text, on both stores: a NUL or other control character in a ``fail``
error or a ``complete`` result (PostgreSQL's text columns refuse a NUL, SQLite keeps it) is
recorded as the same cleaned, bounded text on both, and the calls answer 200 — never a 500."""

from __future__ import annotations

import httpx
from lease_helpers import attempts, create, lease, task

from duetime.store.recorded import ERROR_LIMIT_BYTES
from duetime.text import clean


async def test_fail_with_a_nul_and_a_huge_error_is_recorded_cleaned(api: httpx.AsyncClient) -> None:
    made = [await create(api, queue="q") for _ in range(3)]
    got = await lease(api, "q", max_tasks=3)
    assert len(got) == 3
    errors = ["worker\x00crashed\x1b[31m", "é" * 300_000, "fine"]
    one = await api.post(f"/v1/leases/{got[0]['lease_id']}/fail", json={"error": errors[0]})
    assert one.status_code == 200, one.text
    items = [
        {"lease_id": g["lease_id"], "error": e} for g, e in zip(got[1:], errors[1:], strict=True)
    ]
    many = await api.post("/v1/leases/fail", json={"items": items})
    assert many.status_code == 200, many.text
    assert [i["task_status"] for i in many.json()["items"]] == ["retrying", "retrying"]
    by_id = {g["task"]["id"]: e for g, e in zip(got, errors, strict=True)}
    for m in made:
        want = clean(by_id[m["id"]], ERROR_LIMIT_BYTES)
        assert (await task(api, m["id"]))["last_error"] == want
        [attempt] = await attempts(api, m["id"])
        assert attempt["error"] == want
    assert (await task(api, made[0]["id"]))["last_error"] == "worker\ufffdcrashed\ufffd[31m"


async def test_complete_with_a_nul_inside_the_result_round_trips(api: httpx.AsyncClient) -> None:
    made = await create(api, queue="q")
    [got] = await lease(api, "q")
    result = {"text": "a\x00b", "nested": ["\x01", "ok"]}
    resp = await api.post(f"/v1/leases/{got['lease_id']}/complete", json={"result": result})
    assert resp.status_code == 200, resp.text
    after = await task(api, made["id"])
    assert (after["status"], after["result"]) == ("succeeded", result)
