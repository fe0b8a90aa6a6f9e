"""Log set-up: the settings line shows no secret, JSON lines carry the record's fields, the
HTTP clients' per-request INFO lines are silenced, and a bad format is refused."""

from __future__ import annotations

import io
import json
import logging

import pytest

from duetime.config import Settings, load_settings
from duetime.errors import ConfigError
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
