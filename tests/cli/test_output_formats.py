"""``-o json|yaml|table|jsonl``: what each prints, on every API command."""

from __future__ import annotations

import json

import httpx
import pytest
import typer
from cli_helpers import TASK_ID, leaves, task_json, use_api
from typer.testing import CliRunner

from duetime import cli


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


def test_piped_tables_keep_whole_values_and_short_ids(
    runner: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = "0190f000-7c3a-7000-8000-000000000001", "0190f000-7c3a-7001-8000-000000000002"
    page = {
        "items": [
            task_json(id=first, name="a-rather-long-task-name-that-a-terminal-would-cut"),
            task_json(id=second, name="b"),
        ],
        "next_cursor": None,
    }
    use_api(monkeypatch, lambda r: httpx.Response(200, json=page))
    table = runner.invoke(cli.app, ["task", "list", "-o", "table"])
    rows = [row.split() for row in table.stdout.splitlines()[1:]]
    # The ids as short as keeps them apart (and at least their millisecond), the name whole.
    assert [row[0] for row in rows] == ["0190f000-7c3a-7000", "0190f000-7c3a-7001"]
    assert rows[0][1] == "a-rather-long-task-name-that-a-terminal-would-cut"
    alone = {"items": [task_json(id=first)], "next_cursor": None}
    use_api(monkeypatch, lambda r: httpx.Response(200, json=alone))
    table = runner.invoke(cli.app, ["task", "list", "-o", "table"])
    assert table.stdout.splitlines()[1].split()[0] == "0190f000-7c3a"


def test_every_api_command_takes_dash_o() -> None:
    every = leaves(typer.main.get_command(cli.app))
    api = {words: c for words, c in every.items() if any("--url" in p.opts for p in c.params)}
    assert len(api) > 40  # every command that talks to a server, found by its --url
    missing = [
        " ".join(words)
        for words, command in api.items()
        if not any({"-o", "--output"} <= set(p.opts) for p in command.params)
    ]
    assert missing == []
    for words in (("history",), ("task", "replay"), ("task", "cancel-matching"), ("worker",)):
        assert words in api


def test_history_prints_as_a_table(runner: CliRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    record = {
        "id": 1,
        "at": "2030-01-01T00:00:00Z",
        "kind": "task",
        "task_id": TASK_ID,
        "name": "send-report",
        "from_status": None,
        "to_status": "ready",
        "actor": "api",
    }
    use_api(
        monkeypatch, lambda r: httpx.Response(200, json={"items": [record], "next_cursor": None})
    )
    table = runner.invoke(cli.app, ["history", "-o", "table"])
    assert table.exit_code == 0, table.output
    header, row = (line.split() for line in table.stdout.splitlines()[:2])
    assert header == [
        "AT",
        "KIND",
        "TASK_ID",
        "NAME",
        "FROM_STATUS",
        "TO_STATUS",
        "OUTCOME",
        "ACTOR",
    ]
    assert row == [
        "2030-01-01T00:00:00Z",
        "task",
        TASK_ID[:13],
        "send-report",
        "-",
        "ready",
        "-",
        "api",
    ]
    as_yaml = runner.invoke(cli.app, ["history", "--all", "-o", "yaml"])
    assert as_yaml.exit_code == 0 and "task_id:" in as_yaml.stdout
