"""/healthz, /readyz, /metrics, OpenAPI, and problems for an unreachable store or a crash."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

import httpx
import pytest
from api_helpers import ADMIN, ADMIN_TOKEN, TenantKey, assert_problem, case
from fastapi import APIRouter

from duetime import metrics
from duetime.api.app import create_app
from duetime.config import Settings
from duetime.errors import ConfigError
from duetime.store import Store, store_from_url
from duetime.store.postgres.schema import connect as pg_connect
from duetime.store.sqlite.backend import SqliteStore

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


@pytest.fixture(autouse=True)
def _no_queue_series() -> Iterator[None]:
    """Queue series are process-wide: each test starts and ends without any."""
    metrics.forget_queues(set())
    yield
    metrics.forget_queues(set())


async def test_metrics(api: httpx.AsyncClient, tenant: TenantKey) -> None:
    await api.post("/v1/tasks", json={"target": WORKER, "queue": "metered"})
    await api.post("/v1/tasks", json={"target": WORKER, "queue": "metered"})
    resp = await api.get("/metrics", headers=ADMIN)
    assert resp.status_code == 200
    assert resp.headers["content-type"].startswith("text/plain")
    text = resp.text
    line = f'duetime_tasks{{queue="metered",status="ready",tenant="{tenant.id}"}} 2.0'
    assert line in text
    for name in ("duetime_due_lag_seconds", "duetime_attempts_total", "duetime_is_leader"):
        assert name in text


async def test_metrics_need_the_admin_or_the_metrics_token(store: Store, tenant: TenantKey) -> None:
    scraper = "m" * 40
    app = create_app(Settings(admin_token=ADMIN_TOKEN, metrics_token=scraper), store)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://duetime.test") as c:
        for headers in ({}, tenant.headers, {"Authorization": "Bearer " + "x" * 40}):
            with case(str(headers)):
                resp = await c.get("/metrics", headers=headers)
                assert_problem(resp, 401)
                assert resp.headers["www-authenticate"] == "Bearer"
                assert "duetime_tasks" not in resp.text
        for token in (scraper, ADMIN_TOKEN):
            resp = await c.get("/metrics", headers={"Authorization": f"Bearer {token}"})
            assert resp.status_code == 200 and "duetime_is_leader" in resp.text
    # Without a metrics token only the admin token opens it; in dev mode it is open.
    app = create_app(Settings(admin_token=ADMIN_TOKEN), store)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://duetime.test"
    ) as c:
        assert_problem(await c.get("/metrics", headers={"Authorization": "Bearer "}), 401)
    app = create_app(Settings(admin_token=None), store)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1"
    ) as c:
        assert (await c.get("/metrics")).status_code == 200


async def _set_counter(store: Store, store_url: str, tenant_id: str, queue: str, n: int) -> None:
    """Overwrite a maintained count behind the store's back (folded first on PostgreSQL)."""
    await store.task_counts_fold(10_000)
    if isinstance(store, SqliteStore):
        conn = sqlite3.connect(store.path)
        with conn:
            conn.execute(
                "UPDATE task_counts SET n = ? WHERE tenant_id = ? AND queue = ?",
                (n, tenant_id, queue),
            )
        conn.close()
        return
    pg = await pg_connect(store_url)
    try:
        await pg.execute(
            "UPDATE task_counts SET n = $1 WHERE tenant_id = $2 AND queue = $3", n, tenant_id, queue
        )
    finally:
        await pg.close()


async def test_metrics_and_queue_figures_read_the_counters(
    api: httpx.AsyncClient, tenant: TenantKey, store: Store, store_url: str
) -> None:
    """Neither /metrics nor the queue figures count the task table: a counter set behind the
    store's back is what both report (the leader's recount would correct it)."""
    await api.post("/v1/tasks", json={"target": WORKER, "queue": "counted"})
    await _set_counter(store, store_url, tenant.id, "counted", 42)
    text = (await api.get("/metrics", headers=ADMIN)).text
    assert f'queue="counted",status="ready",tenant="{tenant.id}"}} 42.0' in text
    one = (await api.get("/v1/queues/counted")).json()
    assert one["counts"]["ready"] == 42
    (listed,) = [q for q in (await api.get("/v1/queues")).json()["items"] if q["name"] == "counted"]
    assert listed["counts"]["ready"] == 42


async def test_queue_series_are_capped_and_forgotten(
    api: httpx.AsyncClient, tenant: TenantKey, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(metrics, "MAX_QUEUE_SERIES", 3)
    sizes = {"big": 4, "mid": 3, "small": 2, "tiny": 1, "wee": 1}
    for queue, n in sizes.items():
        batch = {"tasks": [{"target": WORKER, "queue": queue} for _ in range(n)]}
        assert (await api.post("/v1/tasks/batch", json=batch)).status_code in (200, 201)
    text = (await api.get("/metrics", headers=ADMIN)).text
    tasks = [line for line in text.splitlines() if line.startswith("duetime_tasks{")]
    t = tenant.id
    assert sorted(tasks) == sorted(
        [
            f'duetime_tasks{{queue="big",status="ready",tenant="{t}"}} 4.0',
            f'duetime_tasks{{queue="mid",status="ready",tenant="{t}"}} 3.0',
            f'duetime_tasks{{queue="small",status="ready",tenant="{t}"}} 2.0',
            'duetime_tasks{queue="_other",status="ready",tenant="_other"} 2.0',
        ]
    )
    # Queue-labelled counters: the first three queues seen get series, the rest go to _other
    # (which lives as long as the process: other tests may have counted there).
    other = metrics.ATTEMPTS.labels(metrics.OTHER, "succeeded")
    before = other._value.get()
    for queue in ("a", "b", "c", "d", "e"):
        metrics.child(metrics.ATTEMPTS, queue, "succeeded").inc()
    assert other._value.get() == before + 2
    text = (await api.get("/metrics", headers=ADMIN)).text
    attempts = [line for line in text.splitlines() if line.startswith("duetime_attempts_total{")]
    # The scrape forgot a, b, c (no tasks there), and with them their series.
    assert [line.rsplit(" ", 1)[0] for line in attempts] == [
        'duetime_attempts_total{outcome="succeeded",queue="_other"}'
    ]
    metrics.child(metrics.ATTEMPTS, "big", "succeeded").inc()
    text = (await api.get("/metrics", headers=ADMIN)).text
    assert 'duetime_attempts_total{outcome="succeeded",queue="big"} 1.0' in text


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
    scraped = await client.get("/metrics", headers=ADMIN)
    assert scraped.status_code == 200
    assert 'duetime_store_unavailable_total{component="api"}' in scraped.text
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
