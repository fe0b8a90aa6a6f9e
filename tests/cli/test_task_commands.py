"""``duetime task ...`` through the SDK over an injected MockTransport: the flags become the API's
request, listings page and print in every format."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from cli_helpers import TASK_ID, task_json, use_api
from typer.testing import CliRunner

from duetime import cli


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
            "--depends-on", "0190f000-7c3a-7000-8000-00000000000a",
            "--depends-on", "0190f000-7c3a-7000-8000-00000000000b",
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
        "depends_on": [
            "0190f000-7c3a-7000-8000-00000000000a",
            "0190f000-7c3a-7000-8000-00000000000b",
        ],
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


def test_the_api_key_is_read_from_its_file(
    runner: CliRunner, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    api = use_api(monkeypatch, lambda r: httpx.Response(201, json=task_json()))
    secret = tmp_path / "api_key"
    secret.write_text("dt_file\n")
    env = {"DUETIME_URL": "http://env.test", "DUETIME_API_KEY_FILE": str(secret)}
    result = runner.invoke(cli.app, ["task", "create", "--worker"], env=env)
    assert result.exit_code == 0, result.output
    both = runner.invoke(
        cli.app, ["task", "create", "--worker"], env={**env, "DUETIME_API_KEY": "dt_env"}
    )
    assert api.clients == [("http://env.test", "dt_file")]
    assert both.exit_code == 1
    assert both.stderr.strip() == (
        "error: both DUETIME_API_KEY and DUETIME_API_KEY_FILE are set: keep one of them"
    )


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
    assert rows[0].split() == ["ID", "NAME", "QUEUE", "STATUS", "RUN_AT", "ATTEMPTS"]
    assert rows[1].split() == ["b", "two", "default", "ready", "2030-01-01T00:00:00Z", "0"]
    assert rows[2].split()[:4] == ["a-long-id", "-", "default", "ready"]
    assert rows[1].index("ready") == rows[2].index("ready")  # aligned columns
    assert table.stderr == "next cursor: c1\n"

    both = runner.invoke(cli.app, ["task", "list", "--all", "--cursor", "c1"])
    assert both.exit_code == 2
