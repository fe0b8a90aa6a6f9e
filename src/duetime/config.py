"""Settings, built once: command-line flags, then ``DUETIME_*`` variables, then defaults.

:class:`Settings` is a pydantic-settings model: field ``port`` is variable ``DUETIME_PORT``, and
pydantic parses and checks each value. Every ``DUETIME_*`` variable is read strictly: a value
that does not parse (``DUETIME_PORT=http``, a boolean other than true/false/1/0/yes/no/on/off,
an unknown ``DUETIME_LOG_LEVEL``) and a variable duetime does not know (a misspelling:
``DUETIME_ADMIN_TOKN``) are a ``ConfigError`` naming it, never a silent default.
"""

from __future__ import annotations

import difflib
import ipaddress
import os
import socket
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pydantic
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from duetime.errors import ConfigError
from duetime.loglevels import check_log_level

DEFAULT_DATA_DIR = Path(".duetime")
MIN_ADMIN_TOKEN_LENGTH = 32
"""An admin token shorter than this is refused: it guards every tenant (``openssl rand -hex 32``
gives 64 characters)."""


CLIENT_VARIABLES = frozenset({"DUETIME_URL", "DUETIME_API_KEY"})
"""``DUETIME_*`` variables of the client side (the CLI's API commands, the SDK), not Settings."""
OTHER_PREFIXES = ("DUETIME_TEST_", "DUETIME_BENCH_", "DUETIME_THROWAWAY_", "DUETIME_FAULT_")
"""Prefixes of variables the test suite, benchmarks and scripts read (not the service)."""


def _default_node_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


class Settings(BaseSettings):
    """Everything a duetime process can be told. Field names map to ``DUETIME_<NAME>``.

    Built in code (``Settings(port=0)``) it reads nothing else; :func:`load_settings` adds the
    environment. Booleans take true/false, 1/0, yes/no, on/off; a bad value is refused."""

    model_config = SettingsConfigDict(
        env_prefix="DUETIME_", frozen=True, extra="forbid", env_ignore_empty=True
    )

    db: str = ""
    host: str = "127.0.0.1"
    port: int = 8080
    data_dir: Path = DEFAULT_DATA_DIR
    admin_token: str | None = None
    # A bearer token that may read /metrics (besides the admin token); dev mode needs none.
    metrics_token: str | None = None
    # The Fernet key that seals broker credentials at rest (duetime/delivery/sealing.py); unset:
    # a key file in the data directory. Nodes sharing a store must share it.
    secret_key: str | None = None
    allow_private_targets: bool = False
    max_payload_bytes: int = 256 * 1024
    node_id: str = Field(default_factory=_default_node_id)
    engine: bool = True
    # Dispatcher: how many deliveries run at once on this node (shared by its dispatcher
    # processes), and claim batch size.
    dispatch_concurrency: int = 512
    dispatch_batch: int = 256
    # Processes delivering push tasks on this node, the node process included; 0 = one per
    # core (at most 4) on PostgreSQL, 1 on SQLite.
    dispatch_processes: int = 0
    # Webhook connections open at once to one origin (scheme, host, port) from this node (shared
    # by its dispatcher processes): a burst to one receiver queues instead of flooding it.
    max_connections_per_origin: int = 64
    # Circuit breakers per (tenant, webhook origin): open after this many consecutive retryable
    # failures, for a cool-down that doubles while probes fail (duetime/delivery/circuit.py).
    circuit_failure_threshold: int = 5
    circuit_cooldown_seconds: float = 5.0
    circuit_max_cooldown_seconds: float = 300.0
    # Promoter / reaper / leadership.
    promote_batch: int = 5000
    leader_ttl_seconds: float = 10.0
    poll_interval_seconds: float = 1.0
    lease_grace_seconds: float = 10.0
    # A lone worker task created due now while a lease poll of its queue waits on this node is
    # claimed for that poll in the create's transaction: the task starts ~1-1.5 ms sooner, the
    # create answers ~0.7 ms later on PostgreSQL (docs/architecture.md, "One task's path").
    lease_handoff: bool = True
    log_level: str = "info"
    # Log lines as text or as JSON objects (task id, tenant, attempt as fields).
    log_format: str = "text"
    # Notifications: at most one event per (tenant, event type) per this many seconds; the
    # rest are folded into a digest (counts and sample ids).
    notify_window_seconds: float = 60.0
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
        if self.admin_token and len(self.admin_token) < MIN_ADMIN_TOKEN_LENGTH:
            raise ConfigError(
                f"DUETIME_ADMIN_TOKEN is {len(self.admin_token)} characters long; use at least "
                f"{MIN_ADMIN_TOKEN_LENGTH} (e.g. openssl rand -hex 32)"
            )
        if self.log_format not in ("text", "json"):
            raise ConfigError(f"DUETIME_LOG_FORMAT={self.log_format!r}: use text or json")
        if self.notify_window_seconds <= 0:
            raise ConfigError("notify_window_seconds must be positive")
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
        if self.secret_key:
            from cryptography.fernet import Fernet  # the server's extra; only when a key is set

            try:
                Fernet(self.secret_key)
            except ValueError:
                raise ConfigError(
                    "DUETIME_SECRET_KEY must be a Fernet key (32 url-safe base64-encoded bytes)"
                ) from None
        if self.circuit_failure_threshold < 1:
            raise ConfigError("circuit_failure_threshold must be at least 1")
        if not 0 < self.circuit_cooldown_seconds <= self.circuit_max_cooldown_seconds:
            raise ConfigError(
                "circuit_cooldown_seconds must be positive and at most circuit_max_cooldown_seconds"
            )
        if self.max_connections_per_origin < self.dispatch_process_count:
            raise ConfigError("max_connections_per_origin must be at least dispatch_processes")
        check_log_level(self.log_level)
        return self


