"""Wake-ups across nodes: :class:`PgSignal` over PostgreSQL ``LISTEN``/``NOTIFY``.

Every store instance holds one dedicated listener connection (:class:`Listener`) subscribed to
each signal's channel. After a commit that made tasks ready (or due at a new time), the store
calls ``notify()``: its own waiters wake at once, and one ``pg_notify`` goes out in the background
to every other node; notifies made while that send is still queued ride along with it. The
payload is the sender's token, so its own listener ignores the echo, followed by ``:pulls`` when
only long polls need waking (``worker`` tasks made ready: no dispatcher claims those).

Why not NOTIFY inside the transaction that changed the tasks: PostgreSQL serializes the commits of
notifying transactions on one lock held through the commit's WAL flush, which cut concurrent
single creates 2-4x. Notifying after commit still never wakes anyone before the change is visible;
a notify lost to a crash in between costs latency only, since every waiter also polls.
The SQL API's functions (migration ``0024_sql_api``) are the exception: they run inside an
application's transaction, after whose commit no node is there to notify, so they NOTIFY in it
(PostgreSQL delivers it at commit) on the same channels, with a payload that is no node's token.

The listener reconnects by itself with backoff after the server goes away. A reconnect wakes every
waiter, since notifications sent while it was away are lost; a spurious wake only costs one poll.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import asyncpg

from duetime.store.horizon import DueHorizon
from duetime.store.postgres.ends import PgEnds
from duetime.store.postgres.sql import QUERIES

log = logging.getLogger(__name__)

READY_CHANNEL = "duetime_ready"
DUE_CHANNEL = "duetime_due"
"""The channels of a store in the default schema; one in schema ``x`` uses ``x_ready`` and
``x_due`` (:func:`duetime.store.postgres.schema.channel`)."""
PULLS_ONLY = "pulls"
"""A notify's payload is ``<sender token>`` or ``<sender token>:pulls`` (wake long polls only).
The SQL API's functions send ``sql`` or ``sql:pulls``: no node's token, so every node wakes."""
POLLS_CHANNEL = "duetime_polls"
"""A node whose long polls wait says so here (payload: its token), at most every
:data:`POLLS_ANNOUNCE_SECONDS` while they do (``x_polls`` for a store in schema ``x``)."""
POLLS_ANNOUNCE_SECONDS = 1.0
POLLS_PEER_SECONDS = 3.0
"""A node heard on :data:`POLLS_CHANNEL` counts as polling for this long; after this node's
listener (re)connects, it assumes other nodes poll for this long (it may have missed them)."""

_MIN_BACKOFF = 0.05
_MAX_BACKOFF = 2.0
_KEEPALIVE_SECONDS = 10.0


class PollPeers:
    """Whether another node serves long polls, so that a wake-up meant for long polls only
    (``notify(pulls_only=True)``: worker tasks made ready) is sent across nodes only when
    someone else can use it. A single node, or one whose peers never poll, then sends no
    ``NOTIFY`` for a create of worker tasks: that statement, sent at the very moment the local
    poll claims the new task, is most of an immediate worker task's latency beyond the claim
    itself.

    This node announces itself on :data:`POLLS_CHANNEL` when one of its polls starts waiting
    (:meth:`polling`, at most every :data:`POLLS_ANNOUNCE_SECONDS`); the listener records other
    nodes' announcements (:meth:`heard`). A poll that starts waiting on another node in the
    milliseconds before its announcement arrives can miss a wake-up: it claims again within
    its poll slice (one second), as after any lost notification.
    """

    def __init__(self, announce: Callable[[], Awaitable[None]]) -> None:
        self._announce = announce
        self._peers: dict[str, float] = {}
        self._announced_at = -POLLS_ANNOUNCE_SECONDS
        self._unsure_until = time.monotonic() + POLLS_PEER_SECONDS
        self._tasks: set[asyncio.Task[None]] = set()

    def any(self) -> bool:
        """True while another node polls, or while this one cannot be sure it does not."""
        now = time.monotonic()
        if now < self._unsure_until:
            return True
        for token in [t for t, until in self._peers.items() if until <= now]:
            del self._peers[token]
        return bool(self._peers)

    def heard(self, token: str) -> None:
        self._peers[token] = time.monotonic() + POLLS_PEER_SECONDS

    def reconnected(self) -> None:
        """The listener (re)connected: announcements may have been missed, ours too."""
        self._unsure_until = time.monotonic() + POLLS_PEER_SECONDS
        self._announced_at = -POLLS_ANNOUNCE_SECONDS

    def polling(self) -> None:
        """A local long poll waits: announce this node unless it did so just now."""
        now = time.monotonic()
        if now - self._announced_at < POLLS_ANNOUNCE_SECONDS:
            return
        self._announced_at = now
        task = asyncio.get_running_loop().create_task(self._send())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send(self) -> None:
        try:
            await self._announce()
        except Exception as exc:  # others then miss our wake-ups until the next try: latency
            self._announced_at = -POLLS_ANNOUNCE_SECONDS
            log.debug("announcing long polls failed: %s", exc)

    async def drain(self) -> None:
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)


class PgSignal(DueHorizon):
    """A :class:`duetime.store.protocols.Signal` shared by every node on one PostgreSQL database.

    ``notify()`` wakes local waiters at once and sends one ``pg_notify`` on ``channel`` in the
    background (notifies made before that send starts ride along with it). ``wait(timeout)`` is
    True when notified since the last wait, locally or by another node.
    """

    def __init__(
        self,
        channel: str,
        send: Callable[[str, bool], Awaitable[None]],
        peers: PollPeers | None = None,
    ) -> None:
        self.channel = channel
        self._send = send
        self._peers = peers
        self._event = asyncio.Event()
        self._send_pending = False
        self._send_all = False  # a notify waiting for the send wakes dispatchers too
        self._tasks: set[asyncio.Task[None]] = set()
        self.generation = 0
        self._changed = asyncio.Event()

    def notify(self, pulls_only: bool = False) -> None:
        self.wake(pulls_only)
        if pulls_only and self._peers is not None and not self._peers.any():
            return  # no other node has long polls to wake
        self._send_all = self._send_all or not pulls_only
        if self._send_pending:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop: nobody on this node can be waiting, and we cannot send
            return
        self._send_pending = True
        task = loop.create_task(self._broadcast())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    @property
    def remote_pollers(self) -> bool:
        """Whether a pulls-only notify is sent to other nodes (see :class:`PollPeers`)."""
        return self._peers is None or self._peers.any()

    def wake(self, pulls_only: bool = False) -> None:
        """Wake this node's waiters only (the listener calls it for other nodes' notifies);
        ``pulls_only``: the :meth:`wait_after` waiters only."""
        if not pulls_only:
            self._event.set()
        self.generation += 1
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def wait_after(self, generation: int, timeout: float) -> bool:
        """True once :attr:`generation` differs from ``generation`` (False after ``timeout``);
        consumes nothing, so it never takes a wake-up from :meth:`wait`'s waiter."""
        if self.generation != generation:
            return True
        if self._peers is not None:
            self._peers.polling()
        try:
            await asyncio.wait_for(self._changed.wait(), timeout)
        except TimeoutError:
            return self.generation != generation
        return True

    async def wait(self, timeout: float) -> bool:
        if not self._event.is_set():
            try:
                await asyncio.wait_for(self._event.wait(), timeout)
            except TimeoutError:
                return False
        self._event.clear()
        return True

    async def _broadcast(self) -> None:
        # Cleared before sending: a notify() arriving while the send is in flight needs its own.
        self._send_pending = False
        pulls_only, self._send_all = not self._send_all, False
        try:
            await self._send(self.channel, pulls_only)
        except Exception as exc:  # a lost cross-node wake-up costs latency only
            log.debug("pg_notify on %s failed: %s", self.channel, exc)

    async def drain(self) -> None:
        """Wait for background sends in flight (used on close)."""
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)


