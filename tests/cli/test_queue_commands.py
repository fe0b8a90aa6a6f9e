"""``duetime queue ...`` against the real API in process (SQLite, the test's clock): a change of
one setting keeps the others, contradictions are refused, and the table shows what holds a
queue's tasks."""

from __future__ import annotations

import orjson
from cli_helpers import LocalApi
from typer.testing import CliRunner

from duetime import cli
from duetime.sdk import worker_target


def test_queue_pause_resume(local_api: LocalApi) -> None:
    runner = CliRunner()
    paused = runner.invoke(cli.app, ["queue", "pause", "reports"])
    assert paused.exit_code == 0, paused.output
    assert orjson.loads(paused.stdout)["paused"] is True
    got = runner.invoke(cli.app, ["queue", "get", "reports"])
    assert orjson.loads(got.stdout)["paused"] is True
    resumed = runner.invoke(cli.app, ["queue", "resume", "reports"])
    assert orjson.loads(resumed.stdout)["paused"] is False
    bad = runner.invoke(cli.app, ["queue", "set", "reports", "--max-concurrency", "0"])
    assert bad.exit_code == 6 and "max_concurrency" in bad.output


def test_queue_set_changes_only_what_is_given(local_api: LocalApi) -> None:
    runner = CliRunner()
    assert runner.invoke(cli.app, ["queue", "pause", "reports"]).exit_code == 0
    limited = runner.invoke(cli.app, ["queue", "set", "reports", "--max-concurrency", "5"])
    assert limited.exit_code == 0, limited.output
    shown = orjson.loads(limited.stdout)
    assert shown["max_concurrency"] == 5 and shown["paused"] is True  # still paused
    active = orjson.loads(runner.invoke(cli.app, ["queue", "set", "reports", "--active"]).stdout)
    assert active["paused"] is False and active["max_concurrency"] == 5  # limit kept
    free = orjson.loads(runner.invoke(cli.app, ["queue", "set", "reports", "--unlimited"]).stdout)
    assert free["max_concurrency"] is None and free["paused"] is False
    assert runner.invoke(cli.app, ["queue", "set", "reports"]).exit_code == 2


def _run(*args: str, code: int = 0) -> dict[str, object]:
    result = CliRunner().invoke(cli.app, list(args))
    assert result.exit_code == code, (args, result.output)
    return orjson.loads(result.stdout) if code == 0 else {}


def test_queue_set_flow_limits_then_get_shows_them(local_api: LocalApi) -> None:
    _run("queue", "set", "reports", "--rate", "5", "--burst", "10", "--per-key", "1")
    got = _run("queue", "get", "reports")
    assert (got["rate_limit_per_second"], got["burst"], got["max_concurrency_per_key"]) == (
        5.0,
        10,
        1,
    )
    assert got["tokens"] == 10.0 and got["held_by"] == []
    assert got["max_concurrency"] is None and got["paused"] is False

    faster = _run("queue", "set", "reports", "--rate", "8")
    assert (faster["rate_limit_per_second"], faster["burst"]) == (8.0, 10)  # burst kept
    assert faster["max_concurrency_per_key"] == 1
    default_burst = _run("queue", "set", "reports", "--no-burst", "--max-concurrency", "3")
    assert (default_burst["burst"], default_burst["rate_limit_per_second"]) == (None, 8.0)
    assert default_burst["max_concurrency"] == 3 and default_burst["max_concurrency_per_key"] == 1
    _run("queue", "set", "reports", "--burst", "4")
    no_rate = _run("queue", "set", "reports", "--no-rate")
    assert (no_rate["rate_limit_per_second"], no_rate["burst"], no_rate["tokens"]) == (
        None,
        None,
        None,
    )
    assert no_rate["max_concurrency"] == 3 and no_rate["max_concurrency_per_key"] == 1
    no_key = _run("queue", "set", "reports", "--no-per-key")
    assert no_key["max_concurrency_per_key"] is None and no_key["max_concurrency"] == 3
    free = _run("queue", "set", "reports", "--no-max-concurrency")
    assert free["max_concurrency"] is None


