"""Log set-up for every duetime process: text (default) or JSON lines
(``DUETIME_LOG_FORMAT=json``), the start-up line of the settings in force (secrets redacted),
and quiet HTTP-client loggers.

Every line a process logs goes through the one root handler, uvicorn's own too (``Started server
process``, ``Shutting down``, its error and access loggers): :func:`configure_logging` strips
the handlers uvicorn's default configuration would add and lets its loggers propagate, and the
node starts uvicorn with ``log_config=None`` so they are not put back. With JSON logs, every
line on stderr is therefore a JSON object.

A JSON line carries ``time``, ``level``, ``logger``, ``message`` and whatever the call site put
in ``extra`` — the attempt lines (:mod:`duetime.observe.endings`) add ``event``, ``task_id``,
``tenant``, ``attempt``, ``queue``, ``outcome``, ``failure_class`` and ``error``; leadership
changes add ``event``, ``node`` and ``leadership``.
"""

from __future__ import annotations

import logging
import re
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    from duetime.config import Settings

FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
REDACTED = "<redacted>"

# Attributes every LogRecord has: anything else on a record came from ``extra`` (less uvicorn's
# ``color_message``, the message again with terminal colour codes).
_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName"}
_STANDARD.add("color_message")
_SECRET_FIELDS = re.compile(r"token|secret|password|api_key", re.IGNORECASE)
_URL_PASSWORD = re.compile(r"(?P<head>[a-z][a-z0-9+.-]*://[^:/@\s]+:)[^@\s]*(?P<tail>@)")
_QUIET = ("httpx", "httpcore")
"""Loggers whose INFO lines (one per request) would drown a worker's log."""
SERVER_LOGGERS = ("uvicorn", "uvicorn.error", "uvicorn.access", "uvicorn.asgi")
"""uvicorn's loggers: routed through the root handler like duetime's own."""


class JsonFormatter(logging.Formatter):
    """One JSON object per line (see the module)."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and key not in out:
                out[key] = value
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(out, default=str).decode()


def configure_logging(level: str, fmt: str = "text") -> None:
    """Set the root logger up for ``fmt`` (``text`` or ``json``) at ``level``, replacing what
    was there; route uvicorn's loggers through it (:data:`SERVER_LOGGERS`); and quiet the HTTP
    clients' per-request INFO lines."""
    if fmt not in FORMATS:
        raise ValueError(f"log format {fmt!r}: use one of {', '.join(FORMATS)}")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    for name in SERVER_LOGGERS:
        server_logger = logging.getLogger(name)
        server_logger.handlers.clear()
        server_logger.propagate = True
    quiet_http_clients()


def quiet_http_clients() -> None:
    """httpx logs every request at INFO; a worker makes thousands a second. Warnings stay."""
    for name in _QUIET:
        logging.getLogger(name).setLevel(logging.WARNING)


def redact_url(url: str) -> str:
    """``url`` with any password replaced (``postgresql://u:pw@h/db`` → ``u:<redacted>@``)."""
    return _URL_PASSWORD.sub(lambda m: f"{m['head']}{REDACTED}{m['tail']}", url)


def settings_in_force(settings: Settings) -> dict[str, Any]:
    """The settings in force as a JSON-able dict with no secret in it: tokens (and any field
    named like a secret) show only whether they are set, URLs lose their passwords, and
    ``allow_private_targets`` is what applies (true in dev mode, whatever was set)."""
    out: dict[str, Any] = {}
    for name in type(settings).model_fields:
        value = getattr(settings, name)
        if _SECRET_FIELDS.search(name):
            value = None if value in (None, "") else REDACTED
        elif isinstance(value, str):
            value = redact_url(value)
        elif isinstance(value, Path):
            value = str(value)
        out[name] = value
    out["db_url"] = redact_url(settings.db_url)
    out["dev_mode"] = settings.dev_mode
    # What is in force, not what was set: dev mode allows private targets whatever the flag says.
    out["allow_private_targets"] = settings.private_targets_allowed
    return out


def log_settings(settings: Settings, logger: logging.Logger) -> None:
    """The start-up line: every setting in force, secrets redacted."""
    shown = settings_in_force(settings)
    logger.info(
        "settings in force: %s",
        " ".join(f"{k}={v}" for k, v in shown.items()),
        extra={"event": "settings", "settings": shown},
    )
