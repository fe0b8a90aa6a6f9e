"""POST /v1/tasks and /v1/tasks/batch: the create body, its validation, batches (idempotency keys:
test_tasks_idempotency.py)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from api_helpers import TenantKey, assert_problem, case

from duetime.clock import FakeClock
from duetime.store import Store

HOOK = {"type": "http", "url": "https://example.com/hook"}


async def test_create_minimal_task_is_ready_now(api: httpx.AsyncClient, clock: FakeClock) -> None:
    resp = await api.post("/v1/tasks", json={"target": {"type": "worker"}})
    assert resp.status_code == 201, resp.text
    assert resp.headers["content-type"] == "application/json"
    task = resp.json()
    assert task["status"] == "ready"
    assert task["queue"] == "default"
    assert task["payload"] is None
    assert task["target"] == {"type": "worker"}
    assert task["attempts"] == 0
    assert task["retry"] == {
        "max_attempts": 5,
        "initial_delay_seconds": 1.0,
        "max_delay_seconds": 3600.0,
        "multiplier": 2.0,
        "jitter": 0.1,
    }
    assert task["timeout_seconds"] == 30.0
    assert task["run_at"] == "2030-01-01T00:00:00Z"  # the store's (pinned) now
    assert task["created_at"].endswith("Z")
    for field in ("schedule_id", "scheduled_for", "started_at", "finished_at", "last_error"):
        assert task[field] is None
    assert task["next_attempt_at"] == "2030-01-01T00:00:00Z"


async def test_create_full_body_round_trips(
    api: httpx.AsyncClient, store: Store, tenant: TenantKey
) -> None:
    parent = (await api.post("/v1/tasks", json={"target": {"type": "worker"}})).json()
    body: dict[str, Any] = {
        "name": "send-report",
        "queue": "reports.eu-1",
        "run_at": "2030-12-01T16:00:00+01:00",
        "target": {
            "type": "http",
            "url": "https://example.com/hook",
            "method": "PUT",
            "headers": {"X-Thing": "1"},
        },
        "payload": {"any": ["json", 1, 2.5, True, None], "deep": {"x": "é"}},
        "idempotency_key": "report-2030-12-01",
        "priority": 7,
        "retry": {
            "max_attempts": 3,
            "initial_delay_seconds": 2,
            "max_delay_seconds": 60,
            "multiplier": 3,
            "jitter": 0,
        },
        "timeout_seconds": 12.5,
        "depends_on": [parent["id"].upper()],
        "concurrency_key": "customer-42",
        "labels": {"team": "billing", "env": "prod"},
    }
    resp = await api.post("/v1/tasks", json=body)
    assert resp.status_code == 201, resp.text
    task = resp.json()
    assert task["status"] == "blocked"  # the parent has not succeeded
    assert task["run_at"] == "2030-12-01T15:00:00Z"
    assert task["depends_on"] == [parent["id"]]  # canonical (lower-case) form
    for field in ("name", "queue", "payload", "idempotency_key", "priority", "labels"):
        assert task[field] == body[field], field
    assert task["target"] == body["target"]
    assert task["retry"] == {
        "max_attempts": 3,
        "initial_delay_seconds": 2.0,
        "max_delay_seconds": 60.0,
        "multiplier": 3.0,
        "jitter": 0.0,
    }
    assert task["timeout_seconds"] == 12.5
    assert task["concurrency_key"] == "customer-42"
    stored = await store.task_get(tenant.id, task["id"])
    assert stored is not None and stored.payload == body["payload"]


TARGETS: list[tuple[dict[str, Any], dict[str, Any]]] = [
    ({"type": "worker"}, {"type": "worker"}),
    (
        {"type": "http", "url": "http://example.com/x"},
        {"type": "http", "url": "http://example.com/x", "method": "POST", "headers": {}},
    ),
    (
        {"type": "amqp", "url": "amqp://127.0.0.1/", "exchange": "ex", "routing_key": "rk"},
        {
            "type": "amqp",
            "url": "amqp://127.0.0.1/",
            "exchange": "ex",
            "routing_key": "rk",
            "headers": {},
            "persistent": True,
        },
    ),
    (
        {"type": "amqp", "url": "amqps://u:pw@mq.example/", "routing_key": "jobs"},
        {
            "type": "amqp",
            "url": "amqps://u:***@mq.example/",  # never shown (*** and a fingerprint, cut below)
            "exchange": "",
            "routing_key": "jobs",
            "headers": {},
            "persistent": True,
        },
    ),
    (
        {"type": "nats", "url": "nats://127.0.0.1:4222", "subject": "jobs.send"},
        {"type": "nats", "url": "nats://127.0.0.1:4222", "subject": "jobs.send", "jetstream": True},
    ),
    (
        {"type": "redis", "url": "redis://127.0.0.1:6379/0", "stream": "jobs", "maxlen": 5},
        {"type": "redis", "url": "redis://127.0.0.1:6379/0", "stream": "jobs", "maxlen": 5},
    ),
]


async def test_every_target_type(api: httpx.AsyncClient) -> None:
    for target, expected in TARGETS:
        with case(target):
            resp = await api.post("/v1/tasks", json={"target": target})
            assert resp.status_code == 201, resp.text
            shown = resp.json()["target"]
            if "url" in shown:  # a fingerprint follows *** (keyed: it differs per key ring)
                shown["url"] = re.sub(r"\*\*\*[0-9a-f]{8}", "***", shown["url"])
            assert shown == expected


async def test_delay_seconds_counts_from_the_store_clock(
    api: httpx.AsyncClient, clock: FakeClock
) -> None:
    resp = await api.post("/v1/tasks", json={"target": HOOK, "delay_seconds": 90})
    assert resp.status_code == 201, resp.text
    task = resp.json()
    assert task["status"] == "scheduled"
    assert task["run_at"] == "2030-01-01T00:01:30Z"
    zero = (await api.post("/v1/tasks", json={"target": HOOK, "delay_seconds": 0})).json()
    assert zero["status"] == "ready"


async def test_run_at_in_the_past_is_due_now(api: httpx.AsyncClient) -> None:
    resp = await api.post("/v1/tasks", json={"target": HOOK, "run_at": "2001-01-01T00:00:00Z"})
    assert resp.status_code == 201
    assert resp.json()["status"] == "ready"


# -- validation --------------------------------------------------------------------------------

INVALID: list[tuple[dict[str, Any], str]] = [
    ({}, "target"),
    ({"target": {"type": "carrier-pigeon"}}, "target"),
    ({"target": {"url": "https://example.com"}}, "target"),
    ({"target": {"type": "http"}}, "target.url"),
    ({"target": {"type": "http", "url": "ftp://example.com/x"}}, "target.url"),
    ({"target": {"type": "http", "url": "/relative"}}, "target.url"),
    ({"target": {"type": "http", "url": 5}}, "target.url"),
    ({"target": {**HOOK, "method": "TRACE"}}, "target.method"),
    ({"target": {**HOOK, "headers": {"X-A": 1}}}, "target.headers.X-A"),
    ({"target": {**HOOK, "headers": {"bad header": "1"}}}, "target.headers"),
    ({"target": {**HOOK, "headers": {"Webhook-Signature": "v1,x"}}}, "target.headers"),
    ({"target": {**HOOK, "headers": {"Duetime-Attempt": "1"}}}, "target.headers"),
    ({"target": {**HOOK, "headers": {"X-A": "a\r\nInjected: 1"}}}, "target.headers"),
    ({"target": {**HOOK, "extra": 1}}, "target.extra"),
    ({"target": {"type": "worker", "url": "https://example.com"}}, "target.url"),
    ({"target": {"type": "amqp", "url": "amqp://h/"}}, "target.routing_key"),
    ({"target": {"type": "amqp", "url": "http://h/", "routing_key": "r"}}, "target.url"),
    ({"target": {"type": "nats", "url": "nats://h", "subject": "a.*"}}, "target.subject"),
    ({"target": {"type": "nats", "url": "nats://h", "subject": ""}}, "target.subject"),
    ({"target": {"type": "nats", "url": "redis://h", "subject": "a"}}, "target.url"),
    ({"target": {"type": "redis", "url": "redis://h"}}, "target.stream"),
    ({"target": {"type": "redis", "url": "nats://h", "stream": "s"}}, "target.url"),
    ({"target": HOOK, "name": ""}, "name"),
    ({"target": HOOK, "name": "x" * 201}, "name"),
    ({"target": HOOK, "name": 5}, "name"),
    ({"target": HOOK, "queue": "has space"}, "queue"),
    ({"target": HOOK, "queue": "a/b"}, "queue"),
    ({"target": HOOK, "queue": "q" * 129}, "queue"),
    ({"target": HOOK, "queue": ""}, "queue"),
    ({"target": HOOK, "run_at": "2030-12-01T15:00:00"}, "run_at"),
    ({"target": HOOK, "run_at": "2030-12-01"}, "run_at"),
    ({"target": HOOK, "run_at": "tomorrow"}, "run_at"),
    ({"target": HOOK, "run_at": 1893456000}, "run_at"),
    ({"target": HOOK, "run_at": "2030-02-30T00:00:00Z"}, "run_at"),
    ({"target": HOOK, "run_at": "2030-12-01T15:00:00Z", "delay_seconds": 5}, "delay_seconds"),
    ({"target": HOOK, "delay_seconds": -1}, "delay_seconds"),
    ({"target": HOOK, "delay_seconds": "30"}, "delay_seconds"),
    ({"target": HOOK, "idempotency_key": ""}, "idempotency_key"),
    ({"target": HOOK, "idempotency_key": "k" * 256}, "idempotency_key"),
    ({"target": HOOK, "priority": 1.5}, "priority"),
    ({"target": HOOK, "priority": "1"}, "priority"),
    ({"target": HOOK, "priority": 40000}, "priority"),
    ({"target": HOOK, "priority": -40000}, "priority"),
    ({"target": HOOK, "retry": {"max_attempts": 0}}, "retry.max_attempts"),
    ({"target": HOOK, "retry": {"initial_delay_seconds": 0}}, "retry.initial_delay_seconds"),
    (
        {"target": HOOK, "retry": {"initial_delay_seconds": 10, "max_delay_seconds": 5}},
        "retry.max_delay_seconds",
    ),
    ({"target": HOOK, "retry": {"initial_delay_seconds": 7200}}, "retry.max_delay_seconds"),
    ({"target": HOOK, "retry": {"multiplier": 0.5}}, "retry.multiplier"),
    ({"target": HOOK, "retry": {"jitter": 1.5}}, "retry.jitter"),
    ({"target": HOOK, "retry": {"jitter": -0.1}}, "retry.jitter"),
    ({"target": HOOK, "retry": {"attempts": 3}}, "retry.attempts"),
    ({"target": HOOK, "timeout_seconds": 0}, "timeout_seconds"),
    ({"target": HOOK, "timeout_seconds": 3601}, "timeout_seconds"),
    ({"target": HOOK, "depends_on": ["not-a-uuid"]}, "depends_on.0"),
    ({"target": HOOK, "depends_on": "0190c6f2-0000-7000-8000-000000000000"}, "depends_on"),
    ({"target": HOOK, "concurrency_key": ""}, "concurrency_key"),
    ({"target": HOOK, "labels": {"team": 1}}, "labels.team"),
    ({"target": HOOK, "labels": {"a:b": "c"}}, "labels.a:b.[key]"),
    ({"target": HOOK, "labels": {"k": "v" * 257}}, "labels.k"),
    ({"target": HOOK, "labels": {f"k{i}": "v" for i in range(65)}}, "labels"),
    ({"target": HOOK, "colour": "blue"}, "colour"),
]


async def test_invalid_create_is_a_422_naming_the_field(api: httpx.AsyncClient) -> None:
    for body, field in INVALID:
        with case(body):
            resp = await api.post("/v1/tasks", json=body)
            problem = assert_problem(resp, 422, field)
            assert str(problem["detail"]).startswith(field)
    assert (await api.get("/v1/tasks")).json()["items"] == []


async def test_unknown_field_says_so(api: httpx.AsyncClient) -> None:
    resp = await api.post("/v1/tasks", json={"target": HOOK, "colour": "blue"})
    problem = assert_problem(resp, 422, "colour")
    assert problem["errors"] == [{"field": "colour", "detail": "unknown field"}]


async def test_unknown_depends_on_parent(api: httpx.AsyncClient) -> None:
    body = {"target": HOOK, "depends_on": ["0190c6f2-0000-7000-8000-000000000000"]}
    assert_problem(await api.post("/v1/tasks", json=body), 422, "depends_on")


async def test_payload_over_the_limit_is_refused(api: httpx.AsyncClient) -> None:
    # settings.max_payload_bytes is 1024 in these tests; the limit is on the encoded JSON.
    fits = {"target": HOOK, "payload": "x" * 1022}  # 1024 bytes with its quotes
    assert (await api.post("/v1/tasks", json=fits)).status_code == 201
    too_big = {"target": HOOK, "payload": "x" * 1023}
    problem = assert_problem(await api.post("/v1/tasks", json=too_big), 413, "payload")
    assert "1025 bytes" in str(problem["detail"])


async def test_payload_integer_beyond_64_bits(api: httpx.AsyncClient) -> None:
    resp = await api.post("/v1/tasks", json={"target": HOOK, "payload": {"n": 2**70}})
    assert_problem(resp, 422, "payload")


async def test_malformed_json_is_a_400_problem(api: httpx.AsyncClient) -> None:
    resp = await api.post(
        "/v1/tasks", content=b'{"target": ', headers={"content-type": "application/json"}
    )
    assert_problem(resp, 400)


async def test_body_that_is_not_an_object(api: httpx.AsyncClient) -> None:
    assert_problem(await api.post("/v1/tasks", json=[1, 2]), 422, "body")


async def test_target_hook_refusal_names_the_field(
    settings: Any, store: Store, tenant: TenantKey
) -> None:
    from duetime.api.app import create_app
    from duetime.errors import ValidationError

    def refuse_private(target: Any) -> None:
        if target["type"] == "http" and "127.0.0.1" in target["url"]:
            raise ValidationError("target address 127.0.0.1 is loopback", "target.url")

    app = create_app(settings, store, validate_target=refuse_private)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://t", headers=tenant.headers
    ) as c:
        bad = {"target": {"type": "http", "url": "http://127.0.0.1:9/x"}}
        assert_problem(await c.post("/v1/tasks", json=bad), 422, "target.url")
        batch = {"tasks": [{"target": HOOK}, bad]}
        assert_problem(await c.post("/v1/tasks/batch", json=batch), 422, "tasks.1.target.url")
        assert (await c.post("/v1/tasks", json={"target": HOOK})).status_code == 201


# -- batch -------------------------------------------------------------------------------------


async def test_batch_creates_all_in_order(api: httpx.AsyncClient) -> None:
    tasks = [{"target": HOOK, "name": f"t{i}", "payload": i} for i in range(5)]
    tasks.append({"target": HOOK, "name": "later", "delay_seconds": 60})
    resp = await api.post("/v1/tasks/batch", json={"tasks": tasks})
    assert resp.status_code == 201, resp.text
    items = resp.json()["items"]
    assert [t["name"] for t in items] == ["t0", "t1", "t2", "t3", "t4", "later"]
    assert [t["payload"] for t in items[:5]] == [0, 1, 2, 3, 4]
    assert items[5]["status"] == "scheduled"
    assert items[5]["run_at"] == "2030-01-01T00:01:00Z"
    listed = (await api.get("/v1/tasks")).json()["items"]
    assert len(listed) == 6


async def test_batch_with_one_bad_task_creates_nothing(api: httpx.AsyncClient) -> None:
    tasks: list[dict[str, Any]] = [{"target": HOOK} for _ in range(5)]
    tasks[3] = {"target": {"type": "http", "url": "nope"}}
    resp = await api.post("/v1/tasks/batch", json={"tasks": tasks})
    problem = assert_problem(resp, 422, "tasks.3.target.url")
    assert "tasks.3.target.url" in str(problem["detail"])
    assert (await api.get("/v1/tasks")).json()["items"] == []


async def test_batch_semantic_errors_are_prefixed(api: httpx.AsyncClient) -> None:
    tasks: list[dict[str, Any]] = [{"target": HOOK}, {"target": HOOK, "payload": "y" * 2000}]
    assert_problem(await api.post("/v1/tasks/batch", json={"tasks": tasks}), 413, "tasks.1.payload")
    both = [{"target": HOOK, "run_at": "2030-01-02T00:00:00Z", "delay_seconds": 1}]
    assert_problem(
        await api.post("/v1/tasks/batch", json={"tasks": both}), 422, "tasks.0.delay_seconds"
    )
    assert (await api.get("/v1/tasks")).json()["items"] == []


async def test_batch_unknown_parent_creates_nothing(api: httpx.AsyncClient) -> None:
    tasks = [{"target": HOOK}, {"target": HOOK, "depends_on": [str(_uuid())]}]
    resp = await api.post("/v1/tasks/batch", json={"tasks": tasks})
    assert resp.status_code == 422
    assert "depends_on" in resp.json()["field"]
    assert (await api.get("/v1/tasks")).json()["items"] == []


async def test_batch_missing_parent_names_the_task(api: httpx.AsyncClient) -> None:
    parent = (await api.post("/v1/tasks", json={"target": {"type": "worker"}})).json()["id"]
    ghost = _uuid()
    tasks = [
        {"target": {"type": "worker"}, "depends_on": [parent]},
        {"target": {"type": "worker"}, "depends_on": [parent, ghost]},
    ]
    problem = assert_problem(
        await api.post("/v1/tasks/batch", json={"tasks": tasks}), 422, "tasks.1.depends_on"
    )
    assert ghost in str(problem["detail"])
    assert len((await api.get("/v1/tasks")).json()["items"]) == 1  # nothing made


def _uuid() -> str:
    import uuid

    return str(uuid.uuid4())


async def test_batch_limits(api: httpx.AsyncClient) -> None:
    assert_problem(await api.post("/v1/tasks/batch", json={"tasks": []}), 422, "tasks")
    many = {"tasks": [{"target": {"type": "worker"}}] * 1001}
    assert_problem(await api.post("/v1/tasks/batch", json=many), 422, "tasks")
    assert_problem(await api.post("/v1/tasks/batch", json={"items": []}), 422)
    exactly = {"tasks": [{"target": {"type": "worker"}}] * 1000}
    resp = await api.post("/v1/tasks/batch", json=exactly)
    assert resp.status_code == 201
    assert len(resp.json()["items"]) == 1000


async def test_created_times_are_utc_z(api: httpx.AsyncClient, clock: FakeClock) -> None:
    clock.set(datetime(2031, 5, 6, 7, 8, 9, 123456, tzinfo=UTC))
    task = (await api.post("/v1/tasks", json={"target": HOOK, "delay_seconds": 0.5})).json()
    assert task["run_at"] == (clock.now() + timedelta(seconds=0.5)).isoformat().replace(
        "+00:00", "Z"
    )
    assert task["created_at"] == "2031-05-06T07:08:09.123456Z"


async def test_request_body_over_the_server_cap_is_413(
    api: httpx.AsyncClient, client: httpx.AsyncClient
) -> None:
    # The cap is 4 x max_payload_bytes + 1 MiB for one task (~1 MiB here), 64 MiB for a batch.
    big = b'{"target": {"type": "worker"}, "name": "' + b"x" * (2 * 1024 * 1024) + b'"}'
    for path in ("/v1/tasks", "/v1/tasks/0190c6f2-0000-7000-8000-000000000000"):
        with case(path):
            method = "POST" if path == "/v1/tasks" else "PATCH"
            problem = assert_problem(await api.request(method, path, content=big), 413)
            assert problem["type"] == "urn:duetime:problem:request-too-large"

    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: counted while streaming
        for _ in range(3):
            yield b" " * (1024 * 1024)

    assert_problem(await api.post("/v1/tasks", content=chunks()), 413)
    # The declared length alone refuses a batch before reading it.
    resp = await api.post(
        "/v1/tasks/batch",
        content=b'{"tasks": []}',
        headers={"content-type": "application/json", "content-length": str(65 * 1024 * 1024)},
    )
    assert_problem(resp, 413)
    # Authentication comes first: an anonymous caller's body is never read.
    anonymous = await client.post("/v1/tasks", content=big, headers={"Authorization": ""})
    assert_problem(anonymous, 401)