def test_queue_set_refuses_contradictions(local_api: LocalApi) -> None:
    for args in (
        ["--rate", "5", "--no-rate"],
        ["--burst", "5", "--no-rate"],
        ["--burst", "5", "--no-burst"],
        ["--per-key", "1", "--no-per-key"],
        ["--max-concurrency", "1", "--unlimited"],
    ):
        _run("queue", "set", "reports", *args, code=2)
    refused = CliRunner().invoke(cli.app, ["queue", "set", "fresh", "--burst", "3"])
    assert refused.exit_code == 6 and "burst" in refused.output  # no rate to size
    refused = CliRunner().invoke(cli.app, ["queue", "set", "fresh", "--rate", "0"])
    assert refused.exit_code == 6 and "rate_limit_per_second" in refused.output


def test_queue_pause_resume_keep_every_setting(local_api: LocalApi) -> None:
    with local_api.client() as client:
        client.put_queue(
            "reports",
            max_concurrency=7,
            rate_limit_per_second=2.5,
            burst=6,
            max_concurrency_per_key=1,
            retention={"succeeded": "P3D"},
        )
    kept = {
        "max_concurrency": 7,
        "rate_limit_per_second": 2.5,
        "burst": 6,
        "max_concurrency_per_key": 1,
        "retention": {"succeeded": "P3D"},
    }
    paused = _run("queue", "pause", "reports")
    assert paused["paused"] is True and {k: paused[k] for k in kept} == kept
    resumed = _run("queue", "resume", "reports")
    assert resumed["paused"] is False and {k: resumed[k] for k in kept} == kept
    again = _run("queue", "set", "reports", "--paused")
    assert again["paused"] is True and {k: again[k] for k in kept} == kept


def test_queue_list_table_shows_what_waits_and_what_holds_it(local_api: LocalApi) -> None:
    with local_api.client() as client:
        client.create_task(target=worker_target(), queue="reports")
    _run("queue", "set", "reports", "--paused", "--rate", "2", "--burst", "3")
    table = CliRunner().invoke(cli.app, ["queue", "list", "-o", "table"])
    assert table.exit_code == 0, table.output
    header, row = table.stdout.splitlines()[:2]
    assert header.split() == [
        "NAME",
        "PAUSED",
        "READY",
        "RUNNING",
        "OLDEST_DUE_LAG_SECONDS",
        "MAX_CONCURRENCY",
        "RATE_LIMIT_PER_SECOND",
        "TOKENS",
        "HELD_BY",
    ]
    assert row.split() == ["reports", "true", "1", "0", "0.0", "-", "2.0", "3.0", '["paused"]']
    listed = orjson.loads(CliRunner().invoke(cli.app, ["queue", "list"]).stdout)
    assert [(q["name"], q["tokens"], q["held_by"]) for q in listed] == [
        ("reports", 3.0, ["paused"])
    ]


def test_queue_commands_keep_the_keyed_flow_rules(local_api: LocalApi) -> None:
    """A command that changes one setting keeps a queue's keyed rules; --per-key moves the
    key limit's max_concurrency with it."""
    with local_api.client() as client:
        client.put_queue(
            "keyed",
            key_limit={"key": "labels.tenant", "rate": "5/s", "max_concurrency": 2},
            max_concurrency_per_key=2,
            unique={"key": "payload.order", "period": "PT1H"},
        )
    paused = _run("queue", "pause", "keyed")
    assert paused["paused"] is True
    assert paused["key_limit"] == {"key": "labels.tenant", "rate": "5/s", "max_concurrency": 2}
    assert paused["unique"]["period"] == "PT1H"
    wider = _run("queue", "set", "keyed", "--per-key", "3")
    assert wider["key_limit"]["max_concurrency"] == 3 and wider["max_concurrency_per_key"] == 3
    gone = _run("queue", "set", "keyed", "--no-per-key")
    assert gone["key_limit"] == {"key": "labels.tenant", "rate": "5/s"}
    assert gone["max_concurrency_per_key"] is None
