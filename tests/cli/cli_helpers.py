"""What the CLI tests share: a task as the API answers it, a problem answer, :class:`FakeApi`,
which the CLI's client talks to over an ``httpx.MockTransport``, and :class:`LocalApi`, the real
API in process (the ``local_api`` fixture)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from duetime import cli
from duetime.sdk import Client
from duetime.store import Store

BASE = "http://127.0.0.1:8080"  # dev mode answers loopback hosts only

TASK_ID = "01900000-0000-7000-8000-000000000001"


def task_json(**over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": TASK_ID,
        "name": None,
        "queue": "default",
        "status": "ready",
        "run_at": "2030-01-01T00:00:00Z",
        "target": {"type": "worker"},
        "payload": None,
        "attempts": 0,
        "created_at": "2030-01-01T00:00:00Z",
        "updated_at": "2030-01-01T00:00:00Z",
    }
    base.update(over)
    return base


def not_found(path: str) -> httpx.Response:
    body = {
        "type": "urn:duetime:problem:not-found",
        "title": "Not found",
        "status": 404,
        "detail": "no task with that id\nfor this tenant",
        "instance": path,
    }
    return httpx.Response(404, json=body, headers={"content-type": "application/problem+json"})


class FakeApi:
    """Records what the CLI's client sends; answers with ``handler``."""

    def __init__(self, handler: Callable[[httpx.Request], httpx.Response]) -> None:
        self.handler = handler
        self.requests: list[httpx.Request] = []
        self.clients: list[tuple[str, str | None]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return self.handler(request)

    def factory(self, url: str, api_key: str | None) -> Client:
        self.clients.append((url, api_key))
        return Client(url, api_key, transport=httpx.MockTransport(self))

    def body(self, index: int = -1) -> Any:
        return json.loads(self.requests[index].content)


def use_api(
    monkeypatch: pytest.MonkeyPatch, handler: Callable[[httpx.Request], httpx.Response]
) -> FakeApi:
    api = FakeApi(handler)
    monkeypatch.setattr(cli.common, "client_factory", api.factory)
    return api


@dataclass(frozen=True)
class LocalApi:
    """The dev-mode API over a SQLite store in this process; the CLI's client talks to it."""

    store: Store
    transport: httpx.ASGITransport

    def client(self) -> Client:
        """A client of the same API, for a test's own calls."""
        return Client(BASE, transport=self.transport)


def leaves(command: Any, path: tuple[str, ...] = ()) -> dict[tuple[str, ...], Any]:
    """Every runnable command under ``command`` (a click command or group) by the words that
    name it."""
    if not hasattr(command, "commands"):
        return {path: command}
    found: dict[tuple[str, ...], Any] = {}
    for name, sub in sorted(command.commands.items()):
        found |= leaves(sub, (*path, name))
    return found
