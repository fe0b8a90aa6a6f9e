"""Which asyncpg failures mean "the store cannot be reached right now".

Those become :class:`duetime.errors.StoreUnavailable` (accepted work is safe; try again later):
socket errors and timeouts (``OSError``), a connection closed under us (``InterfaceError``,
``ConnectionDoesNotExistError``), refused or dropped sessions (SQLSTATE classes 08, 53, 57P0x),
a server that turned read-only (a failover in progress), or a missing database or role.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import asyncpg
from asyncpg import exceptions as pgx

_UNAVAILABLE: tuple[type[BaseException], ...] = (
    OSError,  # includes ConnectionRefusedError and TimeoutError (pool acquire, connect)
    pgx.PostgresConnectionError,
    pgx.InsufficientResourcesError,  # TooManyConnectionsError, disk full, out of memory
    pgx.AdminShutdownError,
    pgx.CrashShutdownError,
    pgx.CannotConnectNowError,
    pgx.IdleSessionTimeoutError,
    pgx.IdleInTransactionSessionTimeoutError,
    pgx.ReadOnlySQLTransactionError,
    pgx.InvalidCatalogNameError,
    pgx.InvalidAuthorizationSpecificationError,
    pgx.ProtocolError,
)

# InterfaceError also covers misuse of the client (bad argument types...): those are bugs.
_CLIENT_BUGS: tuple[type[BaseException], ...] = (
    pgx.ClientConfigurationError,
    pgx._base.DataError,
    pgx.UnsupportedClientFeatureError,
    pgx.UnsupportedServerFeatureError,
)


def is_unavailable(exc: BaseException) -> bool:
    """Whether ``exc`` means the server could not be reached or dropped us."""
    if isinstance(exc, _UNAVAILABLE):
        return True
    if isinstance(exc, pgx.InternalClientError):
        # A connection used in the instant between the server's "terminating connection"
        # message (read while the connection was idle) and the close of its socket: asyncpg
        # refuses the statement because it is still consuming that error.
        return "cannot switch to state" in str(exc)
    return isinstance(exc, asyncpg.InterfaceError) and not isinstance(exc, _CLIENT_BUGS)


def describe_server(url: str) -> str:
    """``host:port/database`` of a connection URL, without credentials, for error details."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or "localhost"
        port = parts.port or 5432
    except ValueError:
        return "the configured PostgreSQL server"
    return f"{host}:{port}{parts.path or '/'}"
