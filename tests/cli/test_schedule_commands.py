"""``duetime schedule ...`` against the real API in process (SQLite, time pinned): every command,
its usage errors, and choices checked before any call."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from cli_helpers import LocalApi
from typer.testing import CliRunner

from duetime import cli
from duetime.clock import FakeClock

T0 = datetime(2030, 1, 1, tzinfo=UTC)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)


def run(runner: CliRunner, *args: str) -> object:
    result = runner.invoke(cli.app, ["schedule", *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_schedule_commands(runner: CliRunner, local_api: LocalApi) -> None:
    made = run(
        runner, "create", "--cron", "30 2 * * *", "--timezone", "America/New_York",
        "--worker", "--name", "nightly", "--payload", '{"k": 1}', "--label", "team=ops",
    )  # fmt: skip
    assert isinstance(made, dict)
    sid = made["id"]
    assert made["task"]["labels"] == {"team": "ops"} and made["task"]["payload"] == {"k": 1}
    listed = run(runner, "list")
    assert isinstance(listed, dict) and [s["id"] for s in listed["items"]] == [sid]
    assert isinstance(got := run(runner, "get", sid), dict) and got["cron"] == "30 2 * * *"
    up = run(runner, "upcoming", sid, "--after", "2030-03-09T12:00:00Z", "--count", "1")
    assert up == {"items": [{"at": "2030-03-10T03:00:00-04:00", "note": up["items"][0]["note"]}]}  # type: ignore[index]
    assert isinstance(p := run(runner, "pause", sid, "--note", "hold"), dict) and p["paused"]
    assert isinstance(t := run(runner, "trigger", sid), dict) and t["schedule_id"] == sid
    assert isinstance(r := run(runner, "resume", sid), dict) and not r["paused"]
    assert isinstance(u := run(runner, "update", sid, "--jitter", "9"), dict)
    assert u["jitter_seconds"] == 9
    ticks = run(runner, "ticks", sid, "--outcome", "triggered")
    assert isinstance(ticks, dict) and [x["outcome"] for x in ticks["items"]] == ["triggered"]
    revs = run(runner, "revisions", sid)
    assert isinstance(revs, dict) and revs["items"][0]["action"] == "update"
    filled = run(
        runner, "backfill", sid, "--start", "2029-12-25T00:00:00Z",
        "--end", "2029-12-31T23:59:00Z", "--rate", "10", "--yes",
    )  # fmt: skip
    assert isinstance(filled, dict) and filled["created"] == 7
    assert isinstance(d := run(runner, "delete", sid), dict) and d["deleted"] is True
    missing = runner.invoke(cli.app, ["schedule", "get", sid])
    assert missing.exit_code == 3 and "error:" in missing.output


def test_schedule_create_usage_errors(runner: CliRunner, local_api: LocalApi) -> None:
    no_task = runner.invoke(cli.app, ["schedule", "create", "--every", "PT1M"])
    assert no_task.exit_code == 2 and "--target-url" in no_task.output
    both = runner.invoke(
        cli.app, ["schedule", "create", "--every", "PT1M", "--worker", "--task", "{}"]
    )
    assert both.exit_code == 2
    bad = runner.invoke(cli.app, ["schedule", "create", "--every", "PT0M", "--worker"])
    assert bad.exit_code == 6 and "every" in bad.output


def test_cli_schedule_choices_are_checked_before_any_call(
    runner: CliRunner, local_api: LocalApi
) -> None:
    bad = runner.invoke(
        cli.app, ["schedule", "create", "--every", "PT1M", "--worker", "--overlap", "sometimes"]
    )
    assert bad.exit_code == 2 and "sometimes" in bad.output
    good = runner.invoke(
        cli.app, ["schedule", "create", "--every", "PT1M", "--worker", "--overlap", "skip"]
    )
    assert good.exit_code == 0, good.output
    assert json.loads(good.stdout)["overlap"] == "skip"


def test_schedule_list_table_shows_key_name_next_run_and_pause(
    runner: CliRunner, local_api: LocalApi
) -> None:
    with local_api.client() as client:
        keyed = client.ensure_schedule(
            "nightly-report",
            cron="30 2 * * *",
            timezone="Europe/Paris",
            task={"name": "send-report", "target": {"type": "worker"}},
        )
        plain = client.create_schedule(every="PT15M", task={"target": {"type": "worker"}})
        client.pause_schedule(plain.id)
    table = runner.invoke(cli.app, ["schedule", "list", "-o", "table"])
    assert table.exit_code == 0, table.output
    header, *rows = (line.split() for line in table.stdout.splitlines())
    assert header == ["ID", "KEY", "NAME", "SCHEDULE", "TIMEZONE", "NEXT_RUN_AT", "PAUSED"]
    assert rows[0][1:] == ["-", "-", "PT15M", "UTC", "-", "true"]  # newest first
    assert rows[1][1:5] == ["nightly-report", "send-report", "30", "2"]
    assert rows[1][-3:] == ["Europe/Paris", "2030-01-01T01:30:00Z", "false"]
    assert [row[0] for row in rows] == [plain.id, keyed.id]  # whole: they name schedules
