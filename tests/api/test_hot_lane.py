"""The hot routes answered in front of FastAPI's stack (duetime.api.hot_lane): they reach the
route the router would pick, and every answer — success, problem, refusal, crash — is the one
FastAPI's stack gives for the same request, metrics included."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest
from api_helpers import TenantKey, assert_problem, case
from fastapi import FastAPI
from starlette.types import Receive, Scope, Send

from duetime.api.app import create_app
from duetime.api.hot_lane import HOT_ROUTES, HotLane
from duetime.config import Settings
from duetime.metrics import REGISTRY
from duetime.observe import tracing
from duetime.store import Store

LEASE = "00000000-0000-4000-8000-000000000000"


def _lane(app: FastAPI) -> HotLane:
    lane = app.build_middleware_stack()
    assert isinstance(lane, HotLane)
    return lane


def _sample(path: str) -> str:
    """A concrete path for a route template."""
    return path.replace("{name}", "q").replace("{lease_id}", LEASE)


def _via_fastapi(app: FastAPI, lane: HotLane, seen: list[Scope]) -> Any:
    """An ASGI app that sends every request through FastAPI's stack behind the lane, keeping
    the scopes it saw (the router writes the route it picked into them)."""

    async def asgi(scope: Scope, receive: Receive, send: Send) -> None:
        scope["app"] = app  # what Starlette.__call__ sets before its middleware stack
        seen.append(scope)
        await lane.rest(scope, receive, send)

    return asgi


async def test_each_hot_path_is_one_the_router_sends_to_the_same_route(app: FastAPI) -> None:
    lane = _lane(app)
    seen: list[Scope] = []
    transport = httpx.ASGITransport(app=_via_fastapi(app, lane, seen))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
        for method, template in HOT_ROUTES:
            with case(template):
                await c.request(method, _sample(template), json={})
                route = seen[-1]["route"]
                assert route.path == template
                hot = lane._static.get((method, template)) or next(
                    h for m, p, h in lane._patterns if m == method and p.match(_sample(template))
                )
                assert hot.route.endpoint is route.endpoint


def _same(lane: httpx.Response, fastapi: httpx.Response) -> None:
    assert lane.status_code == fastapi.status_code, (lane.text, fastapi.text)
    skip = {"date", "server"}
    assert {k: v for k, v in lane.headers.items() if k not in skip} == {
        k: v for k, v in fastapi.headers.items() if k not in skip
    }
    if lane.headers.get("content-type") == "application/problem+json":
        assert lane.json() == fastapi.json()


async def test_answers_match_fastapis_stack(
    app: FastAPI, client: httpx.AsyncClient, tenant: TenantKey
) -> None:
    lane = _lane(app)
    transport = httpx.ASGITransport(app=_via_fastapi(app, lane, []))
    auth = tenant.headers
    lease_body = {"max_tasks": 1, "wait_seconds": 0, "worker_id": "w1"}
    cases: list[tuple[str, str, dict[str, Any]]] = [
        ("POST", "/v1/tasks", {"json": {"target": {"type": "worker"}}, "headers": auth}),
        ("POST", "/v1/tasks", {"json": {"target": {"type": "worker"}, "priority": "x"}}),
        ("POST", "/v1/tasks?wait=1", {"json": {"target": {"type": "worker"}}}),
        ("POST", "/v1/tasks", {"content": b"{", "headers": {"content-type": "application/json"}}),
        ("POST", "/v1/tasks", {"json": {"target": {"type": "worker"}}, "headers": {}}),
        ("POST", "/v1/tasks/batch", {"json": {"tasks": [{"target": {"type": "worker"}}] * 2}}),
        ("POST", "/v1/tasks/batch", {"json": {"tasks": [{"target": {}}]}}),
        ("POST", "/v1/queues/q/lease", {"json": lease_body}),
        ("POST", "/v1/queues/q/lease", {"json": {**lease_body, "max_tasks": 0}}),
        ("POST", "/v1/queues/a%2Fb/lease", {"json": lease_body}),  # not one segment: 404
        ("POST", "/v1/leases/complete", {"json": {"leases": [{"lease_id": LEASE}]}}),
        ("POST", "/v1/leases/fail", {"json": {"leases": [{"lease_id": "nope"}]}}),
        ("POST", f"/v1/leases/{LEASE}/heartbeat", {"json": {"extend_seconds": 30}}),
        ("GET", "/v1/queues/q/lease", {}),  # another method: FastAPI's 405 either way
    ]
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as fastapi:
        for method, path, kwargs in cases:
            with case((method, path, kwargs)):
                kwargs.setdefault("headers", auth)
                _same(
                    await client.request(method, path, **kwargs),
                    await fastapi.request(method, path, **kwargs),
                )


def _count(route: str, status: str) -> float:
    labels = {"method": "POST", "route": route, "status": status}
    return REGISTRY.get_sample_value("duetime_http_requests_total", labels) or 0.0


async def test_hot_requests_are_counted_under_their_route_template(
    api: httpx.AsyncClient,
) -> None:
    before = _count("/v1/queues/{name}/lease", "200"), _count("/v1/tasks", "201")
    await api.post("/v1/queues/q/lease", json={"max_tasks": 1, "wait_seconds": 0, "worker_id": "w"})
    await api.post("/v1/tasks", json={"target": {"type": "worker"}})
    after = _count("/v1/queues/{name}/lease", "200"), _count("/v1/tasks", "201")
    assert after == (before[0] + 1, before[1] + 1)


async def test_a_crash_in_a_hot_route_is_a_bare_500_and_reaches_the_server(
    app: FastAPI, tenant: TenantKey, monkeypatch: pytest.MonkeyPatch
) -> None:
    from duetime.api.routes import tasks

    async def explode(*_: object) -> None:
        raise RuntimeError("secret internals")

    monkeypatch.setattr(tasks, "_create", explode)
    quiet = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(
        transport=quiet, base_url="http://127.0.0.1", headers=tenant.headers
    ) as c:
        resp = await c.post("/v1/tasks", json={"target": {"type": "worker"}})
    problem = assert_problem(resp, 500)
    assert problem["type"] == "urn:duetime:problem:internal"
    assert "secret" not in resp.text
    loud = httpx.ASGITransport(app=app)  # re-raised, as Starlette does, so uvicorn logs it
    async with httpx.AsyncClient(
        transport=loud, base_url="http://127.0.0.1", headers=tenant.headers
    ) as c:
        with pytest.raises(RuntimeError, match="secret internals"):
            await c.post("/v1/tasks", json={"target": {"type": "worker"}})


def test_tracing_does_not_change_which_code_serves_a_request(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    for enabled in (True, False):
        monkeypatch.setattr(tracing, "ENABLED", enabled)
        assert isinstance(create_app(Settings(), store).build_middleware_stack(), HotLane)


def test_the_lane_refuses_a_hot_route_that_is_not_lean() -> None:
    from fastapi import APIRouter

    from duetime.api.hot_lane import hot_lane
    from duetime.api.lean import LeanRoute

    router = APIRouter(route_class=LeanRoute)

    @router.post("/v1/tasks")
    async def create(wait: int = 0) -> None:  # a query parameter: FastAPI's handler
        return None

    with pytest.raises(LookupError, match=re.escape("/v1/tasks is not a lean route")):
        hot_lane(FastAPI(), router.routes, [], {})
    with pytest.raises(LookupError, match="hot routes not found"):
        hot_lane(FastAPI(), [], [], {})


async def test_in_dev_mode_the_lane_keeps_the_guard(store: Store) -> None:
    app = create_app(Settings(), store)  # no admin token: dev mode, loopback only
    lane = _lane(app)
    cases: list[tuple[str, dict[str, Any]]] = [
        ("/v1/tasks", {"json": {"target": {"type": "worker"}}, "headers": {"host": "evil.test"}}),
        ("/v1/tasks", {"content": b"{}", "headers": {"content-type": "text/plain"}}),
        ("/v1/tasks", {"json": {"target": {"type": "worker"}}}),
    ]
    transport = httpx.ASGITransport(app=_via_fastapi(app, lane, []))
    async with (
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as c,
        httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as fastapi,
    ):
        statuses = []
        for path, kwargs in cases:
            with case((path, kwargs)):
                answer = await c.post(path, **kwargs)
                _same(answer, await fastapi.post(path, **kwargs))
                statuses.append(answer.status_code)
    assert statuses == [421, 415, 201]


async def test_a_mounted_app_leaves_routing_to_fastapi(app: FastAPI, tenant: TenantKey) -> None:
    # Under a root_path the router strips the prefix; the lane does not try to.
    lane = _lane(app)
    served: list[str] = []
    rest = lane.rest

    async def counted(scope: Scope, receive: Receive, send: Send) -> None:
        served.append(scope["path"])
        await rest(scope, receive, send)

    lane.rest = counted
    app.middleware_stack = lane
    for root, path in [("", "/v1/tasks"), ("/api", "/api/v1/tasks")]:
        transport = httpx.ASGITransport(app=app, root_path=root)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
            created = await c.post(
                path, json={"target": {"type": "worker"}}, headers=tenant.headers
            )
        assert created.status_code == 201, created.text
    assert served == ["/api/v1/tasks"]  # the first went through the lane
