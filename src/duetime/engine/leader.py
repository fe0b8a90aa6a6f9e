"""Leadership: one node at a time runs the promoter and the reaper, through a lease in the store."""

from __future__ import annotations

import logging

from duetime import metrics
from duetime.clock import Clock
from duetime.engine.service import Service
from duetime.store.protocols import Leadership

log = logging.getLogger("duetime.engine")

LEADERSHIP = "maintenance"


class Leader(Service):
    """Holds (or tries to take) the ``maintenance`` leadership, renewing at a third of its TTL.

    ``is_leader`` turns False as soon as a renewal fails, before the lease could pass to another
    node, so two nodes never both believe they lead for longer than one renewal round. It is also
    False once ``ttl_seconds`` have passed on this process's monotonic clock since the last
    successful renewal was sent: a process that was stopped (SIGSTOP, a VM pause, a long GC) and
    wakes past its lease could not renew, and must not run one more leader-only round on the
    strength of a lease another node may hold by now. The monotonic clock runs on while the
    process is stopped, and the store granted the lease no earlier than the call was sent.
    """

    name = "leader"

    def __init__(self, store: Leadership, node_id: str, ttl_seconds: float, clock: Clock) -> None:
        super().__init__(clock)
        self._store = store
        self._node_id = node_id
        self._ttl = ttl_seconds
        self._held = False
        self._valid_until = 0.0  # monotonic; the lease cannot outlive this

    @property
    def is_leader(self) -> bool:
        """Whether this node leads now: its last renewal succeeded, within ``ttl_seconds``."""
        if self._held and self._clock.monotonic() >= self._valid_until:
            log.warning(
                "node %s: no leadership renewal for %.1fs (the process was stopped or starved); "
                "acting as a follower until it renews",
                self._node_id,
                self._ttl,
            )
            self._set(False)
        return self._held

    @is_leader.setter
    def is_leader(self, held: bool) -> None:
        """Pin the belief (tests play two nodes that both believe they lead)."""
        self._held = held
        self._valid_until = float("inf") if held else 0.0

    async def run_once(self) -> int:
        sent = self._clock.monotonic()
        try:
            held = await self._store.leader_attempt_elect(LEADERSHIP, self._node_id, self._ttl)
        except Exception:
            self._set(False)
            raise
        self._valid_until = sent + self._ttl
        self._set(held)
        return int(held)

    def _set(self, held: bool, *, resigned: bool = False) -> None:
        if held != self._held:
            change = "took" if held else ("resigned" if resigned else "lost")
            log.log(
                logging.WARNING if change == "lost" else logging.INFO,
                "node %s %s leadership",
                self._node_id,
                change,
                extra={"event": "leadership_changed", "node": self._node_id, "leadership": change},
            )
            metrics.LEADERSHIP_CHANGES.labels(change).inc()
        self._held = held
        metrics.IS_LEADER.set(int(held))

    async def wait(self, did: int) -> None:
        await self._pause(self._ttl / 3)

    async def resign(self) -> None:
        if self._held:
            self._set(False, resigned=True)
            await self._store.leader_resign(LEADERSHIP, self._node_id)
