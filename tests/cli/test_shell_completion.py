"""Shell completion (README, "The CLI"): the root offers ``--install-completion`` and
``--show-completion``, and the completion it installs completes commands and options."""

from __future__ import annotations

from typer.testing import CliRunner

from duetime import cli


def test_completion_options_are_offered(runner: CliRunner) -> None:
    shown = runner.invoke(cli.app, ["--help"])
    assert "--install-completion" in shown.stdout and "--show-completion" in shown.stdout


def complete(runner: CliRunner, line: str) -> list[str]:
    """What bash completion offers for ``line`` (as the installed script asks for it)."""
    words = line.split(" ")
    env = {
        "_DUETIME_COMPLETE": "complete_bash",
        "COMP_WORDS": line,
        "COMP_CWORD": str(len(words) - 1),
    }
    done = runner.invoke(cli.app, [], env=env, prog_name="duetime")
    assert done.exit_code == 0, done.output
    return done.stdout.split()


def test_completion_completes_commands_and_options(runner: CliRunner) -> None:
    assert complete(runner, "duetime ta") == ["targets", "task"]
    assert set(complete(runner, "duetime task ca")) == {"cancel", "cancel-matching"}
    assert "--dry-run" in complete(runner, "duetime task replay --")
