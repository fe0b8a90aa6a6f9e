"""Unknown query parameters are a 422 problem naming them, on every API call, over both stores;
the known ones keep working."""

from __future__ import annotations

import httpx
from api_helpers import assert_problem


async def test_misspelt_filter_is_refused_and_names_the_parameter(api: httpx.AsyncClient) -> None:
    made = await api.post("/v1/tasks", json={"target": {"type": "worker"}})
    assert made.status_code == 201
    problem = assert_problem(await api.get("/v1/tasks?stauts=failed"), 422, "stauts")
    assert "status" in str(problem["detail"])  # says what the call takes
    ok = await api.get("/v1/tasks?status=failed&limit=5")
    assert ok.status_code == 200 and ok.json()["items"] == []


async def test_every_kind_of_call_refuses_unknown_parameters(api: httpx.AsyncClient) -> None:
    task = (await api.post("/v1/tasks", json={"target": {"type": "worker"}})).json()
    assert_problem(await api.get(f"/v1/tasks/{task['id']}?verbose=1"), 422, "verbose")
    assert_problem(await api.get("/v1/schedules?pasued=true"), 422, "pasued")
    assert_problem(await api.get("/v1/queues?x=1"), 422, "x")
    assert_problem(
        await api.post("/v1/tasks?dry_run=1", json={"target": {"type": "worker"}}), 422, "dry_run"
    )
    # Nothing was created by the refused create.
    assert len((await api.get("/v1/tasks")).json()["items"]) == 1
    assert (await api.get("/healthz?probe=1")).status_code == 200  # not the /v1 API
