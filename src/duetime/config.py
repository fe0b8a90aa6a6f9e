"""Settings, built once: command-line flags, then ``DUETIME_*`` variables, then defaults."""

from __future__ import annotations

import ipaddress
import os
import socket
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from duetime.errors import ConfigError

DEFAULT_DATA_DIR = Path(".duetime")


def _default_node_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


@dataclass(frozen=True, slots=True)
class Settings:
    """Everything a duetime process can be told. Field names map to ``DUETIME_<NAME>``."""

    db: str = ""
    host: str = "127.0.0.1"
    port: int = 8080
    data_dir: Path = DEFAULT_DATA_DIR
    admin_token: str | None = None
    allow_private_targets: bool = False
    max_payload_bytes: int = 256 * 1024
    node_id: str = field(default_factory=_default_node_id)
    engine: bool = True
    # Dispatcher: how many deliveries run at once on this node (shared by its dispatcher
    # processes), and claim batch size.
    dispatch_concurrency: int = 512
    dispatch_batch: int = 256
    # Processes delivering push tasks on this node, the node process included; 0 = one per
    # core (at most 4) on PostgreSQL, 1 on SQLite.
    dispatch_processes: int = 0
    # Promoter / reaper / leadership.
    promote_batch: int = 5000
    leader_ttl_seconds: float = 10.0
    poll_interval_seconds: float = 1.0
    lease_grace_seconds: float = 10.0
    log_level: str = "info"
    # History and retention (SPEC §8, docs/history.md). Periods are ISO 8601 durations.
    retention_succeeded: str = "P7D"
    retention_failed: str = "P30D"
    retention_cancelled: str = "P7D"
    retention_batch: int = 1000
    history_interval_seconds: float = 60.0
    hot_days: int = 30
    archive_url: str = ""

    @property
    def dev_mode(self) -> bool:
        """No admin token: auth is off and one tenant ``default`` owns everything."""
        return not self.admin_token

    @property
    def db_url(self) -> str:
        return self.db or f"sqlite:///{self.data_dir / 'duetime.db'}"

    @property
    def is_sqlite(self) -> bool:
        return self.db_url.startswith("sqlite:")

    @property
    def dispatch_process_count(self) -> int:
        """How many processes deliver push tasks on this node (``dispatch_processes`` resolved)."""
        if self.dispatch_processes > 0:
            return self.dispatch_processes
        return 1 if self.is_sqlite else max(1, min(4, os.cpu_count() or 1))

    @property
    def archive_location(self) -> str:
        """Where the cold tier lives: ``archive_url``, else ``<data_dir>/archive``."""
        return self.archive_url or str(self.data_dir / "archive")

    @property
    def private_targets_allowed(self) -> bool:
        return self.allow_private_targets or self.dev_mode

    def check(self) -> Settings:
        """Refuse settings that cannot work safely. Returns self."""
        if self.dev_mode and not is_loopback_host(self.host):
            raise ConfigError(
                f"dev mode (no DUETIME_ADMIN_TOKEN) is refused on the non-loopback address "
                f"{self.host!r}: set DUETIME_ADMIN_TOKEN or bind to 127.0.0.1"
            )
        if self.max_payload_bytes <= 0:
            raise ConfigError("max_payload_bytes must be positive")
        if self.retention_batch <= 0 or self.hot_days <= 0:
            raise ConfigError("retention_batch and hot_days must be positive")
        if self.history_interval_seconds <= 0:
            raise ConfigError("history_interval_seconds must be positive")
        if self.dispatch_processes < 0:
            raise ConfigError("dispatch_processes must be 0 (automatic) or a positive count")
        if self.dispatch_processes > 1 and self.is_sqlite:
            raise ConfigError(
                "dispatch_processes > 1 needs PostgreSQL: SQLite is written by one process "
                "(use DUETIME_DISPATCH_PROCESSES=1 or 0, or a postgresql:// store)"
            )
        if self.dispatch_concurrency < self.dispatch_process_count:
            raise ConfigError("dispatch_concurrency must be at least dispatch_processes")
        return self


def is_loopback_host(host: str) -> bool:
    """Whether binding ``host`` only listens on loopback."""
    if host in ("localhost", ""):
        return host == "localhost"
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _coerce(kind: Any, raw: str) -> Any:
    text = str(kind)
    if "bool" in text:
        return raw.strip().lower() in ("1", "true", "yes", "on")
    if "int" in text and "None" not in text:
        return int(raw)
    if "float" in text:
        return float(raw)
    if "Path" in text:
        return Path(raw)
    return raw


def load_settings(
    flags: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None
) -> Settings:
    """Flags (non-None values) win over ``DUETIME_*`` variables, which win over defaults."""
    env = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    for f in fields(Settings):
        raw = env.get(f"DUETIME_{f.name.upper()}")
        if raw is not None and raw != "":
            try:
                values[f.name] = _coerce(f.type, raw)
            except ValueError as exc:
                raise ConfigError(f"DUETIME_{f.name.upper()}={raw!r}: {exc}") from exc
    for key, value in (flags or {}).items():
        if value is not None:
            values[key] = value
    return replace(Settings(), **values)
