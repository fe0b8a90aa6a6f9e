"""The SQLite store: duetime's embedded default (one node, one file in the data directory).

One dedicated thread owns the only connection. Every store method is one function that runs a
whole transaction on that thread (``BEGIN IMMEDIATE`` for writes), so a batch of any size costs one
thread hop and one commit. SQLite serves a single node, so the process clock is the store clock:
"now" is ``clock.pinned()`` when the store was given a clock that pins time (tests), else the real
UTC time, read once per transaction after the write lock is taken.

Durability: WAL journal with ``synchronous=FULL`` by default, so a committed transaction survives
a crash or power loss. ``NORMAL`` is faster and still crash-safe for the process, but the last
commits may roll back on power loss.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import TypeVar

from duetime.clock import Clock, utcnow
from duetime.errors import ConfigError, Conflict, StoreFull, StoreUnavailable
from duetime.history.actor import current_actor
from duetime.store.core.circuits import CircuitMethods
from duetime.store.core.credentials import CredentialMethods
from duetime.store.core.flow import FlowMethods
from duetime.store.core.follow import FollowMethods
from duetime.store.core.graph import GraphMethods
from duetime.store.core.history import HistoryMethods, acting
from duetime.store.core.hot import HotMethods
from duetime.store.core.identity import IdentityMethods
from duetime.store.core.leadership import LeadershipMethods
from duetime.store.core.leases import LeaseReleaseMethods
from duetime.store.core.migrations import MigrationMethods
from duetime.store.core.notifications import NotificationMethods
from duetime.store.core.outbox import OutboxMethods
from duetime.store.core.plan import Plan, Woken
from duetime.store.core.queueing import QueueingMethods
from duetime.store.core.schedules import ScheduleMethods
from duetime.store.core.tasks import TaskMethods
from duetime.store.core.tenancy import TenancyMethods
from duetime.store.core.workflows import WorkflowMethods
from duetime.store.ended import EndedFeed
from duetime.store.sql import migrations
from duetime.store.sqlite import (
    driver,
)
from duetime.store.sqlite.history import SqliteHistory
from duetime.store.sqlite.hot import SqliteHot
from duetime.store.sqlite.queries import QUERIES as Q
from duetime.store.sqlite.rows import to_micros
from duetime.store.sqlite.signals import LocalSignal, Wakeups

__all__ = ["SqliteStore"]

log = logging.getLogger(__name__)

T = TypeVar("T")
Tx = Callable[[sqlite3.Connection, int], T]
"""A transaction body: runs on the database thread with (connection, now in microseconds)."""

# PRAGMA values cannot be bound as parameters: one fixed statement per allowed level.
_SYNCHRONOUS = {
    "OFF": "PRAGMA synchronous = OFF",
    "NORMAL": "PRAGMA synchronous = NORMAL",
    "FULL": "PRAGMA synchronous = FULL",
    "EXTRA": "PRAGMA synchronous = EXTRA",
}
_PRAGMAS = (
    "PRAGMA foreign_keys = ON",
    "PRAGMA busy_timeout = 10000",
    # Scratch b-trees (sorts of claim candidates) stay in memory; 32 MiB page cache.
    "PRAGMA temp_store = MEMORY",
    "PRAGMA cache_size = -32768",
)
_BUSY_TIMEOUT_SECONDS = 10.0
_INTEGRITY_RETRIES = 2


class SqliteStore(
    CircuitMethods,
    IdentityMethods,
    CredentialMethods,
    LeaseReleaseMethods,
    MigrationMethods,
    TenancyMethods,
    TaskMethods,
    LeadershipMethods,
    HotMethods,
    FlowMethods,
    SqliteHot,
    QueueingMethods,
    ScheduleMethods,
    NotificationMethods,
    OutboxMethods,
    FollowMethods,
    GraphMethods,
    WorkflowMethods,
    SqliteHistory,
    HistoryMethods,
):
    """:class:`~duetime.store.protocols.Store` on one SQLite file.

    ``path`` is the database file; its directory is created on :meth:`open`. ``synchronous`` is
    SQLite's durability level (``FULL`` default, ``NORMAL``, ``EXTRA`` or ``OFF``). Raises
    ``ConfigError`` for an unknown level.

    Every method keeps the contract written on the protocol method of the same name. Methods that
    cannot reach the file (not open, closed, I/O error, schema missing) raise ``StoreUnavailable``.
    ``ready_signal``/``due_signal`` are in-process (:class:`LocalSignal`): SQLite serves one node.
    """

    def __init__(
        self, path: Path, *, clock: Clock | None = None, synchronous: str = "FULL"
    ) -> None:
        level = synchronous.upper()
        if level not in _SYNCHRONOUS:
            raise ConfigError(
                f"unknown SQLite synchronous level {synchronous!r}: use FULL, NORMAL, EXTRA or OFF"
            )
        self.path = Path(path)
        self._clock = clock
        self._synchronous = _SYNCHRONOUS[level]
        self._executor: ThreadPoolExecutor | None = None
        self._conn: sqlite3.Connection | None = None
        self.ready_signal = LocalSignal()
        self.due_signal = LocalSignal()
        self.ended = EndedFeed()
        self._migrations = migrations(__package__ or "duetime.store.sqlite")

    # -- the database thread ------------------------------------------------------------------

    def _now(self) -> datetime:
        """The store's clock: the pinned test time, else real UTC time."""
        pinned = self._clock.pinned() if self._clock is not None else None
        return pinned if pinned is not None else utcnow()

    def _connect(self) -> None:
        in_memory = str(self.path) == ":memory:"
        try:
            if not in_memory:
                private_file(self.path)
            conn = sqlite3.connect(
                str(self.path),
                timeout=_BUSY_TIMEOUT_SECONDS,
                isolation_level=None,  # we issue BEGIN/COMMIT ourselves
                cached_statements=256,
            )
        except (OSError, sqlite3.Error) as exc:
            raise StoreUnavailable(f"cannot open SQLite database {self.path}: {exc}") from exc
        try:
            conn.row_factory = sqlite3.Row
            mode = conn.execute(Q["journal_mode_wal"]).fetchone()[0]
            if mode != "wal" and not in_memory:
                log.warning("SQLite at %s refused WAL mode (journal_mode=%s)", self.path, mode)
            conn.execute(self._synchronous)
            for pragma in _PRAGMAS:
                conn.execute(pragma)
            conn.create_function("duetime_uuid", 0, _random_uuid, deterministic=False)
        except sqlite3.Error as exc:
            conn.close()
            raise StoreUnavailable(f"cannot use SQLite database {self.path}: {exc}") from exc
        self._conn = conn

    def _disconnect(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except sqlite3.Error as exc:
                log.warning("closing SQLite database %s: %s", self.path, exc)

    def _transaction(self, body: Tx[T], *, write: bool) -> T:
        """Run ``body`` in one transaction on the database thread; roll back on any error."""
        conn = self._conn
        if conn is None:
            raise StoreUnavailable("the SQLite store is closed")
        try:
            conn.execute(Q["begin_immediate"] if write else Q["begin_read"])
            try:
                result = body(conn, to_micros(self._now()))
                conn.execute(Q["commit"])
            except BaseException:
                if conn.in_transaction:
                    conn.execute(Q["rollback"])
                raise
        except sqlite3.IntegrityError:
            raise
        except (sqlite3.OperationalError, sqlite3.DatabaseError) as exc:
            if not isinstance(exc, sqlite3.OperationalError) and type(exc) is not (
                sqlite3.DatabaseError
            ):
                raise  # a programming error (bad binding, misuse): a bug, not an outage
            raise self._unavailable(exc) from exc
        return result

    def _unavailable(self, exc: sqlite3.Error) -> StoreUnavailable:
        detail = f"SQLite database {self.path}: {exc}"
        if getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL:
            return StoreFull(detail)
        if "no such table" in str(exc):
            detail += " (is the schema migrated? run `duetime migrate`)"
        return StoreUnavailable(detail)

    # -- hops from the event loop --------------------------------------------------------------

    async def _call(self, fn: Callable[[], T]) -> T:
        executor = self._executor
        if executor is None:
            raise StoreUnavailable("the SQLite store is not open")
        try:
            return await asyncio.get_running_loop().run_in_executor(executor, fn)
        except RuntimeError as exc:  # the executor shut down under us (close raced this call)
            if self._executor is None:
                raise StoreUnavailable("the SQLite store was closed") from exc
            raise

    async def _write(self, body: Tx[T], *, integrity_retries: int = 0) -> T:
        # Audit: the caller's actor (a context variable, invisible on the database thread).
        attributed = with_actor(body, current_actor.get())
        for attempt in range(integrity_retries + 1):
            try:
                return await self._call(lambda: self._transaction(attributed, write=True))
            except sqlite3.IntegrityError as exc:
                if attempt == integrity_retries:
                    raise Conflict(f"conflicting write: {exc}") from exc
        raise AssertionError("unreachable")

    async def _read(self, body: Tx[T]) -> T:
        return await self._call(lambda: self._transaction(body, write=False))

    async def _run(
        self,
        plan: Plan[T],
        *,
        write: bool = False,
        long: bool = False,
        snapshot: bool = False,
        one: bool = False,
    ) -> T:
        """Run a core plan in one transaction on the database thread (see ``Runs._run``; a
        read is always one transaction here)."""
        if not write:
            return await self._read(lambda conn, now: driver.run(conn, now, plan))
        wake = Woken()
        result = await self._write(lambda conn, now: driver.run(conn, now, plan, wake))
        self._fire(wake)
        return result

    def _fire(self, wake: Wakeups | Woken) -> None:
        if wake.ready:
            self.ready_signal.notify()
        if wake.due:
            self.due_signal.notify()
        if wake.ended and self.ended.wanted:
            self.ended.publish(wake.ended)

    # -- life of the store ---------------------------------------------------------------------

    async def open(self) -> None:
        """Create the directory, open the file (WAL). Does not migrate. ``StoreUnavailable``."""
        if self._executor is not None:
            return
        executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="duetime-sqlite")
        try:
            await asyncio.get_running_loop().run_in_executor(executor, self._connect)
        except BaseException:
            executor.shutdown(wait=False)
            raise
        self._executor = executor

    async def close(self) -> None:
        """Close the connection and stop the thread; idempotent. Queued calls finish first."""
        executor, self._executor = self._executor, None
        if executor is None:
            return
        try:
            await asyncio.get_running_loop().run_in_executor(executor, self._disconnect)
        finally:
            executor.shutdown(wait=False)

    async def now(self) -> datetime:
        return self._now()


