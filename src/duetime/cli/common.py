"""What every ``duetime`` command module shares: the command groups other modules add to
(``task``, ``tenant``), the common options, the SDK client factory, one-line errors with their exit
codes (:data:`EXIT_CODES`), service imports that name the missing extra, and argument parsers.

Command modules import this module only (never :mod:`duetime.cli` itself), so there is no import
cycle: :mod:`duetime.cli` imports them and assembles the app.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import orjson
import typer

from duetime.errors import (
    Conflict,
    DuetimeError,
    NotFound,
    StoreUnavailable,
    ValidationError,
)
from duetime.sdk.errors import TransportError

if TYPE_CHECKING:
    from duetime.config import Settings
    from duetime.sdk.client import Client

task_app = typer.Typer(help="One-time tasks, through the HTTP API.", no_args_is_help=True)
tenant_app = typer.Typer(help="Tenants and their API keys.", no_args_is_help=True)

EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_NOT_FOUND = 3
EXIT_CONFLICT = 4
EXIT_UNREACHABLE = 5
EXIT_INVALID = 6
EXIT_CODES: tuple[tuple[type[DuetimeError] | tuple[type[DuetimeError], ...], int], ...] = (
    (NotFound, EXIT_NOT_FOUND),
    (Conflict, EXIT_CONFLICT),
    ((TransportError, StoreUnavailable), EXIT_UNREACHABLE),
    (ValidationError, EXIT_INVALID),
)
"""Exit status by error class, first match wins (README, "The CLI"); anything else exits 1 and bad
usage (a wrong flag, a malformed argument) 2."""

DbOption = Annotated[
    str | None,
    typer.Option("--db", help="Store URL: sqlite:///path or postgresql://... [env DUETIME_DB]"),
]
DataDirOption = Annotated[
    Path | None,
    typer.Option("--data-dir", help="Where the default SQLite file lives [env DUETIME_DATA_DIR]"),
]
UrlOption = Annotated[
    str,
    typer.Option(
        "--url",
        envvar="DUETIME_URL",
        help="The duetime server: http://host:port (a bare host:port is http).",
    ),
]
ScheduleOption = Annotated[
    str | None, typer.Option("--schedule-id", help="The schedule's id or key.")
]
ApiKeyOption = Annotated[
    str | None,
    typer.Option(
        "--api-key",
        envvar="DUETIME_API_KEY",
        help="Tenant API key (none in dev mode); or a file: DUETIME_API_KEY_FILE.",
    ),
]


def _default_client(url: str, api_key: str | None) -> Client:
    from duetime.sdk.client import Client

    return Client(url, api_key)


client_factory: Callable[[str, str | None], Client] = _default_client
"""Builds the SDK client of every API command; tests replace it to inject a transport."""


def api_client(url: str, api_key: str | None) -> Client:
    """The SDK client API commands use (see :data:`client_factory`)."""
    return client_factory(url, api_key)


def fail(message: str, code: int = 1) -> typer.Exit:
    """Print ``error: message`` as one line on stderr; returns the Exit to raise."""
    typer.echo(f"error: {' '.join(message.split())}", err=True)
    return typer.Exit(code)


def exit_code(exc: DuetimeError) -> int:
    """The exit status for ``exc`` (:data:`EXIT_CODES`)."""
    for kinds, code in EXIT_CODES:
        if isinstance(exc, kinds):
            return code
    return EXIT_ERROR


@contextlib.contextmanager
def errors_reported() -> Iterator[None]:
    """Turn duetime's errors (a store's, bad config) into one stderr line and the exit status of
    :func:`exit_code`, instead of a traceback. API commands use
    :func:`duetime.cli.connection.connected`, which says more about a server's answers."""
    try:
        yield
    except DuetimeError as exc:
        raise fail(str(exc), exit_code(exc)) from None


def server_module(name: str) -> Any:
    """Import a module of the service (``duetime[server]``). The lean client install
    (``pip install duetime``) has no FastAPI, asyncpg or uvicorn: say which extra to add
    instead of a traceback."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.split(".")[0] == "duetime":
            raise
        raise fail(
            f"this command runs the service, which needs more packages ({exc.name} is missing): "
            f"pip install 'duetime[server]'"
        ) from None


def settings_from(**flags: Any) -> Settings:
    # The server's settings (pydantic-settings): imported here, so the client install, which
    # has no pydantic-settings, never loads them.
    load_settings = server_module("duetime.config").load_settings
    with errors_reported():
        found: Settings = load_settings(flags)
        return found


def open_store_for(settings: Settings) -> Any:
    # duetime.node.server pulls in the whole service (uvicorn, the drivers' dependencies): a lean
    # install fails here, with the extra to add, rather than half-way through a migration.
    server_module("duetime.node.server")
    store_from_url = server_module("duetime.store").store_from_url
    if not settings.db:  # the default SQLite file: make its directory on first use
        settings.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    return store_from_url(settings.db_url, data_dir=settings.data_dir)


def pairs(values: list[str] | None, sep: str, what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in values or ():
        key, found, value = item.partition(sep)
        if not found or not key.strip():
            raise fail(f"{what} {item!r} must look like KEY{sep}VALUE", 2)
        out[key.strip()] = value.strip()
    return out


def when(value: str | None, flag: str) -> datetime | None:
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise fail(f"{flag} {value!r} is not an RFC 3339 time", 2) from None
    if parsed.tzinfo is None:
        raise fail(f"{flag} {value!r} needs an offset, e.g. 2026-12-01T15:00:00Z", 2)
    return parsed


def text_arg(value: str, flag: str) -> str:
    """``--flag TEXT``, ``--flag @file`` or ``--flag -`` (stdin): the text itself."""
    if value == "-":
        return sys.stdin.read()
    if value.startswith("@"):
        try:
            return Path(value[1:]).read_text()
        except OSError as exc:
            raise fail(f"{flag}: cannot read {value[1:]}: {exc.strerror}", 2) from None
    return value


def json_arg(value: str, flag: str) -> Any:
    """``--flag JSON``, ``--flag @file.json`` or ``--flag -`` (stdin)."""
    value = text_arg(value, flag)
    try:
        return orjson.loads(value)
    except orjson.JSONDecodeError as exc:
        raise fail(f"{flag} is not valid JSON: {exc}", 2) from None
