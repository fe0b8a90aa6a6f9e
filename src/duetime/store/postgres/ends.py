"""Ended tasks across PostgreSQL nodes: the :class:`~duetime.store.ended.Remote` of a
PostgreSQL store's :class:`~duetime.store.ended.EndedFeed`.

A node with open waits says so on :data:`WAITS_CHANNEL` at most once a second while they stay
open. Every node records who said so for :data:`WAITERS_SECONDS`; only while some other node
does, a commit that ended tasks sends their ids on :data:`ENDED_CHANNEL` (``NOTIFY``, after the
commit, in the background; ids of several commits ride together, at most :data:`IDS_PER_NOTIFY`
a payload). A cluster where nobody waits sends nothing, as :class:`~duetime.store.postgres.
signals.PollPeers` keeps long-poll wake-ups from nodes that do not poll.

Unlike ``PollPeers``, a node that just (re)connected does not assume others wait: a wait on
another node missed for that moment is read again by its node's sweep within a second
(:mod:`duetime.lifecycle.waits`), as is any notification lost to a crash between commit and
send.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence

from duetime.store.ended import EndedFeed, Remote

log = logging.getLogger("duetime.store")

ENDED_CHANNEL = "duetime_ended"
WAITS_CHANNEL = "duetime_waits"
WAITS_ANNOUNCE_SECONDS = 1.0
WAITERS_SECONDS = 3.0
"""A node heard on :data:`WAITS_CHANNEL` counts as waiting for this long."""
IDS_PER_NOTIFY = 200
"""Ids per ``NOTIFY`` payload: 200 canonical ids and commas stay under PostgreSQL's 8,000
bytes."""

Send = Callable[[str, str], Awaitable[None]]
"""Sends ``(channel, payload after the sender's token)``."""


class PgEnds(Remote):
    """Sends ended ids to waiting nodes and hears theirs (see the module)."""

    def __init__(self, send: Send, ended: str = ENDED_CHANNEL, waits: str = WAITS_CHANNEL) -> None:
        self._send = send
        self.ended_channel, self.waits_channel = ended, waits
        """The channels this node speaks on (named after its schema: see ``schema.channel``)."""
        self._waiters: dict[str, float] = {}
        self._announced_at = -WAITS_ANNOUNCE_SECONDS
        self._queue: list[str] = []
        self._sending: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.feed: EndedFeed | None = None

    # -- sending ----------------------------------------------------------------------------

    def others_wait(self) -> bool:
        if not self._waiters:
            return False
        now = time.monotonic()
        for token in [t for t, until in self._waiters.items() if until <= now]:
            del self._waiters[token]
        return bool(self._waiters)

    def send(self, ids: Sequence[str]) -> None:
        self._queue.extend(ids)
        if self._sending is None or self._sending.done():
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # no loop: nothing can be sent (a lost wake-up costs a sweep)
                self._queue.clear()
                return
            self._sending = loop.create_task(self._drain())

    async def _drain(self) -> None:
        await asyncio.sleep(0)  # ids of commits finishing in this turn of the loop ride along
        while self._queue:
            chunk, self._queue = self._queue[:IDS_PER_NOTIFY], self._queue[IDS_PER_NOTIFY:]
            try:
                await self._send(self.ended_channel, ",".join(chunk))
            except Exception as exc:  # the waiters' sweep reads them within a second
                log.debug("could not send %d ended ids: %s", len(chunk), exc)

    def waiting(self) -> None:
        now = time.monotonic()
        if now - self._announced_at < WAITS_ANNOUNCE_SECONDS:
            return
        self._announced_at = now
        try:
            task = asyncio.get_running_loop().create_task(self._announce())
        except RuntimeError:
            return
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _announce(self) -> None:
        try:
            await self._send(self.waits_channel, "")
        except Exception as exc:  # others miss our ends until the next try: the sweep covers
            self._announced_at = -WAITS_ANNOUNCE_SECONDS
            log.debug("announcing waits failed: %s", exc)

    # -- hearing -----------------------------------------------------------------------------

    def heard(self, channel: str, sender: str, payload: str) -> None:
        """A notification from another node on one of this module's channels."""
        if channel == self.waits_channel:
            self._waiters[sender] = time.monotonic() + WAITERS_SECONDS
        elif channel == self.ended_channel and self.feed is not None and self.feed.waits > 0:
            self.feed.heard([i for i in payload.split(",") if i])

    def reconnected(self) -> None:
        """The listener (re)connected: ends sent meanwhile are lost; every wait reads again."""
        self._announced_at = -WAITS_ANNOUNCE_SECONDS
        if self.feed is not None and self.feed.waits > 0:
            self.feed.heard(None)

    async def drain(self) -> None:
        pending = [t for t in (self._sending, *self._tasks) if t is not None]
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
