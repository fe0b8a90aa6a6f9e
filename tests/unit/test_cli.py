"""The duetime command: store commands against a temp SQLite file, API commands through the SDK
over an injected MockTransport."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from duetime import cli
from duetime.auth import hash_api_key
from duetime.config import Settings
from duetime.sdk import Client
from duetime.store import store_from_url

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


@pytest.fixture
def runner(monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    for name in ("DUETIME_URL", "DUETIME_API_KEY", "DUETIME_DB", "DUETIME_DATA_DIR"):
        monkeypatch.delenv(name, raising=False)
    return CliRunner()


def use_api(
    monkeypatch: pytest.MonkeyPatch, handler: Callable[[httpx.Request], httpx.Response]
) -> FakeApi:
    api = FakeApi(handler)
    monkeypatch.setattr(cli.common, "client_factory", api.factory)
    return api


# -- store commands --------------------------------------------------------------------------


def test_migrate_applies_then_reports_up_to_date(runner: CliRunner, sqlite_url: str) -> None:
    first = runner.invoke(cli.app, ["migrate", "--db", sqlite_url])
    assert first.exit_code == 0, first.output
    assert first.stdout.startswith("applied 0001")
    again = runner.invoke(cli.app, ["migrate", "--db", sqlite_url])
    assert again.exit_code == 0, again.output
    assert again.stdout.strip() == "up to date: no pending migrations"


def test_migrate_defaults_to_a_file_in_the_data_dir(runner: CliRunner, tmp_path: Path) -> None:
    data_dir = tmp_path / "new" / "data"
    result = runner.invoke(cli.app, ["migrate"], env={"DUETIME_DATA_DIR": str(data_dir)})
    assert result.exit_code == 0, result.output
    assert (data_dir / "duetime.db").exists()


def test_tenant_create_prints_a_key_that_authenticates(runner: CliRunner, sqlite_url: str) -> None:
    result = runner.invoke(cli.app, ["tenant", "create", "billing", "--db", sqlite_url])
    assert result.exit_code == 0, result.output
    printed = json.loads(result.stdout)
    assert set(printed) == {"id", "name", "api_key", "key_id"}
    assert printed["name"] == "billing"
    assert printed["api_key"].startswith("dt_")

    async def lookup() -> tuple[Any, Any]:
        store = store_from_url(sqlite_url)
        await store.open()
        try:
            key = await store.api_key_get_by_hash(hash_api_key(printed["api_key"]))
            tenant = await store.tenant_get(printed["id"])
            return key, tenant
        finally:
            await store.close()

    key, tenant = asyncio.run(lookup())
    assert key is not None and key.tenant_id == printed["id"] and key.id == printed["key_id"]
    assert tenant is not None and tenant.name == "billing"


def test_store_errors_are_one_line(runner: CliRunner) -> None:
    result = runner.invoke(cli.app, ["migrate", "--db", "mysql://nope"])
    assert result.exit_code == 1
    assert result.stderr.startswith("error: ")
    assert result.stderr.count("\n") == 1
    assert "Traceback" not in result.output


def test_serve_builds_settings_from_flags_then_env(
    runner: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    import duetime.node.server

    seen: list[Settings] = []
    monkeypatch.setattr(duetime.node.server, "serve", seen.append)
    env = {"DUETIME_PORT": "9001", "DUETIME_HOST": "127.0.0.2", "DUETIME_DB": "sqlite:///env.db"}
    result = runner.invoke(cli.app, ["serve", "--port", "9100", "--no-engine"], env=env)
    assert result.exit_code == 0, result.output
    (settings,) = seen
    assert (settings.port, settings.host, settings.db) == (9100, "127.0.0.2", "sqlite:///env.db")
    assert settings.engine is False
    seen.clear()
    assert runner.invoke(cli.app, ["serve"], env={}).exit_code == 0
    assert (seen[0].port, seen[0].engine) == (8080, True)


def test_serve_reports_config_errors_in_one_line(
    runner: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = runner.invoke(cli.app, ["serve", "--host", "0.0.0.0"], env={"DUETIME_ADMIN_TOKEN": ""})
    assert result.exit_code == 1
    assert result.stderr.startswith("error: dev mode")
    assert "Traceback" not in result.output


# -- task commands ---------------------------------------------------------------------------


def test_task_create_turns_flags_into_the_spec_body(
    runner: CliRunner, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    api = use_api(monkeypatch, lambda r: httpx.Response(201, json=task_json(status="scheduled")))
    payload = tmp_path / "p.json"
    payload.write_text('{"report": [1, 2]}')
    result = runner.invoke(
        cli.app,
        [
            "task", "create",
            "--target-url", "https://example.com/hook",
            "--method", "put",
            "--header", "X-Thing: 1",
            "--payload", f"@{payload}",
            "--run-at", "2030-01-01T01:00:00+01:00",
            "--name", "send-report",
            "--queue", "reports",
            "--idempotency-key", "r-1",
            "--priority", "3",
            "--max-attempts", "7",
            "--timeout", "12.5",
            "--depends-on", "a", "--depends-on", "b",
            "--concurrency-key", "customer-42",
            "--label", "team=billing", "--label", "env=prod",
            "--url", "http://duetime.test:9000",
            "--api-key", "dt_flag",
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert api.clients == [("http://duetime.test:9000", "dt_flag")]
    assert api.requests[0].url == "http://duetime.test:9000/v1/tasks"
    assert api.body() == {
        "target": {
            "type": "http",
            "url": "https://example.com/hook",
            "method": "PUT",
            "headers": {"X-Thing": "1"},
        },
        "payload": {"report": [1, 2]},
        "run_at": "2030-01-01T01:00:00+01:00",
        "name": "send-report",
        "queue": "reports",
        "idempotency_key": "r-1",
        "priority": 3,
        "retry": {"max_attempts": 7},
        "timeout_seconds": 12.5,
        "depends_on": ["a", "b"],
        "concurrency_key": "customer-42",
        "labels": {"team": "billing", "env": "prod"},
    }
    printed = json.loads(result.stdout)
    assert printed["id"] == TASK_ID and printed["status"] == "scheduled"
    assert result.stdout.startswith("{\n  ")  # pretty


def test_task_create_worker_with_delay_and_env_credentials(
    runner: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    api = use_api(monkeypatch, lambda r: httpx.Response(201, json=task_json()))
    env = {"DUETIME_URL": "http://env.test", "DUETIME_API_KEY": "dt_env"}
    result = runner.invoke(
        cli.app, ["task", "create", "--worker", "--delay", "30", "--payload", "null"], env=env
    )
    assert result.exit_code == 0, result.output
    assert api.clients == [("http://env.test", "dt_env")]
    assert api.body() == {"target": {"type": "worker"}, "delay_seconds": 30.0, "payload": None}


@pytest.mark.parametrize(
    ("args", "words"),
    [
        ([], "exactly one of"),
        (["--worker", "--target-url", "http://x"], "exactly one of"),
        (["--worker", "--label", "nolabel"], "KEY=VALUE"),
        (["--worker", "--payload", "{nope"], "--payload is not valid JSON"),
        (["--worker", "--run-at", "2030-01-01T00:00:00"], "needs an offset"),
        (["--target-url", "http://x", "--header", "novalue"], "KEY:VALUE"),
    ],
)
def test_task_create_usage_errors(
    runner: CliRunner, monkeypatch: pytest.MonkeyPatch, args: list[str], words: str
) -> None:
    api = use_api(monkeypatch, lambda r: httpx.Response(500))
    result = runner.invoke(cli.app, ["task", "create", *args])
    assert result.exit_code == 2, result.output
    assert words in result.stderr
    assert api.requests == []


def test_api_errors_are_one_line_on_stderr(
    runner: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_api(monkeypatch, lambda r: not_found(r.url.path))
    result = runner.invoke(cli.app, ["task", "get", "missing"])
    assert result.exit_code == 3  # not found
    assert result.stdout == ""
    assert result.stderr == "error: 404 Not found: no task with that id for this tenant\n"


def test_validation_errors_name_the_field(
    runner: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = {
        "type": "urn:duetime:problem:validation",
        "title": "Invalid request",
        "status": 422,
        "detail": "target.url: must be an absolute URL",
        "field": "target.url",
    }
    use_api(monkeypatch, lambda r: httpx.Response(422, json=body))
    result = runner.invoke(cli.app, ["task", "create", "--target-url", "nope"])
    assert result.exit_code == 6  # invalid input
    assert result.stderr == (
        "error: 422 Invalid request: target.url: must be an absolute URL (field: target.url)\n"
    )


def test_unreachable_server_is_one_line(runner: CliRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    use_api(monkeypatch, refuse)
    result = runner.invoke(cli.app, ["task", "get", TASK_ID])
    assert result.exit_code == 5  # unreachable
    assert result.stderr.startswith("error: cannot reach http://127.0.0.1:8080")
    assert "Traceback" not in result.output


def test_task_get_cancel_retry_attempts(runner: CliRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    attempt = {
        "task_id": TASK_ID,
        "number": 1,
        "started_at": "2030-01-01T00:00:00Z",
        "finished_at": "2030-01-01T00:00:01Z",
        "outcome": "succeeded",
        "duration_ms": 1000.0,
    }

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/attempts"):
            return httpx.Response(200, json={"items": [attempt]})
        status = {"cancel": "cancelled", "retry": "ready"}.get(request.url.path.split("/")[-1])
        return httpx.Response(200, json=task_json(status=status or "running"))

    api = use_api(monkeypatch, handler)
    outputs = {}
    for command in ("get", "cancel", "retry", "attempts"):
        result = runner.invoke(cli.app, ["task", command, TASK_ID])
        assert result.exit_code == 0, result.output
        outputs[command] = json.loads(result.stdout)
    assert [(r.method, r.url.path) for r in api.requests] == [
        ("GET", f"/v1/tasks/{TASK_ID}"),
        ("POST", f"/v1/tasks/{TASK_ID}/cancel"),
        ("POST", f"/v1/tasks/{TASK_ID}/retry"),
        ("GET", f"/v1/tasks/{TASK_ID}/attempts"),
    ]
    assert outputs["get"]["status"] == "running"
    assert outputs["cancel"]["status"] == "cancelled"
    assert outputs["retry"]["status"] == "ready"
    assert outputs["attempts"]["items"][0]["outcome"] == "succeeded"


def paged(request: httpx.Request) -> httpx.Response:
    cursor = request.url.params.get("cursor")
    if cursor is None:
        items, nxt = [task_json(id="b", name="two"), task_json(id="a-long-id")], "c1"
    else:
        items, nxt = [task_json(id="z")], None
    return httpx.Response(200, json={"items": items, "next_cursor": nxt})


def test_task_list_one_page_with_filters(
    runner: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    api = use_api(monkeypatch, paged)
    result = runner.invoke(
        cli.app,
        ["task", "list", "--status", "failed", "--status", "cancelled", "--label", "team=billing",
         "--run-after", "2030-01-01T00:00:00Z", "--limit", "2"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert api.requests[0].url.params.multi_items() == [
        ("status", "failed"),
        ("status", "cancelled"),
        ("label", "team:billing"),
        ("run_after", "2030-01-01T00:00:00Z"),
        ("limit", "2"),
    ]
    page = json.loads(result.stdout)
    assert [t["id"] for t in page["items"]] == ["b", "a-long-id"]
    assert page["next_cursor"] == "c1"


def test_task_list_all_pages_and_formats(
    runner: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_api(monkeypatch, paged)
    every = runner.invoke(cli.app, ["task", "list", "--all"])
    assert every.exit_code == 0, every.output
    assert [t["id"] for t in json.loads(every.stdout)["items"]] == ["b", "a-long-id", "z"]

    lines = runner.invoke(cli.app, ["task", "list", "--all", "-o", "jsonl"])
    assert [json.loads(line)["id"] for line in lines.stdout.splitlines()] == ["b", "a-long-id", "z"]

    table = runner.invoke(cli.app, ["task", "list", "-o", "table"])
    rows = table.stdout.splitlines()
    assert rows[0].split() == ["ID", "STATUS", "NAME", "QUEUE", "RUN_AT", "ATTEMPTS"]
    assert rows[1].split() == ["b", "ready", "two", "default", "2030-01-01T00:00:00Z", "0"]
    assert rows[2].split()[:3] == ["a-long-id", "ready", "-"]
    assert rows[1].index("ready") == rows[2].index("ready")  # aligned columns
    assert table.stderr == "next cursor: c1\n"

    both = runner.invoke(cli.app, ["task", "list", "--all", "--cursor", "c1"])
    assert both.exit_code == 2


def test_version_and_distinct_exit_codes(
    runner: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    from duetime import __version__

    shown = runner.invoke(cli.app, ["--version"])
    assert shown.exit_code == 0 and shown.stdout == f"duetime {__version__}\n"
    conflict = {
        "type": "urn:duetime:problem:conflict",
        "title": "Conflict",
        "status": 409,
        "detail": "task is finished",
    }
    use_api(monkeypatch, lambda r: httpx.Response(409, json=conflict))
    assert runner.invoke(cli.app, ["task", "cancel", TASK_ID]).exit_code == 4
    unavailable = {**conflict, "status": 503, "title": "Store unavailable", "detail": "down"}
    use_api(monkeypatch, lambda r: httpx.Response(503, json=unavailable))
    assert runner.invoke(
        cli.app, ["task", "get", TASK_ID, "--url", "http://127.0.0.1:1"]
    ).exit_code in (5,)
    assert runner.invoke(cli.app, ["task", "list", "--limit", "many"]).exit_code == 2  # usage


def test_every_api_command_prints_json_yaml_or_a_table(
    runner: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    import yaml

    use_api(monkeypatch, lambda r: httpx.Response(200, json=task_json(labels={"team": "b"})))
    as_json = runner.invoke(cli.app, ["task", "get", TASK_ID])
    as_yaml = runner.invoke(cli.app, ["task", "get", TASK_ID, "-o", "yaml"])
    assert as_yaml.exit_code == 0, as_yaml.output
    assert yaml.safe_load(as_yaml.stdout) == json.loads(as_json.stdout)
    table = runner.invoke(cli.app, ["task", "get", TASK_ID, "-o", "table"])
    fields = dict(line.split(None, 1) for line in table.stdout.splitlines()[1:] if " " in line)
    assert fields["id"].strip() == TASK_ID and fields["labels"].strip() == '{"team":"b"}'
    # Every API command takes -o.
    commands = [
        ["task", "create", "--help"],
        ["task", "cancel", "--help"],
        ["schedule", "get", "--help"],
        ["schedule", "list", "--help"],
        ["queue", "list", "--help"],
        ["queue", "set", "--help"],
        ["tenant", "create", "--help"],
    ]
    for command in commands:
        assert "--output" in runner.invoke(cli.app, command).stdout, command


def test_piped_tables_keep_whole_values(runner: CliRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    long_id = "0190f000-0000-7000-8000-000000000001"
    page = {"items": [task_json(id=long_id, name="a-rather-long-task-name")], "next_cursor": None}
    use_api(monkeypatch, lambda r: httpx.Response(200, json=page))
    table = runner.invoke(cli.app, ["task", "list", "-o", "table"])
    assert table.stdout.splitlines()[1].split()[:3] == [long_id, "ready", "a-rather-long-task-name"]
