"""/healthz, /readyz, /metrics, OpenAPI, and problems for an unreachable store or a crash."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
from api_helpers import TenantKey, assert_problem, case
from fastapi import APIRouter

from duetime.api.app import create_app
from duetime.config import Settings
from duetime.errors import ConfigError
from duetime.store import Store, store_from_url

WORKER = {"type": "worker"}


async def test_healthz(client: httpx.AsyncClient) -> None:
    resp = await client.get("/healthz")
    assert resp.status_code == 200 and resp.json() == {"status": "ok"}


async def test_readyz(client: httpx.AsyncClient) -> None:
    resp = await client.get("/readyz")
    assert resp.status_code == 200 and resp.json() == {"status": "ready"}


async def test_readyz_with_pending_migrations(settings: Settings, sqlite_url: str) -> None:
    store = store_from_url(sqlite_url)
    await store.open()  # not migrated
    try:
        app = create_app(settings, store)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
            resp = await c.get("/readyz")
            problem = assert_problem(resp, 503)
            assert "migrations pending" in str(problem["detail"])
            assert resp.headers["retry-after"]
    finally:
        await store.close()


async def test_metrics(api: httpx.AsyncClient) -> None:
    await api.post("/v1/tasks", json={"target": WORKER, "queue": "metered"})
    await api.post("/v1/tasks", json={"target": WORKER, "queue": "metered"})
    resp = await api.get("/metrics", headers={"Authorization": ""})
    assert resp.status_code == 200
    assert resp.headers["content-type"].startswith("text/plain")
    text = resp.text
    assert 'duetime_tasks{queue="metered",status="ready"} 2.0' in text
    for name in ("duetime_due_lag_seconds", "duetime_attempts_total", "duetime_is_leader"):
        assert name in text


async def test_store_closed_is_503_with_retry_after(
    client: httpx.AsyncClient, tenant: TenantKey, store: Store
) -> None:
    await store.close()
    for method, path in [
        ("POST", "/v1/tasks"),
        ("GET", "/v1/tasks"),
        ("GET", "/v1/tenant"),
        ("GET", "/readyz"),
    ]:
        json = {"target": WORKER} if method == "POST" else None
        resp = await client.request(method, path, json=json, headers=tenant.headers)
        problem = assert_problem(resp, 503)
        assert int(resp.headers["retry-after"]) > 0
        assert "Traceback" not in resp.text
        assert "store" in str(problem["detail"])
    # Metrics still render (the task gauge is left as it was), and count the outage.
    metrics = await client.get("/metrics")
    assert metrics.status_code == 200
    assert 'duetime_store_unavailable_total{component="api"}' in metrics.text
    assert (await client.get("/healthz")).status_code == 200


async def test_unreachable_postgres_is_503(settings: Settings) -> None:
    # A loopback port nothing listens on: the store cannot connect.
    store = store_from_url("postgresql://postgres@127.0.0.1:9/none")
    app = create_app(settings, store)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
        resp = await c.get("/readyz")
        assert_problem(resp, 503)
        assert resp.headers["retry-after"]
        resp = await c.get("/v1/tasks", headers={"Authorization": "Bearer dt_x_y"})
        assert_problem(resp, 503)


async def test_unexpected_error_is_a_bare_500(settings: Settings, store: Store) -> None:
    app = create_app(settings, store)
    boom = APIRouter()

    @boom.get("/boom")
    async def explode() -> None:
        raise RuntimeError("secret internals")

    @boom.get("/misconfigured")
    async def misconfigured() -> None:
        raise ConfigError("secret config")

    app.include_router(boom)
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
        for path, secret in [("/boom", "secret internals"), ("/misconfigured", "secret config")]:
            with case(path):
                resp = await c.get(path)
                problem = assert_problem(resp, 500)
                assert secret not in resp.text
                assert problem["type"] == "urn:duetime:problem:internal"


async def test_openapi_and_docs(client: httpx.AsyncClient) -> None:
    spec = (await client.get("/openapi.json")).json()
    assert spec["info"]["title"] == "duetime"
    assert spec["info"]["version"]
    paths = spec["paths"]
    for path in (
        "/v1/tasks",
        "/v1/tasks/batch",
        "/v1/tasks/{task_id}",
        "/v1/tasks/{task_id}/cancel",
        "/v1/tasks/{task_id}/retry",
        "/v1/tasks/{task_id}/attempts",
        "/v1/tenant",
        "/v1/tenant/signing-secrets/rotate",
        "/v1/admin/tenants",
        "/v1/admin/tenants/{tenant_id}/keys",
        "/v1/admin/keys/{key_id}",
        "/healthz",
        "/readyz",
        "/metrics",
    ):
        assert path in paths, path
    schemas = spec["components"]["schemas"]
    assert "TaskCreate" in schemas and "ProblemOut" in schemas and "TaskOut" in schemas
    # Every 422 is documented as a problem, not as FastAPI's default error shape.
    assert "HTTPValidationError" not in schemas
    for path, body in [
        ("/v1/tasks", "TaskCreate"),
        ("/v1/tasks/batch", "TaskBatchCreate"),
        ("/v1/admin/tenants", "TenantCreateIn"),
        ("/v1/tenant/signing-secrets/rotate", "RotateIn"),
    ]:
        content = paths[path]["post"]["requestBody"]["content"]
        assert content["application/json"]["schema"]["$ref"].endswith("/" + body)
    assert paths["/v1/tasks"]["post"]["security"] == [{"ApiKey": []}]
    assert paths["/v1/admin/tenants"]["post"]["security"] == [{"AdminToken": []}]
    assert "security" not in paths["/healthz"]["get"]
    # Every reference resolves.
    assert {ref.rsplit("/", 1)[1] for ref in _refs(spec)} <= set(schemas)
    create = paths["/v1/tasks"]["post"]["responses"]
    assert create["422"]["content"]["application/problem+json"]["schema"]["$ref"].endswith(
        "/ProblemOut"
    )
    docs = await client.get("/docs")
    assert docs.status_code == 200 and "swagger" in docs.text.lower()


async def test_responses_match_their_documented_shapes(api: httpx.AsyncClient) -> None:
    from duetime.api.schemas import TaskListOut, TaskOut, TenantOut

    for status, extra in [("ready", {}), ("scheduled", {"delay_seconds": 60})]:
        body: dict[str, object] = {"target": WORKER, "payload": {"x": 1}, **extra}
        task = (await api.post("/v1/tasks", json=body)).json()
        assert set(task) == set(TaskOut.model_fields)
        TaskOut.model_validate(task)
        assert task["status"] == status
    page = (await api.get("/v1/tasks")).json()
    assert set(page) == set(TaskListOut.model_fields)
    TaskListOut.model_validate(page)
    tenant = (await api.get("/v1/tenant")).json()
    assert set(tenant) == set(TenantOut.model_fields)
    TenantOut.model_validate(tenant)


def _refs(node: object) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref":
                yield str(value)
            else:
                yield from _refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from _refs(item)
