"""A fake of the lease API for the worker's unit tests (imported as ``worker_fakes``): an
in-memory queue served over ``httpx.MockTransport``, recording every call and letting a test
inject outages, stale leases and refusals."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from duetime.sdk import AsyncClient

BASE = "http://duetime.test"


def task_json(task_id: str, name: str | None, **over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": task_id,
        "name": name,
        "queue": "default",
        "status": "running",
        "run_at": "2030-01-01T00:00:00Z",
        "target": {"type": "worker"},
        "payload": None,
        "timeout_seconds": 30.0,
        "attempts": 1,
        "created_at": "2030-01-01T00:00:00Z",
        "updated_at": "2030-01-01T00:00:00Z",
    }
    base.update(over)
    return base


def problem(status: int, slug: str, detail: str = "") -> httpx.Response:
    body = {"type": f"urn:duetime:problem:{slug}", "title": slug, "status": status}
    if detail:
        body["detail"] = detail
    return httpx.Response(status, json=body, headers={"content-type": "application/problem+json"})


@dataclass
class Call:
    path: str
    body: Any


@dataclass
class FakeLeaseApi:
    """Tasks wait in ``queues``; a lease hands out up to ``max_tasks`` whose names match.

    ``lease_failures``: responses (or exceptions) returned by the next lease calls instead of
    leases. ``stale``: lease ids the server considers lost (heartbeats and acks refused).
    ``batch_refusal``: a response returned to batch acks instead of applying them.
    """

    queues: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    calls: list[Call] = field(default_factory=list)
    lease_failures: list[httpx.Response | Exception] = field(default_factory=list)
    stale: set[str] = field(default_factory=set)
    batch_refusal: httpx.Response | None = None
    single_refusal: Callable[[str, Any], httpx.Response | None] | None = None
    outcomes: dict[str, tuple[str, Any]] = field(default_factory=dict)  # task id -> (kind, body)
    leases: dict[str, str] = field(default_factory=dict)  # lease id -> task id
    max_long_poll: float = 0.05
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def add(self, name: str | None, queue: str = "default", **over: Any) -> str:
        task_id = f"task-{next(self._ids)}"
        self.queues.setdefault(queue, []).append(task_json(task_id, name, queue=queue, **over))
        return task_id

    def client(self) -> AsyncClient:
        # As the worker makes its own client: it backs off from outages itself (and counts them).
        return AsyncClient(BASE, "dt_test", retries=0, transport=httpx.MockTransport(self.handle))

    def bodies(self, path_end: str) -> list[Any]:
        return [c.body for c in self.calls if c.path.endswith(path_end)]

    async def handle(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        body: Any = json.loads(request.content) if request.content else None
        self.calls.append(Call(path, body))
        parts = path.strip("/").split("/")
        if parts[:2] == ["v1", "queues"] and parts[3] == "lease":
            return await self._lease(parts[2], body)
        if path == "/v1/leases/complete" or path == "/v1/leases/fail":
            if self.batch_refusal is not None:
                return self.batch_refusal
            kind = parts[2]
            items = [self._ack(kind, item["lease_id"], item) for item in body["items"]]
            return httpx.Response(200, json={"items": items})
        if path == "/v1/leases/release":
            items = [self._ack("release", lease_id, body) for lease_id in body["lease_ids"]]
            return httpx.Response(200, json={"items": items})
        if parts[:2] == ["v1", "leases"] and len(parts) == 4:
            lease_id, action = parts[2], parts[3]
            if action == "heartbeat":
                if lease_id in self.stale or lease_id not in self.leases:
                    return problem(409, "stale-lease", "lease lost")
                return httpx.Response(
                    200, json={"lease_id": lease_id, "lease_expires_at": "2030-01-01T00:01:00Z"}
                )
            if self.single_refusal is not None:
                refused = self.single_refusal(action, body)
                if refused is not None:
                    return refused
            result = self._ack(action, lease_id, body)
            if result["status"] == "stale":
                return problem(409, "stale-lease", "lease lost")
            return httpx.Response(200, json=result)
        return problem(404, "not-found", path)

    async def _lease(self, queue: str, body: dict[str, Any]) -> httpx.Response:
        if self.lease_failures:
            failure = self.lease_failures.pop(0)
            if isinstance(failure, Exception):
                raise failure
            return failure
        names = body.get("names")
        waiting = self.queues.setdefault(queue, [])
        picked = [t for t in waiting if names is None or t["name"] in names][: body["max_tasks"]]
        if not picked and body.get("wait_seconds"):
            await asyncio.sleep(min(body["wait_seconds"], self.max_long_poll))
        for task in picked:
            waiting.remove(task)
        leases = []
        for task in picked:
            lease_id = f"lease-{task['id']}-{next(self._ids)}"
            self.leases[lease_id] = task["id"]
            leases.append(
                {
                    "lease_id": lease_id,
                    "lease_expires_at": "2030-01-01T00:00:30Z",
                    "attempt": task.get("attempts", 1),
                    "task": task,
                }
            )
        return httpx.Response(200, json={"leases": leases})

    def _ack(self, kind: str, lease_id: str, body: dict[str, Any]) -> dict[str, Any]:
        task_id = self.leases.pop(lease_id, None)
        if task_id is None or lease_id in self.stale:
            return {"lease_id": lease_id, "status": "stale", "task_id": None, "task_status": None}
        self.outcomes[task_id] = (kind, body)
        status = {"complete": "succeeded", "release": "ready"}.get(kind, "retrying")
        return {"lease_id": lease_id, "status": "ok", "task_id": task_id, "task_status": status}
