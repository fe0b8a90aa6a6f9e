"""AsyncClient over httpx.MockTransport: the requests it sends and how it reads the answers."""

from __future__ import annotations

import gc
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import httpx
import pydantic
import pytest

from duetime import errors
from duetime.sdk import (
    AsyncClient,
    Page,
    RetrySpec,
    Task,
    TaskSpec,
    http_target,
    worker_target,
)
from duetime.types import AttemptOutcome, TaskStatus

TASK_ID = "01900000-0000-7000-8000-000000000001"


def task_json(**over: Any) -> dict[str, Any]:
    """A task as the API renders it (api/render.py)."""
    base: dict[str, Any] = {
        "id": TASK_ID,
        "name": "send-report",
        "queue": "default",
        "status": "scheduled",
        "run_at": "2030-01-01T00:00:30Z",
        "target": {"type": "http", "url": "https://example.com/hook", "method": "POST"},
        "payload": {"n": 1},
        "idempotency_key": None,
        "priority": 0,
        "retry": {
            "max_attempts": 5,
            "initial_delay_seconds": 1.0,
            "max_delay_seconds": 3600.0,
            "multiplier": 2.0,
            "jitter": 0.1,
        },
        "timeout_seconds": 30.0,
        "depends_on": [],
        "concurrency_key": None,
        "labels": {},
        "attempts": 0,
        "schedule_id": None,
        "scheduled_for": None,
        "created_at": "2030-01-01T00:00:00.123456Z",
        "updated_at": "2030-01-01T00:00:00.123456Z",
        "started_at": None,
        "finished_at": None,
        "last_error": None,
        "result": None,
        "next_attempt_at": "2030-01-01T00:00:30Z",
        "cancel_requested": False,
    }
    base.update(over)
    return base


Handler = Callable[[httpx.Request], httpx.Response]


class Recorder:
    """A MockTransport handler that answers from a queue and keeps every request."""

    def __init__(self, *responses: httpx.Response) -> None:
        self.responses = list(responses)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return self.responses.pop(0)

    @property
    def last(self) -> httpx.Request:
        return self.requests[-1]

    def body(self, index: int = -1) -> Any:
        return json.loads(self.requests[index].content)


def client_for(handler: Handler, api_key: str | None = "dt_key") -> AsyncClient:
    return AsyncClient("http://duetime.test/", api_key, transport=httpx.MockTransport(handler))


async def test_create_task_sends_only_given_fields_and_parses_the_task() -> None:
    api = Recorder(httpx.Response(201, json=task_json()))
    run_at = datetime(2030, 1, 1, 1, 0, 30, tzinfo=timezone(timedelta(hours=1)))
    async with client_for(api) as client:
        task = await client.create_task(
            target=http_target("https://example.com/hook", headers={"X-Thing": "1"}),
            payload={"n": 1},
            run_at=run_at,
            retry={"max_attempts": 3},
            labels={"team": "billing"},
            name=None,
        )
    assert api.last.method == "POST"
    assert api.last.url == "http://duetime.test/v1/tasks"
    assert api.last.headers["authorization"] == "Bearer dt_key"
    assert api.last.headers["content-type"] == "application/json"
    assert api.body() == {
        "target": {
            "type": "http",
            "url": "https://example.com/hook",
            "method": "POST",
            "headers": {"X-Thing": "1"},
        },
        "payload": {"n": 1},
        "run_at": "2030-01-01T01:00:30+01:00",
        "retry": {"max_attempts": 3},
        "labels": {"team": "billing"},
    }
    assert isinstance(task, Task)
    assert task.id == TASK_ID
    assert task.status is TaskStatus.SCHEDULED
    assert task.created_at == datetime(2030, 1, 1, 0, 0, 0, 123456, tzinfo=UTC)
    assert task.created_at.tzinfo is not None
    assert task.retry.max_attempts == 5
    assert not task.terminal


async def test_create_task_from_a_spec_sends_an_explicit_null_payload() -> None:
    api = Recorder(httpx.Response(201, json=task_json()), httpx.Response(201, json=task_json()))
    async with client_for(api) as client:
        await client.create_task(TaskSpec(target=worker_target(), payload=None, queue="emails"))
        await client.create_task(TaskSpec(target=worker_target(), retry=RetrySpec(jitter=0)))
    assert api.body(0) == {"target": {"type": "worker"}, "payload": None, "queue": "emails"}
    assert api.body(1) == {"target": {"type": "worker"}, "retry": {"jitter": 0.0}}


