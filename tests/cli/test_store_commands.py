"""The commands that open the store (``migrate``, ``tenant create``, ``serve``) against a temp
SQLite file: what they do, and their errors in one line."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from duetime import cli
from duetime.auth import hash_api_key
from duetime.config import Settings
from duetime.store import store_from_url


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
