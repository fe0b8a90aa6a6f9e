"""Log set-up: the settings line shows no secret and what is in force, JSON lines carry the
record's fields, every line a real node prints is JSON when asked (uvicorn's too), the HTTP
clients' per-request INFO lines are silenced, a bad format is refused, and a missing cold-tier
library is a warning only where the cold tier was asked for."""

from __future__ import annotations

import io
import json
import logging
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from duetime.bench.harness import free_port, wait_until
from duetime.config import Settings, load_settings
from duetime.engine.history import open_archive
from duetime.errors import ConfigError
from duetime.node.server import client_url
from duetime.observe.logs import (
    REDACTED,
    JsonFormatter,
    configure_logging,
    redact_url,
    settings_in_force,
)

ADMIN = "a" * 40
METRICS = "m" * 40


def test_settings_line_redacts_tokens_and_passwords() -> None:
    settings = Settings(
        db="postgresql://duetime:s3cret-pw@db.internal:5432/duetime",
        admin_token=ADMIN,
        metrics_token=METRICS,
    )
    shown = settings_in_force(settings)
    text = json.dumps(shown)
    assert ADMIN not in text and METRICS not in text and "s3cret-pw" not in text
    assert shown["admin_token"] == REDACTED and shown["metrics_token"] == REDACTED
    assert shown["db"] == f"postgresql://duetime:{REDACTED}@db.internal:5432/duetime"
    assert shown["dev_mode"] is False and shown["dispatch_concurrency"] == 512
    assert settings_in_force(Settings())["admin_token"] is None  # unset shows as unset


def test_redact_url_keeps_urls_without_password() -> None:
    assert (
        redact_url("postgresql://postgres@127.0.0.1/test") == "postgresql://postgres@127.0.0.1/test"
    )
    assert redact_url("sqlite:///x.db") == "sqlite:///x.db"
    assert redact_url("amqp://guest:guest@h/") == f"amqp://guest:{REDACTED}@h/"


def test_json_lines_carry_extra_fields() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("duetime.test.json")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        logger.warning(
            "task %s failed", "t1", extra={"task_id": "t1", "tenant": "acme", "attempt": 3}
        )
    finally:
        logger.removeHandler(handler)
    line = json.loads(stream.getvalue())
    assert line["message"] == "task t1 failed" and line["level"] == "warning"
    assert (line["task_id"], line["tenant"], line["attempt"]) == ("t1", "acme", 3)


def test_configure_logging_quiets_httpx_and_refuses_unknown_format() -> None:
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    try:
        logging.getLogger("httpx").setLevel(logging.NOTSET)
        configure_logging("info", "json")
        assert not logging.getLogger("httpx").isEnabledFor(logging.INFO)
        assert logging.getLogger("httpx").isEnabledFor(logging.WARNING)
        assert isinstance(root.handlers[0].formatter, JsonFormatter)
        with pytest.raises(ValueError, match="log format"):
            configure_logging("info", "xml")
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
    with pytest.raises(ConfigError, match="DUETIME_LOG_FORMAT"):
        load_settings(environ={"DUETIME_LOG_FORMAT": "yaml"}).check()


def test_settings_line_shows_private_targets_as_they_apply() -> None:
    assert settings_in_force(Settings())["allow_private_targets"] is True  # dev mode allows them
    assert settings_in_force(Settings(admin_token=ADMIN))["allow_private_targets"] is False
    shown = settings_in_force(Settings(admin_token=ADMIN, allow_private_targets=True))
    assert shown["allow_private_targets"] is True


def test_every_line_of_a_node_is_json_when_asked(tmp_path: Path) -> None:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("DUETIME_")}
    env.update(
        DUETIME_PORT=str(port), DUETIME_DATA_DIR=str(tmp_path / "data"), DUETIME_LOG_FORMAT="json"
    )
    node = subprocess.Popen(
        [sys.executable, "-m", "duetime", "serve"],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:

        def ready() -> bool:
            try:
                return httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).is_success
            except httpx.HTTPError:
                return False

        wait_until(ready, 60, "the node to answer /readyz")
        with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
            raw.sendall(b"NOT HTTP AT ALL\r\n\r\n")  # uvicorn logs it as an invalid request
            raw.recv(1024)
        node.send_signal(signal.SIGTERM)
        out, err = node.communicate(timeout=60)
    finally:
        if node.poll() is None:
            node.kill()
            node.communicate()
    assert node.returncode == 0, err
    lines = [line for line in (out + err).splitlines() if line.strip()]
    records = []
    for line in lines:
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            pytest.fail(f"not a JSON line: {line!r}")
    said = {(r["logger"], r["message"]) for r in records}
    assert ("uvicorn.error", f"Started server process [{node.pid}]") in said
    assert ("uvicorn.error", "Invalid HTTP request received.") in said
    assert ("uvicorn.error", "Shutting down") in said
    assert not any("color_message" in r for r in records)
    listening = [r for r in records if r.get("event") == "listening"]
    assert [r["client_url"] for r in listening] == [f"http://127.0.0.1:{port}"]
    assert f"DUETIME_URL=http://127.0.0.1:{port}" in listening[0]["message"]


@pytest.mark.parametrize(("configured", "level"), [(True, "WARNING"), (False, "DEBUG")])
def test_a_missing_cold_tier_library_warns_only_when_the_archive_was_asked_for(
    configured: bool, level: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setitem(sys.modules, "duetime.history.archive", None)  # as without pyarrow
    with caplog.at_level(logging.DEBUG, logger="duetime.engine"):
        assert open_archive("/nowhere", configured=configured) is None
    [record] = [r for r in caplog.records if "pyarrow" in r.getMessage()]
    assert record.levelname == level


@pytest.mark.parametrize(
    ("host", "url"),
    [
        ("127.0.0.1", "http://127.0.0.1:9100"),
        ("0.0.0.0", "http://127.0.0.1:9100"),
        ("::", "http://[::1]:9100"),
        ("::1", "http://[::1]:9100"),
        ("duetime.internal", "http://duetime.internal:9100"),
    ],
)
def test_the_start_up_line_tells_clients_a_url_they_can_reach(host: str, url: str) -> None:
    assert client_url(host, 9100) == url
