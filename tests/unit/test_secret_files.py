"""``DUETIME_<NAME>_FILE`` for every secret setting (the form Kubernetes and Docker mount secrets
in), and ``DUETIME_API_KEY_FILE`` for the client, by the same rules: the value is the file's
content less one trailing newline; the variable and its file together, an unreadable file and an
empty one are each a one-line ConfigError naming them."""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import pytest

from duetime.config import SECRET_SETTINGS, Settings, load_settings
from duetime.errors import ConfigError
from duetime.sdk import AsyncClient, Client
from duetime.variables import client_api_key

TOKEN = "t" * 40
KEY = "Zx6hN2R4w2m1l1q5G0mZ6g0m8r9tq3y0lB8tq1aWb1E="


def test_every_secret_setting_is_a_setting() -> None:
    assert set(SECRET_SETTINGS) <= set(Settings.model_fields)
    assert {"db", "admin_token", "metrics_token", "secret_key"} <= set(SECRET_SETTINGS)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("admin_token", TOKEN),
        ("metrics_token", "metrics-reader-token"),
        ("secret_key", KEY),
        ("db", "postgresql://duetime:s3cret@db:5432/duetime"),
        ("archive_url", "s3://bucket/history"),
    ],
)
def test_a_secret_is_read_from_its_file(tmp_path: Path, name: str, value: str) -> None:
    secret = tmp_path / name
    secret.write_text(value + "\n")
    settings = load_settings(environ={f"DUETIME_{name.upper()}_FILE": str(secret)})
    assert getattr(settings, name) == value


def test_only_one_trailing_newline_is_dropped(tmp_path: Path) -> None:
    secret = tmp_path / "token"
    secret.write_text(TOKEN + "\r\n")
    assert load_settings(environ={"DUETIME_ADMIN_TOKEN_FILE": str(secret)}).admin_token == TOKEN
    secret.write_text(f" {TOKEN} ")
    got = load_settings(environ={"DUETIME_ADMIN_TOKEN_FILE": str(secret)}).admin_token
    assert got == f" {TOKEN} "


def test_the_file_is_read_from_the_process_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for variable in [v for v in os.environ if v.startswith("DUETIME_")]:
        monkeypatch.delenv(variable)
    secret = tmp_path / "token"
    secret.write_text(TOKEN)
    monkeypatch.setenv("DUETIME_ADMIN_TOKEN_FILE", str(secret))
    assert load_settings().admin_token == TOKEN


def test_a_flag_wins_over_the_file(tmp_path: Path) -> None:
    secret = tmp_path / "db"
    secret.write_text("postgresql://from-file/x")
    settings = load_settings({"db": "sqlite:///flag.db"}, {"DUETIME_DB_FILE": str(secret)})
    assert settings.db == "sqlite:///flag.db"


def test_variable_and_file_together_are_refused_naming_both(tmp_path: Path) -> None:
    secret = tmp_path / "token"
    secret.write_text(TOKEN)
    env = {"DUETIME_ADMIN_TOKEN": TOKEN, "DUETIME_ADMIN_TOKEN_FILE": str(secret)}
    with pytest.raises(ConfigError) as caught:
        load_settings(environ=env)
    message = str(caught.value)
    assert "DUETIME_ADMIN_TOKEN " in message and "DUETIME_ADMIN_TOKEN_FILE" in message
    assert "\n" not in message


def test_an_unreadable_file_is_a_one_line_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    with pytest.raises(ConfigError) as caught:
        load_settings(environ={"DUETIME_SECRET_KEY_FILE": str(missing)})
    message = str(caught.value)
    assert message.startswith(f"DUETIME_SECRET_KEY_FILE={str(missing)!r}: cannot read it")
    assert "No such file" in message and "\n" not in message
    with pytest.raises(ConfigError, match="cannot read it"):
        load_settings(environ={"DUETIME_SECRET_KEY_FILE": str(tmp_path)})  # a directory


def test_an_empty_file_is_refused(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.write_text("\n")
    with pytest.raises(ConfigError, match=r"DUETIME_METRICS_TOKEN_FILE=.*empty"):
        load_settings(environ={"DUETIME_METRICS_TOKEN_FILE": str(empty)})


def test_file_forms_exist_only_for_secrets() -> None:
    with pytest.raises(ConfigError, match=r"unknown setting DUETIME_PORT_FILE"):
        load_settings(environ={"DUETIME_PORT_FILE": "/dev/null"})
    with pytest.raises(ConfigError, match=r"did you mean DUETIME_ADMIN_TOKEN_FILE"):
        load_settings(environ={"DUETIME_ADMIN_TOKEN_FIL": "/dev/null"})


def test_the_client_reads_its_api_key_from_its_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DUETIME_API_KEY", raising=False)
    secret = tmp_path / "api_key"
    secret.write_text("dt_from_file\n")
    monkeypatch.setenv("DUETIME_API_KEY_FILE", str(secret))
    assert client_api_key() == "dt_from_file"
    seen: list[str | None] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("authorization"))
        return httpx.Response(200, json={"items": [], "next_cursor": None})

    with Client(transport=httpx.MockTransport(answer)) as client:
        client.list_queues()
    with Client(api_key="dt_given", transport=httpx.MockTransport(answer)) as client:
        client.list_queues()
    assert seen == ["Bearer dt_from_file", "Bearer dt_given"]
    assert client_api_key({"DUETIME_API_KEY": "dt_env"}) == "dt_env"
    assert client_api_key({}) is None
    assert load_settings(environ={"DUETIME_API_KEY_FILE": str(secret)}).port  # a known name


def test_the_client_api_key_file_follows_the_server_rules(tmp_path: Path) -> None:
    secret = tmp_path / "api_key"
    secret.write_text("dt_x")
    both = {"DUETIME_API_KEY": "dt_x", "DUETIME_API_KEY_FILE": str(secret)}
    with pytest.raises(ConfigError, match=r"^both DUETIME_API_KEY and DUETIME_API_KEY_FILE are"):
        client_api_key(both)
    missing = str(tmp_path / "nope")
    with pytest.raises(ConfigError, match=r"^DUETIME_API_KEY_FILE=.*: cannot read it \(No such"):
        client_api_key({"DUETIME_API_KEY_FILE": missing})
    secret.write_text("\n")
    with pytest.raises(ConfigError, match=r"^DUETIME_API_KEY_FILE=.*: the file is empty$"):
        client_api_key({"DUETIME_API_KEY_FILE": str(secret)})


async def test_the_async_client_refuses_a_key_and_its_file_together(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = tmp_path / "api_key"
    secret.write_text("dt_x")
    monkeypatch.setenv("DUETIME_API_KEY", "dt_x")
    monkeypatch.setenv("DUETIME_API_KEY_FILE", str(secret))
    with pytest.raises(ConfigError, match="DUETIME_API_KEY_FILE"):
        AsyncClient()
