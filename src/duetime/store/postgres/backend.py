"""The production store: PostgreSQL through asyncpg, for one node or many.

Every contract is the one written in :mod:`duetime.store.protocols`. How this backend keeps them:

* Time: every due/lease decision in SQL reads ``coalesce($1::timestamptz, now())``, where ``$1``
  is the injected clock's ``pinned()`` time (None in production: the database clock decides).
* Every state change is one ``UPDATE`` conditional on status (and ``lease_id`` for running tasks);
  claims and promotions pick rows with ``FOR UPDATE SKIP LOCKED`` so many nodes never collide.
* The hot path works in batches (:mod:`.hot`): one statement creates, promotes, claims or
  completes hundreds of tasks, and concurrent single creates share statements (:mod:`.batching`).
* Statements are written so that PostgreSQL's generic plans stay linear (see ``queries.sql``).
* Cross-node wake-ups ride on ``LISTEN``/``NOTIFY`` (:mod:`.signals`).
* Any failure to reach the server surfaces as :class:`~duetime.errors.StoreUnavailable`; the pool
  and the listener reconnect by themselves when the server is back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

import asyncpg

from duetime.clock import Clock
from duetime.errors import StoreFull, StoreUnavailable
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
from duetime.store.core.plan import Plan, Wake, Woken
from duetime.store.core.queueing import QueueingMethods
from duetime.store.core.schedules import ScheduleMethods
from duetime.store.core.tasks import TaskMethods
from duetime.store.core.tenancy import TenancyMethods
from duetime.store.core.workflows import WorkflowMethods
from duetime.store.ended import EndedFeed
from duetime.store.postgres import driver
from duetime.store.postgres import schema as pg_schema
from duetime.store.postgres.batching import InsertBatcher
from duetime.store.postgres.ends import PgEnds
from duetime.store.postgres.errors import describe_server, is_unavailable
from duetime.store.postgres.flow import PgFlow
from duetime.store.postgres.history import PgHistory
from duetime.store.postgres.hot import PgPromote
from duetime.store.postgres.pooling import KeptConnections
from duetime.store.postgres.queues import QueueOps
from duetime.store.postgres.signals import PULLS_ONLY, Listener, PgSignal, PollPeers
from duetime.store.postgres.sql import QUERIES as Q
from duetime.store.postgres.sqlapi import SqlApiMethods
from duetime.store.sql import migrations

log = logging.getLogger(__name__)

T = TypeVar("T")

if TYPE_CHECKING:
    from asyncpg.pool import PoolConnectionProxy

    Conn = PoolConnectionProxy[asyncpg.Record]

_MIGRATION_TIMEOUT = 24 * 3600.0

_SERVER_SETTINGS = {
    # JIT compilation costs tens of milliseconds on the big batch statements and never pays off
    # for short OLTP queries.
    "jit": "off",
    "application_name": "duetime",
}


class PostgresStore(
    CircuitMethods,
    IdentityMethods,
    CredentialMethods,
    LeaseReleaseMethods,
    MigrationMethods,
    TenancyMethods,
    TaskMethods,
    LeadershipMethods,
    PgPromote,
    PgFlow,
    FlowMethods,
    HotMethods,
    QueueOps,
    QueueingMethods,
    ScheduleMethods,
    NotificationMethods,
    OutboxMethods,
    FollowMethods,
    GraphMethods,
    WorkflowMethods,
    PgHistory,
    HistoryMethods,
    SqlApiMethods,
):
    """The :class:`~duetime.store.protocols.Store` on PostgreSQL (13 or newer).

    ``url`` is a ``postgresql://`` URL; its ``schema`` parameter names the schema every object
    lives in (default ``duetime``: :mod:`duetime.store.postgres.schema`). ``clock`` pins the
    store's time for tests (its ``pinned()``); production passes None or a clock whose
    ``pinned()`` is None. The pool keeps
    ``pool_min``..``pool_max`` connections, plus one dedicated listener connection.
    ``connect_timeout`` bounds one connection attempt, ``acquire_timeout`` the wait for a free
    pooled connection and ``command_timeout`` one statement (a server that stopped answering);
    any of them running out raises ``StoreUnavailable``.
    """

    def __init__(
        self,
        url: str,
        *,
        clock: Clock | None = None,
        pool_min: int = 2,
        pool_max: int = 10,
        connect_timeout: float = 5.0,
        acquire_timeout: float = 10.0,
        command_timeout: float | None = 60.0,
    ) -> None:
        self._url, self.schema = pg_schema.split_url(url)
        self._settings = {**_SERVER_SETTINGS, **pg_schema.server_settings(self.schema)}
        self._clock = clock
        self._pool_min = pool_min
        self._pool_max = max(pool_min, pool_max)
        self._connect_timeout = connect_timeout
        self._acquire_timeout = acquire_timeout
        self._command_timeout = command_timeout
        self._where = describe_server(url)
        self._pool: asyncpg.Pool[asyncpg.Record] | None = None
        # Payload of this instance's notifications: its own listener skips them.
        self._token = uuid.uuid4().hex
        polls = pg_schema.channel(self.schema, "polls")
        self._polls = PollPeers(lambda: self._send_notify(polls))
        self.ready_signal = PgSignal(
            pg_schema.channel(self.schema, "ready"), self._send_notify, self._polls
        )
        self.due_signal = PgSignal(pg_schema.channel(self.schema, "due"), self._send_notify)
        # Workflows requested through the SQL API (migration 0031): only its functions notify.
        self.requests_signal = PgSignal(
            pg_schema.channel(self.schema, "requests"), self._send_notify
        )
        self._ends = PgEnds(
            self._send_ends,
            pg_schema.channel(self.schema, "ended"),
            pg_schema.channel(self.schema, "waits"),
        )
        self.ended = EndedFeed(self._ends)
        self._ends.feed = self.ended
        self._listener = Listener(
            self._connect_listener,
            [self.ready_signal, self.due_signal, self.requests_signal],
            self._token,
            self._polls,
            polls_channel=polls,
            ends=self._ends,
        )
        self._migrations = migrations(__package__ or "duetime.store.postgres")
        # Connections kept in hand between calls (asyncpg's acquire and release cost two tasks
        # each time): as many as the creates' group commit may run at once.
        self._kept = KeptConnections(keep=max(1, self._pool_max // 2))
        self._inserts = InsertBatcher(self._insert_run, slots=max(1, pool_max // 2))

    # -- plumbing ------------------------------------------------------------------------------

    def _pinned(self) -> datetime | None:
        return None if self._clock is None else self._clock.pinned()

    def _unavailable(self, exc: BaseException) -> StoreUnavailable:
        detail = f"PostgreSQL at {self._where} is unavailable: {type(exc).__name__}: {exc}"
        if isinstance(exc, asyncpg.DiskFullError):
            return StoreFull(detail)
        return StoreUnavailable(detail)

    @contextlib.asynccontextmanager
    async def _connection(self) -> AsyncIterator[Conn]:
        """A pooled connection; connection-level failures become ``StoreUnavailable``."""
        pool = self._pool
        if pool is None:
            raise StoreUnavailable(f"the PostgreSQL store at {self._where} is not open")
        kept = self._kept
        try:
            conn = await kept.acquire(pool, self._acquire_timeout)
            clean = False
            try:
                yield conn
                clean = True
            finally:
                await kept.release(pool, conn, clean=clean)
        except Exception as exc:
            if not is_unavailable(exc):
                raise
            # Idle connections are likely dead too: have the pool replace them all.
            with contextlib.suppress(Exception):
                await kept.drain(pool)
            with contextlib.suppress(Exception):
                await pool.expire_connections()
            raise self._unavailable(exc) from exc

    @contextlib.asynccontextmanager
    async def _transaction(self) -> AsyncIterator[Conn]:
        async with self._connection() as conn, conn.transaction():
            yield conn

    async def _run(
        self,
        plan: Plan[T],
        *,
        write: bool = False,
        long: bool = False,
        snapshot: bool = False,
        one: bool = False,
    ) -> T:
        """Run a core plan (see ``Runs._run``): a write in one transaction, its changes
        attributed to the caller's actor; a read on one pooled connection (in one transaction
        when ``snapshot``); a single statement (``one``) without BEGIN/COMMIT."""
        pinned = self._pinned()
        if not (write or snapshot):
            async with self._connection() as conn:
                return await driver.run(conn, pinned, plan)
        wake = Woken()
        if one:
            async with self._connection() as conn:
                result = await driver.run(conn, pinned, plan, wake)
        else:
            if write:
                plan = acting(plan, current_actor.get())
            async with self._transaction() as conn:
                timeout = _MIGRATION_TIMEOUT if long else None
                result = await driver.run(conn, pinned, plan, wake, timeout=timeout)
        self._wake(wake)
        return result

    def _wake(self, wake: Woken | Wake) -> None:
        """After a commit: wake dispatchers and lease polls (``ready``) and promoters (``due``)
        as ``wake`` asks."""
        if wake.ready:
            self.ready_signal.notify()
        if wake.due:
            self.due_signal.notify()
        if wake.ended and self.ended.wanted:
            self.ended.publish(wake.ended)

    async def _connect_listener(self) -> asyncpg.Connection[Any]:
        return await asyncpg.connect(
            self._url,
            timeout=self._connect_timeout,
            server_settings={**self._settings, "application_name": "duetime-listener"},
        )

    async def _send_ends(self, channel: str, payload: str) -> None:
        async with self._connection() as conn:
            await conn.execute(Q["notify"], channel, f"{self._token}:{payload}")

    async def _send_notify(self, channel: str, pulls_only: bool = False) -> None:
        payload = f"{self._token}:{PULLS_ONLY}" if pulls_only else self._token
        async with self._connection() as conn:
            await conn.execute(Q["notify"], channel, payload)

    # -- life of the store ---------------------------------------------------------------------

    async def open(self) -> None:
        """Connect the pool and the listener. Raises ``StoreUnavailable``."""
        if self._pool is not None:
            return
        try:
            pool = await asyncpg.create_pool(
                self._url,
                min_size=self._pool_min,
                max_size=self._pool_max,
                timeout=self._connect_timeout,
                command_timeout=self._command_timeout,
                server_settings=self._settings,
                reset=_keep_session,
            )
        except Exception as exc:
            if is_unavailable(exc):
                raise self._unavailable(exc) from exc
            raise
        self._pool = pool
        self._listener.start()
        # Wait for LISTEN so a notification right after open() is not missed; if the listener is
        # slow it keeps trying in the background and waiters fall back to polling meanwhile.
        if not await self._listener.wait_connected(self._connect_timeout):
            log.warning("store listener not connected yet; cross-node wake-ups delayed")

    async def close(self) -> None:
        """Release every connection; idempotent."""
        await self._listener.close()
        await self.ready_signal.drain()
        await self.due_signal.drain()
        await self.requests_signal.drain()
        await self._polls.drain()
        await self._ends.drain()
        pool, self._pool = self._pool, None
        if pool is not None:
            try:
                await self._kept.drain(pool)
                await asyncio.wait_for(pool.close(), 5.0)
            except Exception:
                pool.terminate()

    async def migrate(self) -> list[str]:
        """Apply pending migrations in this store's schema, first moving a database laid out
        before there was one (:func:`duetime.store.postgres.schema.migrate`); returns the
        versions applied. Concurrent nodes are safe: the later one waits, then finds nothing."""
        plan = pg_schema.migrate(self.schema, self._migrations)
        return await self._run(plan, write=True, long=True)

    async def migrations_pending(self) -> list[str]:
        """Versions not yet applied (empty when current)."""
        return await self._run(pg_schema.pending(self.schema, self._migrations), snapshot=True)

    async def now(self) -> datetime:
        """The pinned time if any, else the database's ``now()``."""
        pinned = self._pinned()
        if pinned is not None:
            return pinned
        async with self._connection() as conn:
            value: datetime = await conn.fetchval(Q["now"], None)
        return value


async def _keep_session(_conn: object) -> None:
    """Pool reset hook: nothing to undo. asyncpg's default sends ``RESET ALL; UNLISTEN *; ...``
    on every release, a round trip per call; this store leaves no session state behind (no SET,
    no LISTEN on pooled connections, advisory locks released explicitly). An open transaction is
    still rolled back by asyncpg before this hook runs."""
