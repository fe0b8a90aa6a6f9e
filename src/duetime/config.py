"""Settings, built once: command-line flags, then ``DUETIME_*`` variables, then defaults.

:class:`Settings` is a pydantic-settings model: field ``port`` is variable ``DUETIME_PORT``, and
pydantic parses and checks each value. Every ``DUETIME_*`` variable is read strictly: a value
that does not parse (``DUETIME_PORT=http``, a boolean other than true/false/1/0/yes/no/on/off,
an unknown ``DUETIME_LOG_LEVEL``) and a variable duetime does not know (a misspelling:
``DUETIME_ADMIN_TOKN``) are a ``ConfigError`` naming it, never a silent default.

Each setting that holds a secret (:data:`SECRET_SETTINGS`) can instead be read from a file, as
Kubernetes and Docker mount secrets: ``DUETIME_ADMIN_TOKEN_FILE=/run/secrets/admin-token``. The
file's content, less one trailing newline, is the value; setting both ``DUETIME_X`` and
``DUETIME_X_FILE`` is an error naming both, and so is a file that cannot be read.
"""

from __future__ import annotations

import ipaddress
import os
import re
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
from duetime.variables import (
    CLIENT_VARIABLES,
    FILE_SUFFIX,
    check_variable_names,
    secret_from_file,
)

DEFAULT_DATA_DIR = Path(".duetime")
MIN_ADMIN_TOKEN_LENGTH = 32
"""An admin token shorter than this is refused: it guards every tenant (``openssl rand -hex 32``
gives 64 characters)."""
MIN_METRICS_TOKEN_LENGTH = 16
"""A metrics token shorter than this is refused: it is a bearer credential on a public route."""


