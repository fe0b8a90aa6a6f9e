"""Routes that read their request themselves run without FastAPI's parameter machinery
(duetime.api.lean.LeanRoute): the hot ones are lean, the app depends on nothing the lean handler
would skip, and a lean route still refuses unknown query parameters, reads its path parameters
and answers errors as problems."""

from __future__ import annotations

import httpx
from api_helpers import assert_problem
from fastapi import FastAPI
from fastapi.routing import APIRoute

from duetime.api.app import ROUTERS
from duetime.api.hot_lane import HOT_ROUTES
from duetime.api.lean import LeanRoute, is_lean
from duetime.api.query_guard import reject_unknown_query

HOT = set(HOT_ROUTES)


def test_the_app_depends_on_nothing_but_the_query_guard(app: FastAPI) -> None:
    # The lean handler runs reject_unknown_query itself and nothing else app-wide.
    assert [d.dependency for d in app.router.dependencies] == [reject_unknown_query]


def test_the_hot_routes_are_lean_and_the_others_keep_fastapi() -> None:
    routes = [r for router in ROUTERS for r in router.routes if isinstance(r, APIRoute)]
    lean = {
        (m, r.path)
        for r in routes
        if isinstance(r, LeanRoute) and is_lean(r.dependant)
        for m in r.methods
    }
    assert HOT.issubset(lean), HOT - lean
    # Listing declares query parameters (its filters): FastAPI's own handler reads them.
    assert ("GET", "/v1/tasks") not in lean
    assert any(isinstance(r, LeanRoute) and r.path == "/v1/tasks" for r in routes)


async def test_a_lean_route_reads_path_parameters_and_refuses_unknown_query(
    api: httpx.AsyncClient,
) -> None:
    lease = "00000000-0000-4000-8000-000000000000"
    stale = await api.post(f"/v1/leases/{lease}/heartbeat", json={"extend_seconds": 30})
    assert lease in str(assert_problem(stale, 409)["detail"])  # the path parameter arrived
    assert_problem(await api.post("/v1/queues/q/lease?wait=1", json={}), 422, "wait")
    empty = await api.post(
        "/v1/queues/q/lease", json={"max_tasks": 1, "wait_seconds": 0, "worker_id": "w1"}
    )
    assert empty.status_code == 200 and empty.json() == {"leases": []}
    assert_problem(
        await api.post("/v1/queues/q/lease", json={"max_tasks": 0, "worker_id": "w1"}),
        422,
        "max_tasks",
    )


async def test_a_lean_route_answers_other_methods_405_and_errors_as_problems(
    api: httpx.AsyncClient,
) -> None:
    refused = await api.get("/v1/queues/q/lease")
    assert_problem(refused, 405)
    assert refused.headers["allow"] == "POST"
    bad = await api.post("/v1/tasks", content=b"{", headers={"content-type": "application/json"})
    assert_problem(bad, 400)
