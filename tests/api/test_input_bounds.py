"""Hostile input at the API: control characters, lone surrogates, dates at the ends of
the range, non-finite and absurd numbers. Each is a 422 naming the field, alike on both stores —
never a 500, never a store's raw message, never silently stored."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import httpx
from api_helpers import ADMIN_TOKEN, assert_problem, case
from lease_helpers import lease

WORKER = {"type": "worker"}
HOSTILE = ["a\x00b", "a\x01b", "a\x1bb", "a\x7fb", "a\x85b"]
"""NUL, other C0 controls, DEL and a C1 control: PostgreSQL refuses the first outright."""


def schedule(**fields: Any) -> dict[str, Any]:
    fields.setdefault("task", {"target": WORKER, "name": "report"})
    if not {"cron", "every", "rrule"} & set(fields):
        fields["every"] = "PT1M"
    return fields


async def test_control_characters_in_task_text_fields_are_422_naming_the_field(
    api: httpx.AsyncClient,
) -> None:
    for text in HOSTILE:
        for field, body in (
            ("name", {"target": WORKER, "name": text}),
            ("idempotency_key", {"target": WORKER, "idempotency_key": text}),
            ("concurrency_key", {"target": WORKER, "concurrency_key": text}),
            ("labels.team", {"target": WORKER, "labels": {"team": text}}),
        ):
            with case((field, text)):
                assert_problem(await api.post("/v1/tasks", json=body), 422, field)
    created = await api.post("/v1/tasks", json={"target": WORKER, "labels": {"team": "ok"}})
    assert created.status_code == 201
    task_id = created.json()["id"]
    resp = await api.patch(f"/v1/tasks/{task_id}", json={"labels": {"team": "a\x00b"}})
    assert_problem(resp, 422, "labels.team")
    assert (await api.get(f"/v1/tasks/{task_id}")).json()["labels"] == {"team": "ok"}
    resp = await api.post(
        "/v1/tasks/batch", json={"tasks": [{"target": WORKER}, {"target": WORKER, "name": "\x00"}]}
    )
    assert_problem(resp, 422, "tasks.1.name")


async def test_control_characters_in_filters_and_path_ids_are_422_naming_them(
    api: httpx.AsyncClient,
) -> None:
    for text in HOSTILE:
        for path, params, field in (
            ("/v1/tasks", {"queue": text}, "queue"),
            ("/v1/tasks", {"name": text}, "name"),
            ("/v1/tasks", {"schedule_id": text}, "schedule_id"),
            ("/v1/tasks", {"label": f"team:{text}"}, "label"),
            ("/v1/tasks", {"run_after": text}, "run_after"),
            ("/v1/schedules", {"queue": text}, "queue"),
            ("/v1/schedules", {"name": text}, "name"),
        ):
            with case((path, params)):
                assert_problem(await api.get(path, params=params), 422, field)
        quoted = quote(text)  # as a client sends it: %00 ...
        for path, field in (
            (f"/v1/tasks/{quoted}", "task_id"),
            (f"/v1/schedules/{quoted}", "schedule_id"),
            (f"/v1/schedules/{quoted}/ticks", "schedule_id"),
            (f"/v1/schedules/{quoted}/revisions", "schedule_id"),
        ):
            with case(path):
                assert_problem(await api.get(path), 422, field)
    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    resp = await api.post("/v1/admin/tenants/a%00b/keys", headers=admin)
    assert_problem(resp, 422, "tenant_id")
    assert_problem(await api.delete("/v1/admin/keys/a%00b", headers=admin), 422, "key_id")
    # Not a UUID but clean: no such resource.
    assert_problem(await api.get("/v1/schedules/nope"), 404)
    assert_problem(await api.get("/v1/tasks/nope"), 404)


async def test_control_characters_in_schedule_text_are_422(api: httpx.AsyncClient) -> None:
    body = schedule(task={"target": WORKER, "labels": {"team": "a\x00b"}})
    assert_problem(await api.post("/v1/schedules", json=body), 422, "task.labels.team")
    body = schedule(task={"target": WORKER, "name": "a\x00b"})
    assert_problem(await api.post("/v1/schedules", json=body), 422, "task.name")
    created = await api.post("/v1/schedules", json=schedule())
    assert created.status_code == 201, created.text
    sid = created.json()["id"]
    patch = {"task": {"target": WORKER, "labels": {"k": "\x00"}}}
    assert_problem(await api.patch(f"/v1/schedules/{sid}", json=patch), 422, "task.labels.k")
    resp = await api.post(f"/v1/schedules/{sid}/pause", json={"note": "a\x00b"})
    assert_problem(resp, 422, "note")


async def test_control_characters_in_webhook_headers_are_422_at_create(
    api: httpx.AsyncClient,
) -> None:
    for value in ("a\x00b", "a\x01b", "a\x7fb", "a\rb"):
        target = {"type": "http", "url": "https://example.com/h", "headers": {"X-A": value}}
        with case(value):
            resp = await api.post("/v1/tasks", json={"target": target})
            assert_problem(resp, 422, "target.headers")
    target = {"type": "http", "url": "https://example.com/h", "headers": {"X\x00A": "v"}}
    assert_problem(await api.post("/v1/tasks", json={"target": target}), 422, "target.headers")
    target = {"type": "http", "url": "https://example.com/h", "headers": {"X-A": "a\tb"}}
    assert (await api.post("/v1/tasks", json={"target": target})).status_code == 201


async def test_a_workers_error_text_with_nul_is_recorded_cleaned(api: httpx.AsyncClient) -> None:
    created = await api.post("/v1/tasks", json={"target": WORKER, "queue": "q"})
    assert created.status_code == 201
    (held,) = await lease(api, "q")
    resp = await api.post(
        f"/v1/leases/{held['lease_id']}/fail",
        json={"error": "boom\x00\x1b at line 3\n", "retryable": False},
    )
    assert resp.status_code == 200, resp.text
    attempts = (await api.get(f"/v1/tasks/{created.json()['id']}/attempts")).json()["items"]
    assert attempts[-1]["error"] == "boom\ufffd\ufffd at line 3\n"


async def test_a_lone_surrogate_in_a_body_is_malformed_json(api: httpx.AsyncClient) -> None:
    raw = '{"target": {"type": "worker"}, "name": "a\\ud800b"}'
    resp = await api.post("/v1/tasks", content=raw, headers={"content-type": "application/json"})
    assert_problem(resp, 400)


async def test_dates_outside_the_supported_range_are_422_naming_the_field(
    api: httpx.AsyncClient,
) -> None:
    ends = ["0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z", "1969-12-31T23:59:59Z",
            "9000-01-01T00:00:00Z", "0001-01-01T00:00:00+01:00"]  # fmt: skip
    created = await api.post("/v1/schedules", json=schedule(cron="0 2 * * *"))
    assert created.status_code == 201, created.text
    sid = created.json()["id"]
    for at in ends:
        with case(at):
            resp = await api.post("/v1/tasks", json={"target": WORKER, "run_at": at})
            assert_problem(resp, 422, "run_at")
            resp = await api.post("/v1/schedules", json=schedule(start_at=at))
            assert_problem(resp, 422, "start_at")
            resp = await api.post("/v1/schedules", json=schedule(end_at=at))
            assert_problem(resp, 422, "end_at")
            resp = await api.get(f"/v1/schedules/{sid}/upcoming", params={"after": at})
            assert_problem(resp, 422, "after")
            resp = await api.get("/v1/tasks", params={"run_before": at})
            assert_problem(resp, 422, "run_before")
            for field in ("start", "end"):
                backfill = {"start": "2020-01-01T00:00:00Z", "end": "2020-01-02T00:00:00Z"}
                backfill[field] = at
                resp = await api.post(f"/v1/schedules/{sid}/backfill", json=backfill)
                assert_problem(resp, 422, field)
    # The edges themselves are fine.
    ok = await api.get(f"/v1/schedules/{sid}/upcoming", params={"after": "8999-12-31T00:00:00Z"})
    assert ok.status_code == 200, ok.text
    ok = await api.post("/v1/tasks", json={"target": WORKER, "run_at": "1970-01-01T00:00:00Z"})
    assert ok.status_code == 201, ok.text


async def test_non_finite_numbers_in_json_values_are_422_not_stored_as_null(
    api: httpx.AsyncClient,
) -> None:
    headers = {"content-type": "application/json"}
    for literal in ("NaN", "Infinity", "-Infinity", "1e400", '{"a": [1, -1e999]}', "2" * 40):
        with case(literal):
            raw = f'{{"target": {{"type": "worker"}}, "payload": {literal}}}'
            resp = await api.post("/v1/tasks", content=raw, headers=headers)
            assert_problem(resp, 422, "payload")
            raw = f'{{"tasks": [{{"target": {{"type": "worker"}}, "payload": {literal}}}]}}'
            resp = await api.post("/v1/tasks/batch", content=raw, headers=headers)
            assert_problem(resp, 422, "tasks.0.payload")
    assert (await api.get("/v1/tasks")).json()["items"] == []
    created = await api.post("/v1/tasks", json={"target": WORKER, "queue": "q", "payload": 1.5})
    assert created.status_code == 201
    resp = await api.patch(
        f"/v1/tasks/{created.json()['id']}", content='{"payload": NaN}', headers=headers
    )
    assert_problem(resp, 422, "payload")
    (held,) = await lease(api, "q")
    resp = await api.post(
        f"/v1/leases/{held['lease_id']}/complete", content='{"result": Infinity}', headers=headers
    )
    assert_problem(resp, 422, "result")
    big = "9" * 40
    items = f'{{"items": [{{"lease_id": "{held["lease_id"]}", "result": [{big}]}}]}}'
    resp = await api.post("/v1/leases/complete", content=items, headers=headers)
    assert_problem(resp, 422, "items.0.result")


async def test_numbers_are_bounded_where_parsed(api: httpx.AsyncClient) -> None:
    created = await api.post("/v1/schedules", json=schedule(cron="0 2 * * *"))
    sid = created.json()["id"]
    window = {"start": "2020-01-01T00:00:00Z", "end": "2020-01-02T00:00:00Z"}
    for rate in (1e-300, 0, -1, 0.0005, 1e9):
        with case(rate):
            resp = await api.post(
                f"/v1/schedules/{sid}/backfill", json={**window, "rate_per_second": rate}
            )
            assert_problem(resp, 422, "rate_per_second")
    headers = {"content-type": "application/json"}
    raw = '{"start": "2020-01-01T00:00:00Z", "end": "2020-01-02T00:00:00Z", '
    raw += '"rate_per_second": NaN}'
    resp = await api.post(f"/v1/schedules/{sid}/backfill", content=raw, headers=headers)
    assert_problem(resp, 422, "rate_per_second")
    bad: list[tuple[str, dict[str, Any]]] = [
        ("retry.multiplier", {"retry": {"multiplier": 101}}),
        ("retry.multiplier", {"retry": {"multiplier": 0.5}}),
        ("retry.initial_delay_seconds", {"retry": {"initial_delay_seconds": 1e-300}}),
        ("retry.max_delay_seconds", {"retry": {"max_delay_seconds": 1e300}}),
        ("retry.max_attempts", {"retry": {"max_attempts": 0}}),
        ("retry.max_attempts", {"retry": {"max_attempts": 10**6}}),
        ("timeout_seconds", {"timeout_seconds": 1e-300}),
        ("timeout_seconds", {"timeout_seconds": 1e300}),
        ("delay_seconds", {"delay_seconds": 1e300}),
        ("delay_seconds", {"delay_seconds": -1}),
        ("priority", {"priority": 10**12}),
    ]
    for field, extra in bad:
        with case(extra):
            resp = await api.post("/v1/tasks", json={"target": WORKER, **extra})
            assert_problem(resp, 422, field)
    for params, field in (({"count": 0}, "count"), ({"count": 10**6}, "count")):
        resp = await api.get(f"/v1/schedules/{sid}/upcoming", params=params)
        assert_problem(resp, 422, field)
    for params in ({"limit": 0}, {"limit": 10**9}):
        assert_problem(await api.get("/v1/tasks", params=params), 422, "limit")
    for body, field in (
        ({"worker_id": "w", "wait_seconds": 1e9}, "wait_seconds"),
        ({"worker_id": "w", "lease_seconds": 1e9}, "lease_seconds"),
        ({"worker_id": "w", "lease_seconds": 1e-300}, "lease_seconds"),
        ({"worker_id": "w", "max_tasks": 10**9}, "max_tasks"),
        ({"worker_id": "w\x00"}, "worker_id"),
    ):
        with case(body):
            resp = await api.post("/v1/queues/q/lease", json=body)
            assert_problem(resp, 422, field)
    rotate = "/v1/tenant/signing-secrets/rotate"
    resp = await api.post(rotate, json={"overlap_seconds": 1e12})
    assert_problem(resp, 422, "overlap_seconds")