SECRET_SETTINGS = (
    "db",
    "admin_token",
    "metrics_token",
    "secret_key",
    "secret_keys",
    "archive_url",
)
"""Settings that may hold a secret (a database password, a token, a key, object-storage
credentials in a URL): each also reads ``DUETIME_<NAME>_FILE``."""


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
    # The key ring that seals credentials at rest (duetime/secrets/keyring.py): Fernet keys,
    # newest first, separated by commas, spaces or new lines (the first seals, every one opens).
    # secret_key is the single key of earlier versions; neither set: the data directory's key
    # file. Nodes sharing a store must share the ring.
    secret_keys: str | None = None
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
    # Connections to this node's HTTP server (duetime/node/connections.py): a request head must
    # arrive within header_timeout_seconds and its body within body_timeout_seconds (else 408),
    # an idle kept-alive connection is closed after keep_alive_seconds, and past
    # max_connections open connections a new one is answered 503 and closed.
    header_timeout_seconds: float = 10.0
    body_timeout_seconds: float = 60.0
    keep_alive_seconds: int = 5
    max_connections: int = 4096
    # Schedule expressions are evaluated in this many worker processes per node, off the event
    # loop; a tenant has at most evaluation_per_tenant evaluations waiting or running on a node
    # (one more is a 429 naming schedule_evaluations). duetime/schedule/evaluation.py.
    evaluation_processes: int = 2
    evaluation_per_tenant: int = 16
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
    # Identity (docs/security.md). The node's public base URL (https://duetime.example.com): the
    # issuer of the OIDC ID tokens it presents and the base of held payloads' URLs.
    public_url: str = ""
    # Dashboard cookies are Secure when the node is reached over TLS: said here (a proxy in front
    # terminates it), by an https public_url, or by the request itself.
    behind_tls: bool = False
    # Dashboard sessions end after this long unused, and this long after login at the latest.
    ui_session_idle_seconds: float = 3600.0
    ui_session_seconds: float = 12 * 3600.0
    # OIDC signing keys: a new one when the newest is this old; published this long before it
    # signs (verifiers that cache the key set have fetched it by then).
    oidc_key_rotate_days: float = 30.0
    oidc_key_publish_seconds: float = 900.0
    # A payload duetime holds for a task ("payload_held") is at most this large, encoded.
    max_held_payload_bytes: int = 1024 * 1024

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

    @property
    def configured_keys(self) -> list[str]:
        """The key ring's keys as configured, newest first: ``secret_keys`` (see
        :func:`parse_keys`), else ``secret_key``; empty: the data directory's key file."""
        if self.secret_keys is not None:
            return parse_keys(self.secret_keys)
        return [self.secret_key] if self.secret_key else []

    def _check_keys(self) -> None:
        if self.secret_keys is not None and not self.configured_keys:
            raise ConfigError("DUETIME_SECRET_KEYS holds no key")
        keys = self.configured_keys
        if not keys:
            return
        from cryptography.fernet import Fernet  # the server's extra; only when a key is set

        named = "DUETIME_SECRET_KEYS" if self.secret_keys is not None else "DUETIME_SECRET_KEY"
        for position, key in enumerate(keys, 1):
            try:
                Fernet(key)
            except ValueError:
                which = f" (key {position})" if len(keys) > 1 else ""
                raise ConfigError(
                    f"{named}{which} must be a Fernet key (32 url-safe base64-encoded bytes)"
                ) from None

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
        if self.metrics_token is not None and len(self.metrics_token) < MIN_METRICS_TOKEN_LENGTH:
            raise ConfigError(
                f"DUETIME_METRICS_TOKEN is {len(self.metrics_token)} characters long; use at "
                f"least {MIN_METRICS_TOKEN_LENGTH} (e.g. openssl rand -hex 16)"
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
        if self.secret_key and self.secret_keys:
            raise ConfigError(
                "both DUETIME_SECRET_KEY and DUETIME_SECRET_KEYS are set: put the single key "
                "in DUETIME_SECRET_KEYS (newest first) and unset DUETIME_SECRET_KEY"
            )
        self._check_keys()
        if self.header_timeout_seconds <= 0 or self.body_timeout_seconds <= 0:
            raise ConfigError("header_timeout_seconds and body_timeout_seconds must be positive")
        if self.keep_alive_seconds < 1 or self.max_connections < 1:
            raise ConfigError("keep_alive_seconds and max_connections must be at least 1")
        if self.evaluation_processes < 1 or self.evaluation_per_tenant < 1:
            raise ConfigError("evaluation_processes and evaluation_per_tenant must be at least 1")
        if self.circuit_failure_threshold < 1:
            raise ConfigError("circuit_failure_threshold must be at least 1")
        if not 0 < self.circuit_cooldown_seconds <= self.circuit_max_cooldown_seconds:
            raise ConfigError(
                "circuit_cooldown_seconds must be positive and at most circuit_max_cooldown_seconds"
            )
        if self.max_connections_per_origin < self.dispatch_process_count:
            raise ConfigError("max_connections_per_origin must be at least dispatch_processes")
        self._check_identity()
        check_log_level(self.log_level)
        return self

    def _check_identity(self) -> None:
        if self.public_url and (
            not self.public_url.startswith(("http://", "https://"))
            or any(c in self.public_url for c in "?# ")
        ):
            raise ConfigError(
                f"DUETIME_PUBLIC_URL={self.public_url!r}: give the node's base URL, "
                "e.g. https://duetime.example.com"
            )
        if not 0 < self.ui_session_idle_seconds <= self.ui_session_seconds:
            raise ConfigError(
                "ui_session_idle_seconds must be positive and at most ui_session_seconds"
            )
        if self.oidc_key_rotate_days <= 0 or self.oidc_key_publish_seconds < 0:
            raise ConfigError(
                "oidc_key_rotate_days must be positive, oidc_key_publish_seconds not negative"
            )
        if self.max_held_payload_bytes <= 0:
            raise ConfigError("max_held_payload_bytes must be positive")

    @property
    def issuer(self) -> str:
        """The ``iss`` of the ID tokens this node signs: ``public_url`` without a trailing
        slash (empty: none configured)."""
        return self.public_url.rstrip("/")

    @property
    def tls_cookies(self) -> bool:
        """Whether dashboard cookies are always ``Secure`` (``behind_tls`` or an https
        ``public_url``)."""
        return self.behind_tls or self.public_url.startswith("https://")


SETTINGS_VARIABLES = frozenset(f"DUETIME_{name.upper()}" for name in Settings.model_fields) | {
    f"DUETIME_{name.upper()}{FILE_SUFFIX}" for name in SECRET_SETTINGS
}
"""The variable of each :class:`Settings` field, and the file variable of each secret one."""


_KEY_SEPARATORS = re.compile(r"[\s,]+")


def parse_keys(text: str) -> list[str]:
    """The keys of a key ring spelled as text (``DUETIME_SECRET_KEYS``, its ``_FILE``, the data
    directory's key file): separated by commas, spaces or new lines; ``#`` starts a comment that
    runs to the end of its line."""
    keys: list[str] = []
    for line in text.splitlines():
        keys.extend(k for k in _KEY_SEPARATORS.split(line.partition("#")[0]) if k)
    return keys


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
    """Flags (non-None values) win over ``DUETIME_*`` variables (or their ``_FILE`` forms),
    which win over defaults. ``environ`` replaces ``os.environ`` (tests)."""
    env = os.environ if environ is None else environ
    check_variable_names(env, SETTINGS_VARIABLES | CLIENT_VARIABLES)
    from_files = _secret_files(env)
    values = {key: value for key, value in (flags or {}).items() if value is not None}
    try:
        if environ is None:
            settings: Settings = _FromEnvironment(**{**from_files, **values})
        else:  # the same parsing, from the given mapping
            given = {
                name: env[f"DUETIME_{name.upper()}"]
                for name in Settings.model_fields
                if env.get(f"DUETIME_{name.upper()}")
            }
            settings = Settings(**{**given, **from_files, **values})
    except pydantic.ValidationError as exc:
        raise ConfigError(_explain(exc, env)) from None
    check_log_level(settings.log_level)
    check_sqlite_url(settings.db)
    return settings


def _secret_files(env: Mapping[str, str]) -> dict[str, str]:
    """The secret settings given as ``DUETIME_<NAME>_FILE``, read (:func:`secret_from_file`)."""
    found: dict[str, str] = {}
    for name in SECRET_SETTINGS:
        value = secret_from_file(env, f"DUETIME_{name.upper()}")
        if value is not None:
            found[name] = value
    return found


def _explain(exc: pydantic.ValidationError, env: Mapping[str, str]) -> str:
    """The first error as ``DUETIME_PORT='http': <why>``."""
    error = exc.errors(include_url=False)[0]
    name = str(error["loc"][0]) if error["loc"] else ""
    variable = f"DUETIME_{name.upper()}"
    raw = env.get(variable, error.get("input"))
    return f"{variable}={raw!r}: {error['msg']}"
