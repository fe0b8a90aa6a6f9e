"""``DUETIME_*`` variables are read strictly: a bad value or an unknown variable is a one-line
error naming it, never a silent default."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from duetime import cli
from duetime.config import check_sqlite_url, load_settings
from duetime.errors import ConfigError


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"DUETIME_LOG_LEVEL": "verbose"}, "DUETIME_LOG_LEVEL='verbose': use one of debug"),
        ({"DUETIME_ENGINE": "flase"}, "DUETIME_ENGINE='flase'"),
        ({"DUETIME_PORT": "http"}, "DUETIME_PORT='http'"),
        ({"DUETIME_ADMIN_TOKN": "x"}, "unknown setting DUETIME_ADMIN_TOKN (did you mean"),
    ],
)
def test_bad_values_and_unknown_variables_are_errors(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        load_settings({}, env)


def test_good_values_parse() -> None:
    env = {
        "DUETIME_ENGINE": "off",
        "DUETIME_ALLOW_PRIVATE_TARGETS": "YES",
        "DUETIME_LOG_LEVEL": "WARNING",
        "DUETIME_URL": "http://127.0.0.1:1",  # the client's: known
        "DUETIME_TEST_PG_URL": "postgresql://x",  # the test suite's: known by prefix
    }
    settings = load_settings({}, env)
    assert settings.engine is False and settings.allow_private_targets is True
    assert settings.log_level == "WARNING"


def test_sqlite_url_that_means_an_absolute_path_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=r"sqlite:////tmp/x.db for /tmp/x.db"):
        check_sqlite_url("sqlite:///tmp/x.db")
    assert check_sqlite_url("sqlite:////tmp/x.db") == "sqlite:////tmp/x.db"
    assert check_sqlite_url("sqlite:///./tmp/x.db") == "sqlite:///./tmp/x.db"
    assert check_sqlite_url("sqlite:///x.db") == "sqlite:///x.db"
    (tmp_path / "tmp").mkdir()  # a relative ./tmp exists: the relative reading is meant
    assert check_sqlite_url("sqlite:///tmp/x.db") == "sqlite:///tmp/x.db"


def test_cli_reports_them_in_one_line_without_a_traceback(tmp_path: Path) -> None:
    runner = CliRunner()
    db = f"sqlite:///{tmp_path}/d.db"
    for env in ({"DUETIME_LOG_LEVEL": "verbose"}, {"DUETIME_ENGINE": "maybe"}):
        result = runner.invoke(cli.app, ["migrate", "--db", db], env=env)
        assert result.exit_code == 1, result.output
        assert result.stderr.startswith("error: DUETIME_") and result.stderr.count("\n") == 1
    worker = runner.invoke(cli.app, ["worker", "x:y"], env={"DUETIME_LOG_LEVEL": "verbose"})
    assert worker.exit_code == 2 and "use one of" in worker.stderr