async def test_none_means_the_servers_default_inside_retry_too() -> None:
    """A ``RetrySpec`` field left at None is not sent (the server refuses null there), in a
    single create as in a batch; None inside a payload is JSON null and stays."""
    api = Recorder(
        httpx.Response(201, json=task_json()),
        httpx.Response(201, json={"items": [task_json()]}),
    )
    spec = TaskSpec(
        target=worker_target(),
        payload={"a": None},
        retry=RetrySpec(max_attempts=3, jitter=None),
        name=None,
    )
    async with client_for(api) as client:
        await client.create_task(spec)
        await client.create_tasks([spec])
    sent = {"target": {"type": "worker"}, "payload": {"a": None}, "retry": {"max_attempts": 3}}
    assert api.body(0) == sent
    assert api.body(1) == {"tasks": [sent]}


async def test_create_task_rejects_bad_input_before_sending() -> None:
    api = Recorder()
    async with client_for(api) as client:
        with pytest.raises(errors.ValidationError) as bad:
            await client.create_task(target=worker_target(), colour="red")  # type: ignore[call-arg]
        assert bad.value.field == "colour"
        with pytest.raises(errors.ValidationError) as naive:
            await client.create_task(target=worker_target(), run_at=datetime(2030, 1, 1))
        assert naive.value.field == "run_at"
        with pytest.raises(TypeError):
            await client.create_task(TaskSpec(target=worker_target()), name="x")
    assert api.requests == []


async def test_create_tasks_posts_one_batch_and_keeps_order() -> None:
    ids = [f"01900000-0000-7000-8000-00000000000{i}" for i in (1, 2)]
    api = Recorder(httpx.Response(201, json={"items": [task_json(id=i) for i in ids]}))
    async with client_for(api) as client:
        made = await client.create_tasks(
            [TaskSpec(target=worker_target(), name="a"), {"target": worker_target(), "name": "b"}]
        )
        with pytest.raises(errors.ValidationError) as bad:
            await client.create_tasks([{"target": worker_target()}, {"name": "no target"}])
    assert api.last.url.path == "/v1/tasks/batch"
    assert api.body() == {
        "tasks": [
            {"target": {"type": "worker"}, "name": "a"},
            {"target": {"type": "worker"}, "name": "b"},
        ]
    }
    assert [t.id for t in made] == ids
    assert bad.value.field == "tasks.1.target"
    assert len(api.requests) == 1


async def test_create_tasks_leaves_the_garbage_collector_as_it_found_it() -> None:
    """create_tasks pauses the collector while it checks specs and decodes the answer; after a
    call, a refused spec or an answer that does not decode, it is on or off as before."""
    ids = ["01900000-0000-7000-8000-000000000001"]
    api = Recorder(
        httpx.Response(201, json={"items": [task_json(id=ids[0])]}),
        httpx.Response(201, json={"items": [{"id": "x"}]}),
        httpx.Response(201, json={"items": [task_json(id=ids[0])]}),
    )
    was = gc.isenabled()
    try:
        async with client_for(api) as client:
            gc.enable()
            assert [t.id for t in await client.create_tasks([{"target": worker_target()}])] == ids
            assert gc.isenabled()
            with pytest.raises(errors.ValidationError):
                await client.create_tasks([{"name": "no target"}])
            assert gc.isenabled()
            with pytest.raises(pydantic.ValidationError):
                await client.create_tasks([{"target": worker_target()}])
            assert gc.isenabled()
            gc.disable()
            await client.create_tasks([{"target": worker_target()}])
            assert not gc.isenabled()
    finally:
        if was:
            gc.enable()