def private_file(path: Path) -> None:
    """Make ``path``'s directory (0700 when created here) and the file itself 0600 before SQLite
    opens it: the file holds signing secrets. SQLite gives its -wal and -shm files the mode of
    the database file."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        if os.fstat(fd).st_mode & 0o077:
            log.warning("SQLite database %s was readable by others; making it 0600", path)
            os.fchmod(fd, 0o600)
    finally:
        os.close(fd)
    for suffix in ("-wal", "-shm"):  # left by an older version with a looser mode
        side = path.with_name(path.name + suffix)
        if side.exists() and side.stat().st_mode & 0o077:
            side.chmod(0o600)


def _random_uuid() -> str:
    """SQL function ``duetime_uuid()``: a fresh random (v4) UUID per call, for lease ids."""
    return str(uuid.uuid4())


def with_actor(body: Tx[T], actor: str | None) -> Tx[T]:
    """``body`` with its changes attributed to ``actor``: the plan steps of
    :func:`~duetime.store.core.history.acting` around a transaction body (a plan's, or one not
    a plan yet)."""
    if actor is None:
        return body

    def run(conn: sqlite3.Connection, now: int) -> T:
        return driver.run(conn, now, acting(_body(body, conn, now), actor))

    return run


def _body(body: Tx[T], conn: sqlite3.Connection, now: int) -> Plan[T]:
    yield from ()
    return body(conn, now)