def is_loopback_host(host: str) -> bool:
    """Whether binding ``host`` only listens on loopback."""
    if host in ("localhost", ""):
        return host == "localhost"
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_sqlite_url(url: str) -> str:
    """``url`` unless it is a ``sqlite:///`` URL that very likely means an absolute path.

    ``sqlite:///x.db`` is the relative path ``x.db`` and ``sqlite:////abs/x.db`` the absolute
    ``/abs/x.db`` (the SQLAlchemy convention). ``sqlite:///tmp/x.db`` therefore names
    ``./tmp/x.db``; when ``./tmp`` does not exist but ``/tmp`` does, that is refused with both
    spellings rather than creating a surprise directory."""
    if not url.startswith("sqlite:///") or url.startswith("sqlite:////"):
        return url
    relative = url.removeprefix("sqlite:///")
    first, slash, _ = relative.partition("/")
    surprising = slash and first not in (".", "..") and not Path(first).exists()
    if surprising and Path("/" + first).is_dir():
        raise ConfigError(
            f"{url!r} is the relative path {relative!r} (three slashes: relative, four: "
            f"absolute): write sqlite:////{relative} for /{relative}, or "
            f"sqlite:///./{relative} for the relative one"
        )
    return url


class _FromEnvironment(Settings):
    """:class:`Settings` that also reads ``DUETIME_*`` variables (flags, given as init values,
    win over them)."""

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: Any,
        env_settings: Any,
        dotenv_settings: Any,
        file_secret_settings: Any,
    ) -> tuple[Any, ...]:
        return (init_settings, env_settings)


def load_settings(
    flags: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None
) -> Settings:
    """Flags (non-None values) win over ``DUETIME_*`` variables, which win over defaults.
    ``environ`` replaces ``os.environ`` (tests)."""
    env = os.environ if environ is None else environ
    known = {f"DUETIME_{name.upper()}" for name in Settings.model_fields} | CLIENT_VARIABLES
    for name in env:
        if (
            name.startswith("DUETIME_")
            and name not in known
            and not name.startswith(OTHER_PREFIXES)
        ):
            close = difflib.get_close_matches(name, sorted(known), n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise ConfigError(f"unknown setting {name}{hint}; unset it or fix its name")
    values = {key: value for key, value in (flags or {}).items() if value is not None}
    try:
        if environ is None:
            settings: Settings = _FromEnvironment(**values)
        else:  # the same parsing, from the given mapping
            given = {
                name: env[f"DUETIME_{name.upper()}"]
                for name in Settings.model_fields
                if env.get(f"DUETIME_{name.upper()}")
            }
            settings = Settings(**{**given, **values})
    except pydantic.ValidationError as exc:
        raise ConfigError(_explain(exc, env)) from None
    check_log_level(settings.log_level)
    check_sqlite_url(settings.db)
    return settings


def _explain(exc: pydantic.ValidationError, env: Mapping[str, str]) -> str:
    """The first error as ``DUETIME_PORT='http': <why>``."""
    error = exc.errors(include_url=False)[0]
    name = str(error["loc"][0]) if error["loc"] else ""
    variable = f"DUETIME_{name.upper()}"
    raw = env.get(variable, error.get("input"))
    return f"{variable}={raw!r}: {error['msg']}"
