"""Dev mode (no admin token) refuses what a web page could send: foreign Host (DNS rebinding),
foreign Origin, and non-JSON bodies (a cross-site ``text/plain`` POST needs no preflight)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from api_helpers import ADMIN_TOKEN, assert_problem, case

from duetime.api.app import create_app
from duetime.api.guard import host_of, is_json_media_type, is_loopback_origin
from duetime.config import Settings
from duetime.store import Store
from duetime.types import TaskFilter

BODY = b'{"target": {"type": "http", "url": "http://127.0.0.1:9/internal"}}'


@pytest.fixture
async def dev(store: Store) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(Settings(admin_token=None), store)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8080") as c:
        yield c


async def _tasks(store: Store) -> int:
    return len(await store.task_list(TaskFilter(tenant_id="default", limit=100)))


async def test_a_cross_site_text_plain_post_creates_nothing(
    dev: httpx.AsyncClient, store: Store
) -> None:
    for content_type in ("text/plain", "application/x-www-form-urlencoded", None):
        with case(str(content_type)):
            headers = {} if content_type is None else {"Content-Type": content_type}
            resp = await dev.post("/v1/tasks", content=BODY, headers=headers)
            problem = assert_problem(resp, 415)
            assert "application/json" in str(problem["detail"])
    assert await _tasks(store) == 0
    # JSON, and JSON with parameters or a +json type, goes through.
    ok = await dev.post(
        "/v1/tasks", content=BODY, headers={"Content-Type": "application/json; charset=utf-8"}
    )
    assert ok.status_code == 201, ok.text
    assert await _tasks(store) == 1
    # A call without a body needs no content type.
    task_id = ok.json()["id"]
    assert (await dev.post(f"/v1/tasks/{task_id}/cancel")).status_code == 200


async def test_foreign_host_and_origin_are_refused(dev: httpx.AsyncClient, store: Store) -> None:
    json = {"Content-Type": "application/json"}
    for host in ("attacker.example", "attacker.example:8080", "10.0.0.1", "127.0.0.1.evil.test"):
        with case(host):
            resp = await dev.post("/v1/tasks", content=BODY, headers={**json, "Host": host})
            assert_problem(resp, 421)
            assert_problem(await dev.get("/v1/tasks", headers={"Host": host}), 421)
    for origin in ("https://attacker.example", "null", "http://127.0.0.1.evil.test"):
        with case(origin):
            resp = await dev.post("/v1/tasks", content=BODY, headers={**json, "Origin": origin})
            assert_problem(resp, 403)
    assert await _tasks(store) == 0
    for host in ("localhost:8080", "127.0.0.1", "127.1.2.3:9", "[::1]:8080", "LOCALHOST"):
        with case(host):
            resp = await dev.get("/v1/tasks", headers={"Host": host})
            assert resp.status_code == 200, resp.text
    loopback_origin = {**json, "Origin": "http://localhost:3000"}
    assert (await dev.post("/v1/tasks", content=BODY, headers=loopback_origin)).status_code == 201


async def test_with_an_admin_token_the_guard_is_off(store: Store) -> None:
    app = create_app(Settings(admin_token=ADMIN_TOKEN), store)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://duetime.example") as c:
        resp = await c.get("/healthz", headers={"Origin": "https://dash.example"})
        assert resp.status_code == 200


def test_the_parsers() -> None:
    assert host_of("[::1]:8080") == "::1"
    assert host_of("::1") == "::1"
    assert host_of("localhost:80") == "localhost"
    assert is_loopback_origin("http://[::1]:5173")
    assert not is_loopback_origin("file://")
    assert not is_loopback_origin("http://[::1")
    assert is_json_media_type("application/merge-patch+json")
    assert not is_json_media_type("text/json")