async def test_create_tasks_bodies_match_single_create_bodies() -> None:
    """The batch is checked and written as one list: each body asks for what create_task's
    asks for. A None is left out of the batch (the server's default; for the payload, null),
    where create_task sends a payload set to None as null."""
    when = datetime(2030, 1, 1, tzinfo=UTC)
    specs: list[Any] = [
        {"target": worker_target(), "payload": None, "name": None, "run_at": when},
        TaskSpec(target=worker_target(), retry={"max_attempts": 2}, labels={"a": "b"}),
    ]
    ids = [f"01900000-0000-7000-8000-00000000000{i}" for i in (1, 2)]
    api = Recorder(
        httpx.Response(201, json=task_json(id=ids[0])),
        httpx.Response(201, json=task_json(id=ids[1])),
        httpx.Response(201, json={"items": [task_json(id=i) for i in ids]}),
    )
    async with client_for(api) as client:
        await client.create_task(**specs[0])
        await client.create_task(specs[1])
        singles = [json.loads(r.content) for r in api.requests]
        made = await client.create_tasks(specs)
    assert api.body() == {"tasks": [{k: v for k, v in b.items() if v is not None} for b in singles]}
    assert singles[0] == {
        "target": {"type": "worker"},
        "payload": None,
        "run_at": "2030-01-01T00:00:00Z",
    }
    assert [t.id for t in made] == ids and made[0].run_at.tzinfo is not None


async def test_list_tasks_encodes_every_filter() -> None:
    api = Recorder(httpx.Response(200, json={"items": [task_json()], "next_cursor": "abc"}))
    async with client_for(api) as client:
        page = await client.list_tasks(
            status=[TaskStatus.FAILED, "cancelled"],
            queue="q",
            name="send-report",
            labels={"team": "billing", "env": "prod"},
            run_after=datetime(2030, 1, 1, tzinfo=UTC),
            run_before=datetime(2030, 1, 1, 2, tzinfo=timezone(timedelta(hours=2))),
            limit=50,
            cursor="xyz",
        )
    assert api.last.url.params.multi_items() == [
        ("status", "failed"),
        ("status", "cancelled"),
        ("queue", "q"),
        ("name", "send-report"),
        ("label", "team:billing"),
        ("label", "env:prod"),
        ("run_after", "2030-01-01T00:00:00Z"),
        ("run_before", "2030-01-01T00:00:00Z"),
        ("limit", "50"),
        ("cursor", "xyz"),
    ]
    assert isinstance(page, Page)
    assert [t.id for t in page.items] == [TASK_ID]
    assert page.next_cursor == "abc"


async def test_iter_tasks_follows_cursors_to_the_end() -> None:
    pages = {
        None: ({"items": [task_json(id="c"), task_json(id="b")], "next_cursor": "after-b"}),
        "after-b": ({"items": [task_json(id="a")], "next_cursor": "after-a"}),
        "after-a": ({"items": [], "next_cursor": None}),
    }
    seen: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        params = request.url.params
        seen.append({"cursor": params.get("cursor"), "status": params.get_list("status")})
        return httpx.Response(200, json=pages[params.get("cursor")])

    async with client_for(handler) as client:
        statuses = iter(["failed", "cancelled"])  # a one-shot iterable must serve every page
        ids = [t.id async for t in client.iter_tasks(status=statuses, page_size=2)]
    assert ids == ["c", "b", "a"]
    assert seen == [
        {"cursor": None, "status": ["failed", "cancelled"]},
        {"cursor": "after-b", "status": ["failed", "cancelled"]},
        {"cursor": "after-a", "status": ["failed", "cancelled"]},
    ]


async def test_update_task_sends_only_what_changes() -> None:
    api = Recorder(*(httpx.Response(200, json=task_json()) for _ in range(2)))
    async with client_for(api) as client:
        await client.update_task(TASK_ID, priority=5, payload=None)
        await client.update_task(TASK_ID, run_at=datetime(2030, 2, 1, tzinfo=UTC), labels={})
    assert api.requests[0].method == "PATCH"
    assert api.requests[0].url.path == f"/v1/tasks/{TASK_ID}"
    assert api.body(0) == {"payload": None, "priority": 5}
    assert api.body(1) == {"run_at": "2030-02-01T00:00:00Z", "labels": {}}


