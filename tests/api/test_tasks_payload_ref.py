"""``payload_ref`` instead of a payload: kept and handed on as given (read back and leased), refused
with a 422 naming it beside a payload, past 2,048 characters or with header-unsafe text."""

from __future__ import annotations

import httpx
from api_helpers import assert_problem

WORKER = {"type": "worker"}


async def test_payload_ref_instead_of_a_payload(api: httpx.AsyncClient) -> None:
    ref = "vault://secrets/customer-42/report"
    made = await api.post("/v1/tasks", json={"target": WORKER, "payload_ref": ref})
    assert made.status_code == 201, made.text
    assert made.json()["payload_ref"] == ref and made.json()["payload"] is None
    got = (await api.get(f"/v1/tasks/{made.json()['id']}")).json()
    assert got["payload_ref"] == ref
    both = {"target": WORKER, "payload": {"a": 1}, "payload_ref": ref}
    assert_problem(await api.post("/v1/tasks", json=both), 422, "payload_ref")
    too_long = {"target": WORKER, "payload_ref": "x" * 2049}
    assert_problem(await api.post("/v1/tasks", json=too_long), 422, "payload_ref")
    header_unsafe = {"target": WORKER, "payload_ref": "a\r\nX-Evil: 1"}
    assert_problem(await api.post("/v1/tasks", json=header_unsafe), 422, "payload_ref")
    leased = await api.post("/v1/queues/default/lease", json={"worker_id": "w", "wait_seconds": 0})
    assert leased.status_code == 200, leased.text
    assert leased.json()["leases"][0]["task"]["payload_ref"] == ref
