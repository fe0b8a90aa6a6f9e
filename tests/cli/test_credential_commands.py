"""``duetime credential put|list|get|delete`` against the real API in process: a secret read
from stdin or a file, never printed back (name, kind and fingerprint only); ``task create
--credential`` names one; a put that names neither kind, or both, is bad usage."""

from __future__ import annotations

import json
import re
from pathlib import Path

from cli_helpers import LocalApi
from typer.testing import CliRunner

from duetime import cli

FINGERPRINT = re.compile(r"\*\*\*[0-9a-f]{8}")


def test_credentials_are_put_from_stdin_or_a_file_and_never_printed(
    runner: CliRunner, local_api: LocalApi, tmp_path: Path
) -> None:
    made = runner.invoke(
        cli.app,
        ["credential", "put", "billing-api", "--header", "Authorization", "--value", "-"],
        input="Bearer cli-tok-5a5a\n",
    )
    assert made.exit_code == 0, made.output
    shown = json.loads(made.stdout)
    assert (shown["name"], shown["kind"], shown["created"]) == ("billing-api", "header", True)
    assert FINGERPRINT.fullmatch(shown["fingerprint"])
    secret = tmp_path / "pw"
    secret.write_text("cli-pw-6b6b\n")
    basic = runner.invoke(
        cli.app,
        ["credential", "put", "legacy", "--basic-user", "svc", "--password", f"@{secret}"],
    )
    assert basic.exit_code == 0, basic.output
    listed = runner.invoke(cli.app, ["credential", "list", "-o", "table"])
    assert listed.exit_code == 0 and "billing-api" in listed.stdout and "legacy" in listed.stdout
    got = runner.invoke(cli.app, ["credential", "get", "billing-api"])
    assert json.loads(got.stdout)["fingerprint"] == shown["fingerprint"]
    task = runner.invoke(
        cli.app,
        ["task", "create", "--target-url", "https://hook.example/", "--credential", "billing-api"],
    )
    assert task.exit_code == 0, task.output
    assert json.loads(task.stdout)["target"]["auth"] == {"credential": "billing-api"}
    for result in (made, basic, listed, got, task):
        assert "cli-tok-5a5a" not in result.output and "cli-pw-6b6b" not in result.output
    # The value read from stdin went in whole, its trailing new line dropped.
    stored = local_api.client().get_credential("billing-api")
    assert stored.fingerprint == shown["fingerprint"]
    again = runner.invoke(
        cli.app,
        ["credential", "put", "billing-api", "--header", "Authorization", "--value", "-"],
        input="Bearer cli-tok-5a5a",
    )
    assert json.loads(again.stdout)["fingerprint"] == shown["fingerprint"], "the same secret"
    assert json.loads(again.stdout)["created"] is False
    deleted = runner.invoke(cli.app, ["credential", "delete", "legacy"])
    assert deleted.exit_code == 0 and json.loads(deleted.stdout) == {
        "name": "legacy",
        "deleted": True,
    }
    assert runner.invoke(cli.app, ["credential", "get", "legacy"]).exit_code == 3


def test_a_put_names_one_kind(runner: CliRunner, local_api: LocalApi) -> None:
    for args in (
        ["credential", "put", "x"],
        ["credential", "put", "x", "--header", "A", "--basic-user", "u"],
        ["credential", "put", "x", "--header", "A", "--password", "-"],
    ):
        result = runner.invoke(cli.app, args, input="v")
        assert result.exit_code == 2, (args, result.output)
    refused = runner.invoke(
        cli.app, ["credential", "put", "x", "--header", "Webhook-Id", "--value", "-"], input="v"
    )
    assert refused.exit_code == 6, refused.output  # a header duetime sets itself: 422