async def test_task_calls_use_their_routes_and_quote_ids() -> None:
    attempt = {
        "task_id": TASK_ID,
        "number": 1,
        "started_at": "2030-01-01T00:00:30Z",
        "finished_at": "2030-01-01T00:00:31.5Z",
        "outcome": "failed",
        "error": "HTTP 500",
        "http_status": 500,
        "duration_ms": 1500.0,
        "worker": "node-1",
    }
    api = Recorder(
        httpx.Response(200, json=task_json(status="cancelled")),
        httpx.Response(200, json=task_json(status="ready")),
        httpx.Response(200, json={"items": [attempt]}),
        httpx.Response(200, json=task_json()),
    )
    async with client_for(api) as client:
        cancelled = await client.cancel_task(TASK_ID)
        retried = await client.retry_task(TASK_ID)
        attempts = await client.list_attempts(TASK_ID)
        await client.get_task("../tenant")
    assert [(r.method, r.url.raw_path.decode()) for r in api.requests] == [
        ("POST", f"/v1/tasks/{TASK_ID}/cancel"),
        ("POST", f"/v1/tasks/{TASK_ID}/retry"),
        ("GET", f"/v1/tasks/{TASK_ID}/attempts"),
        ("GET", "/v1/tasks/..%2Ftenant"),
    ]
    assert cancelled.terminal and cancelled.status is TaskStatus.CANCELLED
    assert retried.status is TaskStatus.READY
    assert attempts[0].outcome is AttemptOutcome.FAILED
    assert attempts[0].finished_at == datetime(2030, 1, 1, 0, 0, 31, 500000, tzinfo=UTC)


async def test_tenant_and_admin_calls() -> None:
    secret = {
        "id": "s1",
        "secret": "whsec_abc",
        "created_at": "2030-01-01T00:00:00Z",
        "expires_at": None,
    }
    tenant = {"id": "t1", "name": "billing", "signing_secrets": [secret]}
    rotated = {**tenant, "signing_secrets": [{**secret, "expires_at": "2030-01-02T00:00:00Z"}]}
    api = Recorder(
        httpx.Response(200, json=tenant),
        httpx.Response(200, json=rotated),
        httpx.Response(201, json={"id": "t2", "name": "n", "api_key": "dt_k_x", "key_id": "k"}),
        httpx.Response(201, json={"id": "k2", "tenant_id": "t2", "api_key": "dt_k2_y"}),
        httpx.Response(204),
    )
    async with client_for(api, api_key="admin-token") as client:
        got = await client.get_tenant()
        after = await client.rotate_signing_secret(overlap_seconds=60)
        created = await client.create_tenant("n")
        key = await client.create_api_key("t2")
        await client.delete_api_key("k2")
    assert [(r.method, r.url.path) for r in api.requests] == [
        ("GET", "/v1/tenant"),
        ("POST", "/v1/tenant/signing-secrets/rotate"),
        ("POST", "/v1/admin/tenants"),
        ("POST", "/v1/admin/tenants/t2/keys"),
        ("DELETE", "/v1/admin/keys/k2"),
    ]
    assert api.body(1) == {"overlap_seconds": 60}
    assert api.body(2) == {"name": "n"}
    assert got.signing_secrets[0].secret == "whsec_abc"
    assert after.signing_secrets[0].expires_at == datetime(2030, 1, 2, tzinfo=UTC)
    assert (created.api_key, created.key_id) == ("dt_k_x", "k")
    assert (key.id, key.tenant_id, key.api_key) == ("k2", "t2", "dt_k2_y")


async def test_no_api_key_sends_no_authorization() -> None:
    api = Recorder(httpx.Response(200, json=task_json()))
    async with client_for(api, api_key=None) as client:
        await client.get_task(TASK_ID)
    assert "authorization" not in api.last.headers
    assert api.last.headers["user-agent"].startswith("duetime-python/")


async def test_is_ready_never_raises() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.host == "down.test":
            raise httpx.ConnectError("refused", request=request)
        return httpx.Response(503, json={"title": "Not ready", "status": 503})

    async with client_for(handler) as client:
        assert await client.is_ready() is False
    async with AsyncClient("http://down.test", transport=httpx.MockTransport(handler)) as down:
        assert await down.is_ready() is False
    ok = Recorder(httpx.Response(200, json={"status": "ok"}))
    async with client_for(ok) as client:
        assert await client.is_ready() is True


def test_keyword_fields_match_the_spec_model() -> None:
    from duetime.sdk.models import TaskSpecFields

    assert set(TaskSpecFields.__annotations__) == set(TaskSpec.model_fields)
