"""A NUL character through every text field, alike on both stores: each body field, dictionary
key, query parameter and path segment of the API is sent once with U+0000 in it. Text the API
keeps as data (a task's payload, a worker's result, error and logs) is accepted, everything else
is a 422 naming the field — never a 500 and never a database's own words, so SQLite (which could
store the NUL) and PostgreSQL (which cannot) answer the same."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import asyncpg
import httpx
import orjson
from api_helpers import ADMIN, TenantKey, assert_problem, case
from fastapi import APIRouter, FastAPI
from lease_helpers import lease

from duetime.api.app import create_app
from duetime.api.problems import UNSTORABLE
from duetime.config import Settings
from duetime.errors import ValidationError
from duetime.store import Store

WORKER = {"type": "worker"}
HTTP = {"type": "http", "url": "https://example.com/h", "method": "POST", "headers": {"X-A": "v"}}
AMQP = {"type": "amqp", "url": "amqp://mq.example.com/vh", "exchange": "ex", "routing_key": "rk"}
NATS = {"type": "nats", "url": "nats://nats.example.com", "subject": "orders.new"}
REDIS = {"type": "redis", "url": "redis://redis.example.com", "stream": "orders"}
TEMPLATE = {
    "name": "report",
    "queue": "reports",
    "target": HTTP,
    "payload": {"k": "v", "l": ["x"]},
    "concurrency_key": "ck",
    "labels": {"team": "billing"},
}
DRIVER_WORDS = ("asyncpg", "sqlite", "postgres", "detail:", "escape sequence", "byte sequence")
"""Words of a database driver's own messages, which no problem's text may carry."""

Path = tuple[Any, ...]
"""Where a string sits in a body: keys and indexes; ``("key", k)`` as the last step is the
dictionary key ``k`` itself."""


def leaves(value: Any, path: Path = ()) -> Iterator[Path]:
    """The path of every string and every dictionary key in ``value``."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield (*path, ("key", key))
            yield from leaves(item, (*path, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from leaves(item, (*path, i))
    elif isinstance(value, str):
        yield path


def with_nul(body: Any, path: Path, at: int) -> Any:
    """``body`` with a NUL put into the string (or the key) at ``path``, after its first
    character (``at=1``) or at its end (``at=-1``: past what a scheme or prefix check reads)."""
    body = copy.deepcopy(body)
    *parents, last = path
    node = body
    for step in parents:
        node = node[step]

    def put(text: str) -> str:
        return text + "\x00" if at < 0 else text[:at] + "\x00" + text[at:]

    if isinstance(last, tuple):
        node[put(last[1])] = node.pop(last[1])
    else:
        node[last] = put(node[last])
    return body


def dotted(path: Path) -> str:
    return ".".join(str(step) for step in path if not isinstance(step, tuple))


def kept_as_data(path: str, url: str) -> bool:
    """Whether the field at ``path`` of a call to ``url`` holds data the API keeps as given (or
    records cleaned) rather than text it must be able to store and match."""
    top = path.split(".")[0]
    if url.startswith("/v1/schedules"):
        return False  # a template's payload is stored as a JSON document: no NUL (see below)
    return top in ("payload", "result", "error", "logs") or path.startswith("tasks.0.payload")


def assert_clean_answer(resp: httpx.Response) -> None:
    assert resp.status_code < 500, resp.text
    if resp.status_code >= 400:
        problem = resp.json()
        texts = [problem["detail"], *(e["detail"] for e in problem.get("errors", []))]
        for word in DRIVER_WORDS:
            assert all(word not in str(text).lower() for text in texts), resp.text


async def test_nul_in_any_body_field_is_refused_by_name_or_kept_as_data(
    app: FastAPI, tenant: TenantKey
) -> None:
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(
        transport=transport, base_url="http://t", headers=tenant.headers
    ) as api:
        task = (await api.post("/v1/tasks", json={"target": WORKER})).json()
        made = await api.post("/v1/schedules", json={"every": "PT1M", "task": {"target": WORKER}})
        sid = made.json()["id"]
        for n in range(80):  # leases to complete and fail, one per call below
            await api.post("/v1/tasks", json={"target": WORKER, "queue": "work", "name": f"t{n}"})
        held = iter(await lease(api, "work", max_tasks=80))

        def lease_path(action: str) -> str:
            return f"/v1/leases/{next(held)['lease_id']}/{action}"

        calls: list[tuple[str, str | Any, dict[str, Any]]] = [
            ("POST", "/v1/tasks", {**TEMPLATE, "run_at": "2030-01-01T00:00:00Z"}),
            ("POST", "/v1/tasks", {"target": WORKER, "idempotency_key": "ik"}),
            ("POST", "/v1/tasks", {"target": WORKER, "payload_ref": "s3://b/o"}),
            ("POST", "/v1/tasks", {"target": AMQP}),
            ("POST", "/v1/tasks", {"target": NATS}),
            ("POST", "/v1/tasks", {"target": REDIS}),
            ("POST", "/v1/tasks/batch", {"tasks": [TEMPLATE]}),
            ("PATCH", f"/v1/tasks/{task['id']}", {"payload": {"k": "v"}, "labels": {"t": "v"}}),
            ("POST", "/v1/schedules", {"cron": "0 * * * *", "timezone": "UTC", "task": TEMPLATE}),
            ("POST", "/v1/schedules", {"rrule": "FREQ=DAILY", "task": {"target": NATS}}),
            ("POST", "/v1/schedules", {"every": "PT5M", "task": {"target": REDIS}}),
            ("PATCH", f"/v1/schedules/{sid}", {"cron": "5 * * * *", "task": {"target": AMQP}}),
            ("PUT", "/v1/schedules/by-key/daily", {"every": "PT5M", "task": TEMPLATE}),
            ("POST", f"/v1/schedules/{sid}/pause", {"note": "why"}),
            ("POST", "/v1/tasks/cancel", {"queue": "q", "name": "n", "schedule_id": "s",
                                          "labels": {"t": "v"}, "status": ["ready"]}),
            ("PUT", "/v1/queues/qq", {"retention": {"succeeded": "P1D"}}),
            ("POST", "/v1/queues/qq/lease", {"worker_id": "w", "names": ["n"], "wait_seconds": 0}),
            ("POST", "complete", {"result": {"k": ["v"]}, "logs": "printed"}),
            ("POST", "fail", {"error": "boom", "logs": "printed"}),
            ("PUT", "/v1/tenant/notifications", {"events": ["task.dead_lettered"], "target": HTTP}),
            ("POST", "/v1/admin/tenants", {"name": "other"}),
        ]  # fmt: skip
        cases = [(call, path, at) for call in calls for path in leaves(call[2]) for at in (1, -1)]
        for (method, url, body), path, at in cases:
            target = lease_path(url) if url in ("complete", "fail") else url
            with case((method, target, path, at)):
                headers = ADMIN if target.startswith("/v1/admin/") else {}
                resp = await api.request(
                    method,
                    target,
                    content=orjson.dumps(with_nul(body, path, at)),
                    headers={"content-type": "application/json", **headers},
                )
                assert_clean_answer(resp)
                field = dotted(path)
                if kept_as_data(field, target):
                    assert resp.status_code in (200, 201), resp.text
                    continue
                assert resp.status_code == 422, resp.text
                named = str(resp.json()["field"])
                if not isinstance(path[-1], tuple):  # a value: its field, or one above it
                    assert field == named or field.startswith(named + "."), named


async def test_nul_in_any_query_or_path_text_is_422_naming_it(
    app: FastAPI, tenant: TenantKey
) -> None:
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(
        transport=transport, base_url="http://t", headers=tenant.headers
    ) as api:
        made = await api.post("/v1/schedules", json={"every": "PT1M", "task": {"target": WORKER}})
        sid = made.json()["id"]
        queries = {
            "/v1/tasks": {"queue": "q", "name": "n", "schedule_id": "s", "label": "a:b",
                          "run_after": "2030-01-01T00:00:00Z", "run_before": "2030-01-01T00:00:00Z",
                          "cursor": "abc", "id_prefix": "0190", "status": "ready"},
            "/v1/history": {"task_id": "t", "schedule_id": "s", "name": "n", "queue": "q",
                            "label": "a:b", "kind": "task", "outcome": "failed",
                            "since": "2030-01-01T00:00:00Z", "until": "2031-01-01T00:00:00Z",
                            "cursor": "abc"},
            "/v1/schedules": {"queue": "q", "name": "n", "cursor": "abc"},
            f"/v1/schedules/{sid}/upcoming": {"after": "2030-01-01T00:00:00Z"},
            f"/v1/schedules/{sid}/ticks": {"outcome": "fired", "cursor": "abc"},
            f"/v1/schedules/{sid}/revisions": {"cursor": "abc"},
        }  # fmt: skip
        for url, params in queries.items():
            for name, value in params.items():
                with case((url, name)):
                    resp = await api.get(url, params={name: value[:1] + "\x00" + value[1:]})
                    assert_clean_answer(resp)
                    # A cursor is opaque: text this server did not issue is a 400 bad-cursor
                    # (test_tampered_cursors.py); every other field is a 422.
                    expected = 400 if name == "cursor" else 422
                    assert resp.status_code == expected, resp.text
                    assert resp.json()["field"] == name, resp.text
        nul = quote("a\x00b")
        paths = [
            ("GET", f"/v1/tasks/{nul}", "task_id"),
            ("GET", f"/v1/schedules/{nul}", "schedule_id"),
            ("GET", f"/v1/schedules/by-key/{nul}", "key"),
            ("GET", f"/v1/queues/{nul}", "name"),
            ("PUT", f"/v1/queues/{nul}", "name"),
            ("POST", f"/v1/queues/{nul}/lease", "name"),
            ("GET", f"/v1/admin/tenants/{nul}", "tenant_id"),
            ("DELETE", f"/v1/admin/keys/{nul}", "key_id"),
        ]
        for method, url, field in paths:
            with case(url):
                headers = ADMIN if url.startswith("/v1/admin/") else {}
                body = {"worker_id": "w", "wait_seconds": 0} if url.endswith("lease") else {}
                resp = await api.request(method, url, json=body, headers=headers)
                assert_clean_answer(resp)
                assert resp.status_code == 422 and resp.json()["field"] == field, resp.text
        # A lease id names nothing stored: any text is a lease that is no longer current.
        for action in ("heartbeat", "complete", "fail", "release"):
            body = {"error": "x"} if action == "fail" else {}
            resp = await api.post(f"/v1/leases/{nul}/{action}", json=body)
            assert_clean_answer(resp)
            assert resp.status_code == 409, resp.text


async def test_a_store_refusal_never_carries_the_drivers_words(
    settings: Settings, store: Store
) -> None:
    boom = APIRouter()

    @boom.get("/refused")
    async def refused() -> None:
        words = "unsupported Unicode escape sequence\nDETAIL:  \\u0000 cannot be converted to text."
        try:
            raise asyncpg.exceptions.UntranslatableCharacterError(words)
        except asyncpg.PostgresError as exc:
            raise ValidationError(f"a task cannot be stored: {exc}") from exc

    app = create_app(settings, store)
    app.include_router(boom)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        resp = await client.get("/refused")
    assert_clean_answer(resp)
    problem = assert_problem(resp, 422)
    assert problem["detail"] == UNSTORABLE
