"""``duetime keys rotate`` and ``keys list`` against a temp SQLite store: a rotation adds a key
that is published at once but signs only after the publish lead, sealed with the node's key."""

from __future__ import annotations

import json
from pathlib import Path

from cryptography.fernet import Fernet
from typer.testing import CliRunner

from duetime import cli


def test_keys_rotate_publishes_a_new_key_that_signs_later(
    runner: CliRunner, sqlite_url: str, tmp_path: Path
) -> None:
    env = {
        "DUETIME_SECRET_KEY": Fernet.generate_key().decode(),
        "DUETIME_DATA_DIR": str(tmp_path),
        "DUETIME_OIDC_KEY_PUBLISH_SECONDS": "600",
    }
    empty = runner.invoke(cli.app, ["keys", "list", "--db", sqlite_url], env=env)
    assert empty.exit_code == 0, empty.output
    assert json.loads(empty.stdout) == []

    first = runner.invoke(cli.app, ["keys", "rotate", "--db", sqlite_url], env=env)
    assert first.exit_code == 0, first.output
    (only,) = json.loads(first.stdout)
    assert only["generation"] == 1 and only["signing"] and only["published"]

    second = runner.invoke(cli.app, ["keys", "rotate", "--db", sqlite_url], env=env)
    assert second.exit_code == 0, second.output
    old, new = json.loads(second.stdout)
    assert old["kid"] == only["kid"] and old["signing"] and old["published"]
    assert new["generation"] == 2 and new["published"] and not new["signing"]
    assert new["signs_from"] > new["created_at"]  # published 600 s before it signs

    listed = runner.invoke(cli.app, ["keys", "list", "--db", sqlite_url], env=env)
    assert json.loads(listed.stdout) == [old, new]
    assert "PRIVATE" not in listed.stdout
