"""Leadership: one node at a time runs the promoter and the reaper, through a lease in the store."""

from __future__ import annotations

import logging

from duetime import metrics
from duetime.clock import Clock
from duetime.engine.service import Service
from duetime.store import Store

log = logging.getLogger("duetime.engine")

LEADERSHIP = "maintenance"


class Leader(Service):
    """Holds (or tries to take) the ``maintenance`` leadership, renewing at a third of its TTL.

    ``is_leader`` turns False as soon as a renewal fails, before the lease could pass to another
    node, so two nodes never both believe they lead for longer than one renewal round.
    """

    name = "leader"

    def __init__(self, store: Store, node_id: str, ttl_seconds: float, clock: Clock) -> None:
        super().__init__(clock)
        self._store = store
        self._node_id = node_id
        self._ttl = ttl_seconds
        self.is_leader = False

    async def run_once(self) -> int:
        try:
            held = await self._store.leader_attempt_elect(LEADERSHIP, self._node_id, self._ttl)
        except Exception:
            self._set(False)
            raise
        self._set(held)
        return int(held)

    def _set(self, held: bool) -> None:
        if held != self.is_leader:
            log.info("node %s %s leadership", self._node_id, "took" if held else "lost")
        self.is_leader = held
        metrics.IS_LEADER.set(int(held))

    async def wait(self, did: int) -> None:
        await self._pause(self._ttl / 3)

    async def resign(self) -> None:
        if self.is_leader:
            self._set(False)
            await self._store.leader_resign(LEADERSHIP, self._node_id)
