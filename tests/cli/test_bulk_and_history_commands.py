"""``duetime task replay``, ``task cancel-matching``, ``schedule backfill`` (the bulk commands:
counted with --dry-run, asked first, refused unasked without a terminal) and ``duetime history``,
against the real API in process (SQLite)."""

from __future__ import annotations

from datetime import UTC, datetime

import orjson
import pytest
from cli_helpers import LocalApi
from typer.testing import CliRunner, Result

from duetime import cli
from duetime.cli import bulk
from duetime.clock import FakeClock
from duetime.sdk import worker_target


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(datetime(2030, 1, 1, tzinfo=UTC))


def test_replay_and_cancel_matching_change_what_the_filters_match(local_api: LocalApi) -> None:
    with local_api.client() as client:
        client.create_task(target=worker_target(), queue="q", run_at=None)
        client.create_task(target=worker_target(), queue="q", delay_seconds=3600)
    runner = CliRunner()
    cancelled = runner.invoke(
        cli.app, ["task", "cancel-matching", "--status", "scheduled", "--yes"]
    )
    assert cancelled.exit_code == 0, cancelled.output
    assert orjson.loads(cancelled.stdout) == {"matched": 1, "changed": 1}
    replayed = runner.invoke(
        cli.app, ["task", "replay", "--status", "cancelled", "--queue", "q", "--rate", "50", "-y"]
    )
    assert replayed.exit_code == 0, replayed.output
    assert orjson.loads(replayed.stdout) == {"matched": 1, "changed": 1}
    bad = runner.invoke(cli.app, ["task", "replay", "--status", "running", "--yes"])
    assert bad.exit_code == 6 and "status" in bad.output  # validation


def test_history_pages_and_every_record_as_json_lines(local_api: LocalApi) -> None:
    with local_api.client() as client:
        task = client.create_task(target=worker_target(), queue="q")
        client.cancel_task(task.id)
    runner = CliRunner()
    out = runner.invoke(cli.app, ["history", "--task-id", task.id])
    assert out.exit_code == 0, out.output
    items = orjson.loads(out.stdout)["items"]
    assert [(e["from_status"], e["to_status"], e["actor"]) for e in items] == [
        ("ready", "cancelled", "dev"),
        (None, "ready", "api"),
    ]
    lines = runner.invoke(cli.app, ["history", "--all", "--kind", "task", "--limit", "1"])
    assert lines.exit_code == 0 and len(lines.stdout.strip().splitlines()) == 2
    bad = runner.invoke(cli.app, ["history", "--kind", "nope"])
    assert bad.exit_code == 6 and "kind" in bad.output


def answer(result: Result) -> str:
    """What a command that asked printed on stdout, less the typed answer (`` y``) that
    CliRunner echoes there, where a terminal would have shown it as typed."""
    return result.stdout.removeprefix(" y\n")


def _failed_tasks(local_api: LocalApi, n: int, queue: str = "mail") -> list[str]:
    """``n`` tasks of ``queue``, leased and failed for good: the dead-letter set."""
    with local_api.client() as client:
        ids = [client.create_task(target=worker_target(), queue=queue).id for _ in range(n)]
        for lease in client.lease_tasks(queue, worker_id="w", max_tasks=n, wait_seconds=0):
            client.fail_lease(lease.lease_id, error="down", retryable=False)
    return ids


def _statuses(local_api: LocalApi, ids: list[str]) -> list[str]:
    with local_api.client() as client:
        return [client.get_task(i).status for i in ids]


def test_dry_run_counts_what_would_change_and_changes_nothing(local_api: LocalApi) -> None:
    ids = _failed_tasks(local_api, 3)
    runner = CliRunner()
    counted = runner.invoke(cli.app, ["task", "replay", "--queue", "mail", "--dry-run"])
    assert counted.exit_code == 0, counted.output
    assert orjson.loads(counted.stdout) == {
        "matched": 3,
        "changed": 0,
        "more": False,
        "dry_run": True,
    }
    capped = runner.invoke(cli.app, ["task", "replay", "--dry-run", "--max-tasks", "2"])
    assert orjson.loads(capped.stdout)["matched"] == 2 and orjson.loads(capped.stdout)["more"]
    # cancel-matching counts the unfinished tasks (its default), not the failed ones
    nothing = runner.invoke(cli.app, ["task", "cancel-matching", "--dry-run", "-o", "yaml"])
    assert nothing.exit_code == 0 and "matched: 0" in nothing.stdout
    assert _statuses(local_api, ids) == ["failed"] * 3


def test_without_yes_or_a_terminal_a_bulk_command_refuses(local_api: LocalApi) -> None:
    ids = _failed_tasks(local_api, 2)
    for command in (["task", "replay"], ["task", "cancel-matching", "--queue", "mail"]):
        refused = CliRunner().invoke(cli.app, command)
        assert refused.exit_code == 2
        [line] = refused.stderr.splitlines()
        assert line.startswith("error: ") and "--yes" in line and "--dry-run" in line
    assert _statuses(local_api, ids) == ["failed", "failed"]


def test_on_a_terminal_a_bulk_command_asks_with_the_count(
    local_api: LocalApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bulk, "interactive", lambda: True)
    ids = _failed_tasks(local_api, 2)
    declined = CliRunner().invoke(cli.app, ["task", "replay"], input="n\n")
    assert declined.exit_code == 1
    assert "replay 2 tasks?" in declined.stderr
    assert declined.stderr.endswith("error: not confirmed: nothing changed\n")
    assert _statuses(local_api, ids) == ["failed", "failed"]
    accepted = CliRunner().invoke(cli.app, ["task", "replay"], input="y\n")
    assert accepted.exit_code == 0, accepted.output
    assert orjson.loads(answer(accepted)) == {"matched": 2, "changed": 2}
    assert _statuses(local_api, ids) == ["ready", "ready"]


def test_backfill_counts_its_occurrences_and_asks(
    local_api: LocalApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    with local_api.client() as client:
        schedule = client.ensure_schedule(
            "daily", cron="30 2 * * *", task={"target": {"type": "worker"}}
        )
    week = ["--start", "2029-12-25T00:00:00Z", "--end", "2029-12-31T23:59:00Z"]
    counted = CliRunner().invoke(cli.app, ["schedule", "backfill", "daily", *week, "--dry-run"])
    assert counted.exit_code == 0, counted.output
    assert orjson.loads(counted.stdout)["matched"] == 7
    capped = CliRunner().invoke(
        cli.app, ["schedule", "backfill", "daily", *week, "--dry-run", "--max-runs", "3"]
    )
    assert (orjson.loads(capped.stdout)["matched"], orjson.loads(capped.stdout)["more"]) == (
        3,
        True,
    )
    refused = CliRunner().invoke(cli.app, ["schedule", "backfill", "daily", *week])
    assert refused.exit_code == 2 and "--yes" in refused.stderr
    monkeypatch.setattr(bulk, "interactive", lambda: True)
    made = CliRunner().invoke(
        cli.app, ["schedule", "backfill", schedule.id, *week, "--rate", "100"], input="y\n"
    )
    assert made.exit_code == 0, made.output
    assert "make 7 occurrences?" in made.stderr
    assert orjson.loads(answer(made))["created"] == 7
