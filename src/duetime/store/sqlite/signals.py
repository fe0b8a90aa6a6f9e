"""In-process :class:`~duetime.store.protocols.Signal` for the single-node SQLite store.

SQLite serves one node, so a wake-up never has to cross a process: an asyncio future per waiter is
enough. Another process writing the same file (the CLI) cannot notify; waiters also poll, so that
costs only latency.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field

from duetime.store.horizon import DueHorizon


class LocalSignal(DueHorizon):
    """A coalescing wake-up flag for waiters on one event loop.

    ``notify()`` wakes every current waiter, or, when nobody waits, makes the next ``wait`` return
    True at once. It may be called from the event loop or from any other thread.
    """

    def __init__(self) -> None:
        self._pending = False
        self._waiters: set[asyncio.Future[None]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self.generation = 0
        self._changed: asyncio.Future[None] | None = None

    def notify(self, pulls_only: bool = False) -> None:
        """Wake the waiters (or remember the notification for the next wait); ``pulls_only``:
        only the ``wait_after`` waiters (see :meth:`Signal.notify`)."""
        loop = self._loop
        if loop is None or loop.is_closed():
            self._pending = self._pending or not pulls_only
            self.generation += 1
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            self._wake(pulls_only)
        else:
            # Called from another thread (e.g. the database thread): hop onto the waiters' loop.
            self._pending = self._pending or not pulls_only
            # A RuntimeError means the loop closed in between; the flag is set regardless.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self._wake, pulls_only)

    def _wake(self, pulls_only: bool = False) -> None:
        self.generation += 1
        changed, self._changed = self._changed, None
        if changed is not None and not changed.done():
            changed.set_result(None)
        if pulls_only:
            return
        if not self._waiters:
            self._pending = True
            return
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)
        self._waiters.clear()
        # Everyone waiting has been told; nobody owes the next wait a wake-up.
        self._pending = False

    async def wait(self, timeout: float) -> bool:
        """True when notified since the last wait (or during this one); False after ``timeout``."""
        if self._pending:
            self._pending = False
            return True
        loop = asyncio.get_running_loop()
        self._loop = loop
        waiter: asyncio.Future[None] = loop.create_future()
        self._waiters.add(waiter)
        try:
            async with asyncio.timeout(max(0.0, timeout)):
                await waiter
        except TimeoutError:
            return False
        finally:
            self._waiters.discard(waiter)
        return True

    async def wait_after(self, generation: int, timeout: float) -> bool:
        """True once :attr:`generation` differs from ``generation`` (False after ``timeout``);
        consumes nothing, so it never takes a wake-up from :meth:`wait`'s waiter."""
        if self.generation != generation:
            return True
        loop = asyncio.get_running_loop()
        self._loop = loop
        if self._changed is None or self._changed.get_loop() is not loop:
            self._changed = loop.create_future()
        # Shared by every caller: shielded so one caller's timeout does not cancel the others'.
        changed = self._changed
        try:
            async with asyncio.timeout(max(0.0, timeout)):
                await asyncio.shield(changed)
        except TimeoutError:
            return self.generation != generation
        return True


@dataclass(slots=True)
class Wakeups:
    """Which signals a transaction owes its waiters; fired only after it commits. ``ended``:
    ids of tasks it ended (told to the store's ``ended`` feed)."""

    ready: bool = False
    due: bool = False
    ended: list[str] = field(default_factory=list)
