"""Connections kept in hand between uses, in front of asyncpg's pool.

asyncpg's ``Pool.acquire(timeout=…)`` runs the wait in a new task (``wait_for``) and
``Pool.release`` runs the release in another (``shield``), with a timeout context around the
reset: about 14 µs of the node's CPU per statement measured alone, and 25-35 µs under a profile
of one create (docs/adr/0009). Every store call pays it, the hot path's single statements most
(a create, a lease, an ack). :class:`KeptConnections` keeps up to ``keep`` connections that were
released cleanly and hands them out again with a list pop, as long as nobody is waiting in the
pool: a connection is given back to the pool whenever a caller waits there, so keeping never
starves anyone. A kept connection that is closed, inside a transaction, or idle for longer than
``idle_seconds`` (a firewall or pooler may have dropped it) goes back to the pool instead, which
replaces or resets it as it would have.
"""

from __future__ import annotations

import time
from typing import Any

import asyncpg

Conn = Any  # a PoolConnectionProxy (typed as asyncpg.Connection where used)

__all__ = ["KeptConnections"]


class KeptConnections:
    """Up to ``keep`` acquired connections held between uses (see the module)."""

    def __init__(self, keep: int, idle_seconds: float = 5.0) -> None:
        self.keep = keep
        self.idle_seconds = idle_seconds
        self._kept: list[tuple[Conn, float]] = []
        self._waiting = 0  # callers inside pool.acquire

    @property
    def held(self) -> int:
        """Connections kept right now."""
        return len(self._kept)

    async def acquire(self, pool: asyncpg.Pool[Any], timeout: float) -> Conn:
        kept = self._kept
        while kept:
            conn, since = kept.pop()
            if conn.is_closed() or time.monotonic() - since > self.idle_seconds:
                await pool.release(conn)
                continue
            return conn
        self._waiting += 1
        try:
            return await pool.acquire(timeout=timeout)
        finally:
            self._waiting -= 1

    async def release(self, pool: asyncpg.Pool[Any], conn: Conn, *, clean: bool) -> None:
        """Give ``conn`` back: kept when ``clean`` (the caller's work ended without an error)
        and it is reusable as is, else to the pool."""
        if (
            clean
            and self._waiting == 0
            and len(self._kept) < self.keep
            and not conn.is_closed()
            and not conn.is_in_transaction()
        ):
            self._kept.append((conn, time.monotonic()))
            return
        await pool.release(conn)

    async def drain(self, pool: asyncpg.Pool[Any]) -> None:
        """Give every kept connection back to the pool (before closing or expiring it)."""
        kept, self._kept = self._kept, []
        for conn, _ in kept:
            await pool.release(conn)
