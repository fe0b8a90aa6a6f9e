"""Plans: store transactions written once, as generators of named statements.

A plan is a generator that yields :class:`Stmt` (and a few other requests) and gets each one's
result sent back::

    def tenant_get(tenant_id: str) -> Plan[Tenant | None]:
        return (yield one("tenant_get", rows.tenant, id=tenant_id))

A backend's driver runs the whole plan inside one transaction (a write transaction when the
store method changes anything) and commits when it returns; any exception rolls everything back.
Plans never see a connection, a dialect, or how a backend stores a time: parameters are plain
Python values (datetimes aware UTC) and the driver encodes them, and rows come back through a
converter the plan names (:mod:`duetime.store.core.rows`).

``now`` is bound by the driver to every statement that names it: the store's clock (SQLite: the
transaction's time; PostgreSQL: the pinned test time or NULL, and the SQL says
``coalesce(:now::timestamptz, now())``). A plan that needs the time as a value yields
:data:`NOW`.

A unique-index violation is thrown into the plan as :class:`UniqueViolation` at the ``yield``
that caused it. The plan may turn it into ``Conflict``; it must not go on issuing statements
(a PostgreSQL transaction is aborted by then), and the drivers refuse if it does.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol, TypeVar

T = TypeVar("T")

Plan = Generator["Request", Any, T]
"""A store transaction: yields requests, receives their results, returns the method's value."""


class Row(Protocol):
    """A result row read by column name (``sqlite3.Row`` or ``asyncpg.Record``)."""

    def __getitem__(self, key: str, /) -> Any: ...


class Decode:
    """How a backend hands back column values: each converter in :mod:`.rows` reads its row
    through the backend's subclass, so one converter serves both backends."""

    @staticmethod
    def time(value: Any) -> datetime:
        """A timestamp column (never NULL here) as an aware UTC datetime."""
        raise NotImplementedError

    @staticmethod
    def opt_time(value: Any) -> datetime | None:
        """A nullable timestamp column."""
        raise NotImplementedError

    @staticmethod
    def flag(value: Any) -> bool:
        """A boolean column."""
        raise NotImplementedError

    @staticmethod
    def ident(value: Any) -> str:
        """An id column (PostgreSQL's ``uuid`` values become text)."""
        raise NotImplementedError

    @staticmethod
    def opt_ident(value: Any) -> str | None:
        """A nullable id column."""
        raise NotImplementedError

    @staticmethod
    def ids(value: Any) -> tuple[str, ...]:
        """An array of ids (PostgreSQL ``uuid[]``, SQLite JSON text), NULL as empty."""
        raise NotImplementedError


Into = Callable[[Row, type[Decode]], Any]
"""A row converter: ``(row, decode) -> value``."""

Mode = Literal["all", "one", "value", "count", "exec"]


@dataclass(frozen=True, slots=True)
class Json:
    """A parameter to bind as JSON text (any JSON value; a plain ``dict`` is bound as JSON
    anyway, but a list would be an array on PostgreSQL)."""

    value: Any


@dataclass(frozen=True, slots=True)
class Stmt:
    """Run the named statement with ``params`` (by name; extra names are ignored).

    ``mode`` says what the plan gets back: ``all`` → list of ``into(row)``, ``one`` → the first
    row converted or None, ``value`` → the first column of the first row or None, ``count`` → the
    number of rows the statement changed, ``exec`` → None."""

    query: str
    params: Mapping[str, Any]
    mode: Mode = "exec"
    into: Into | None = None


@dataclass(frozen=True, slots=True)
class Batch:
    """Run the named statement for each mapping of ``rows`` (parameters by name; ``now`` is the
    store's): PostgreSQL sends one statement binding each parameter as the array of the rows'
    values (its SQL ``unnest``-s them), SQLite runs it once per row. With ``into`` the plan gets
    every returned row converted (in no promised order), else None."""

    query: str
    rows: Sequence[Mapping[str, Any]]
    into: Into | None = None


@dataclass(frozen=True, slots=True)
class Script:
    """Run a whole SQL script (a migration), several statements, no parameters."""

    sql: str


@dataclass(frozen=True, slots=True)
class Wake:
    """After commit, fire the store's signals: ``ready`` (tasks became ready), ``due`` (tasks
    got a due time the promoter may be sleeping past); ``ended``: ids of tasks that ended
    (succeeded, failed or cancelled), told to the waits of the store's ``ended`` feed."""

    ready: bool = False
    due: bool = False
    ended: tuple[str, ...] = ()


@dataclass(slots=True)
class Woken:
    """What a driver collected from a plan's :class:`Wake` requests, fired after commit."""

    ready: bool = False
    due: bool = False
    ended: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Call:
    """Call ``fn(*args)``, a blocking function, inside the transaction (before it commits); its
    result is sent back. SQLite calls it on its database thread, PostgreSQL in a worker thread
    (the event loop keeps serving)."""

    fn: Callable[..., Any]
    args: tuple[Any, ...] = ()


class _Now:
    """Ask the driver for the transaction's time (an aware UTC datetime)."""

    __slots__ = ()


NOW = _Now()

Request = Stmt | Batch | Script | Wake | _Now | Call


class UniqueViolation(Exception):
    """A statement broke a unique index (thrown into the plan at the offending ``yield``)."""


def all_(query: str, into: Into, /, **params: Any) -> Stmt:
    return Stmt(query, params, "all", into)


def one(query: str, into: Into, /, **params: Any) -> Stmt:
    return Stmt(query, params, "one", into)


def value(query: str, /, **params: Any) -> Stmt:
    return Stmt(query, params, "value")


def count(query: str, /, **params: Any) -> Stmt:
    return Stmt(query, params, "count")


def execute(query: str, /, **params: Any) -> Stmt:
    return Stmt(query, params, "exec")


def batch(query: str, rows: Sequence[Mapping[str, Any]], into: Into | None = None, /) -> Batch:
    return Batch(query, rows, into)


def wake_for(statuses: Any) -> Wake:
    """The wake-up a commit needs after leaving tasks in ``statuses`` (TaskStatus values)."""
    seen = {str(s) for s in statuses}
    return Wake(ready="ready" in seen, due=bool(seen & {"scheduled", "retrying"}))
