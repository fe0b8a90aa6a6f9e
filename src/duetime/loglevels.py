"""The log levels duetime accepts: one check for the node's settings (:mod:`duetime.config`) and
the client's ``duetime worker --log-level``, which must not import the settings (they need the
server extra)."""

from __future__ import annotations

from duetime.errors import ConfigError

LOG_LEVELS = ("debug", "info", "warning", "error", "critical")


def check_log_level(level: str) -> str:
    """``level`` if it is a log level name (any case); ``ConfigError`` otherwise."""
    if level.strip().lower() not in LOG_LEVELS:
        raise ConfigError(f"DUETIME_LOG_LEVEL={level!r}: use one of {', '.join(LOG_LEVELS)}")
    return level.strip().lower()
