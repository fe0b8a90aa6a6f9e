"""What every answer carries and how a vanished client is logged: ``X-Content-Type-Options:
nosniff`` on successes, problems, the hot routes, the dashboard and the catch-all 500; a client
that disconnects mid-body is one log line, not a traceback."""

from __future__ import annotations

import logging

import httpx
import pytest
from api_helpers import ADMIN, case
from fastapi import APIRouter, FastAPI
from starlette.types import Message

from duetime.api.app import create_app
from duetime.config import Settings
from duetime.store import Store

WORKER = {"type": "worker"}


async def test_every_kind_of_answer_says_nosniff(
    api: httpx.AsyncClient, settings: Settings, store: Store
) -> None:
    created = await api.post("/v1/tasks", json={"target": WORKER})  # the hot lane
    answers = {
        "hot create": created,
        "hot create refused": await api.post("/v1/tasks", json={"target": {"type": "nope"}}),
        "read": await api.get(f"/v1/tasks/{created.json()['id']}"),
        "not found": await api.get("/v1/tasks/00000000-0000-0000-0000-000000000000"),
        "unknown route": await api.get("/v1/nowhere"),
        "wrong method": await api.delete("/v1/tasks"),
        "no key": await api.get("/v1/tasks", headers={"Authorization": "Bearer nope"}),
        "metrics": await api.get("/metrics", headers=ADMIN),
        "healthz": await api.get("/healthz"),
        "openapi": await api.get("/openapi.json"),
        "dashboard": await api.get("/ui/static/style.css"),
    }
    boom = APIRouter()

    @boom.get("/boom")
    async def explode() -> None:
        raise RuntimeError("internals")

    app = create_app(settings, store)
    app.include_router(boom)
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
        answers["crash"] = await c.get("/boom")
    assert answers["crash"].status_code == 500
    for label, resp in answers.items():
        with case(label):
            assert resp.headers.get_list("x-content-type-options") == ["nosniff"]


async def _send_half_a_body(app: FastAPI, path: str, headers: dict[str, str]) -> list[Message]:
    """Call ``app`` as a server would for a client that sent 10 of 1,000 body bytes and then
    closed the connection; what the app sent back."""
    raw = [(k.lower().encode(), v.encode()) for k, v in headers.items()]
    raw += [(b"content-type", b"application/json"), (b"content-length", b"1000")]
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": raw,
        "client": ("127.0.0.1", 5000),
        "server": ("127.0.0.1", 8080),
    }
    incoming: list[Message] = [
        {"type": "http.request", "body": b'{"target":', "more_body": True},
        {"type": "http.disconnect"},
    ]
    sent: list[Message] = []

    async def receive() -> Message:
        return incoming.pop(0) if incoming else {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message)

    await app(scope, receive, send)
    return sent


@pytest.mark.parametrize("path", ["/v1/tasks", "/v1/schedules", "/v1/tasks/replay"])
async def test_a_client_gone_mid_body_is_one_log_line(
    app: FastAPI, api: httpx.AsyncClient, path: str, caplog: pytest.LogCaptureFixture
) -> None:
    # /v1/tasks is answered by the hot lane, the others by FastAPI's stack: both the same way.
    auth = {"Authorization": str(api.headers["authorization"])}
    with caplog.at_level(logging.DEBUG):
        await _send_half_a_body(app, path, auth)
    lines = [r for r in caplog.records if r.levelno >= logging.INFO]
    assert len(lines) == 1, [r.getMessage() for r in lines]
    (line,) = lines
    assert line.exc_info is None and "disconnected" in line.getMessage()
    assert path in line.getMessage()