class Listener:
    """One connection that LISTENs on every signal's channel and reconnects when it is lost."""

    def __init__(
        self,
        connect: Callable[[], Awaitable[asyncpg.Connection[Any]]],
        signals: Sequence[PgSignal],
        token: str,
        peers: PollPeers | None = None,
        *,
        polls_channel: str = POLLS_CHANNEL,
        ends: PgEnds | None = None,
    ) -> None:
        self._connect = connect
        self._polls_channel = polls_channel
        self._signals = {s.channel: s for s in signals}
        self._token = token
        self._peers = peers
        self._ends = ends
        self._task: asyncio.Task[None] | None = None
        self._connected = asyncio.Event()
        self._conn: asyncpg.Connection[Any] | None = None
        self.connections = 0
        """How many times the listener has connected (1 + reconnects)."""

    @property
    def server_pid(self) -> int | None:
        """Backend pid of the live listener connection, or None while reconnecting."""
        conn = self._conn
        return None if conn is None or conn.is_closed() else conn.get_server_pid()

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def wait_connected(self, seconds: float) -> bool:
        """True once a listener connection is up (False if not within ``seconds``)."""
        try:
            await asyncio.wait_for(self._connected.wait(), seconds)
        except TimeoutError:
            return False
        return True

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        conn, self._conn = self._conn, None
        if conn is not None and not conn.is_closed():
            conn.terminate()

    def _on_notification(self, _conn: object, _pid: int, channel: str, payload: object) -> None:
        sender, _, scope = str(payload).partition(":")
        if sender == self._token:
            return  # our own notify: the sender already woke this node
        if channel == self._polls_channel:
            if self._peers is not None:
                self._peers.heard(sender)
            return
        if self._ends is not None and channel in (
            self._ends.ended_channel,
            self._ends.waits_channel,
        ):
            self._ends.heard(channel, sender, scope)
            return
        signal = self._signals.get(channel)
        if signal is not None:
            signal.wake(pulls_only=scope == PULLS_ONLY)

    async def _run(self) -> None:
        backoff = _MIN_BACKOFF
        while True:
            try:
                conn = await self._connect()
            except Exception as exc:
                log.debug("listener cannot connect (retry in %.2fs): %s", backoff, exc)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, _MAX_BACKOFF)
                continue
            lost = asyncio.Event()
            conn.add_termination_listener(lambda _c, lost=lost: lost.set())
            try:
                ends = [self._ends.ended_channel, self._ends.waits_channel] if self._ends else []
                polls = [self._polls_channel] if self._peers else []
                for channel in [*self._signals, *polls, *ends]:
                    await conn.add_listener(channel, self._on_notification)
            except Exception as exc:
                log.debug("listener cannot LISTEN: %s", exc)
                conn.terminate()
                await asyncio.sleep(backoff)
                continue
            backoff = _MIN_BACKOFF
            self._conn = conn
            self.connections += 1
            if self._peers is not None:
                self._peers.reconnected()
            if self._ends is not None:
                self._ends.reconnected()
            self._connected.set()
            if self.connections > 1:
                log.info("store listener reconnected")
                for signal in self._signals.values():
                    signal.wake()
            try:
                await self._watch(conn, lost)
            finally:
                self._connected.clear()
                self._conn = None
                if not conn.is_closed():
                    conn.terminate()
            log.warning("store listener lost its connection; reconnecting")

    async def _watch(self, conn: asyncpg.Connection[Any], lost: asyncio.Event) -> None:
        """Return when the connection is gone; a periodic query also catches silent deaths."""
        while not lost.is_set():
            try:
                await asyncio.wait_for(lost.wait(), _KEEPALIVE_SECONDS)
            except TimeoutError:
                try:
                    await conn.execute(QUERIES["ping"], timeout=_KEEPALIVE_SECONDS / 2)
                except Exception:
                    return
