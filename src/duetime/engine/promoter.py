"""Promoter: moves due ``scheduled``/``retrying`` tasks to ``ready``, in batches (leader only)."""

from __future__ import annotations

import asyncio

from duetime import metrics
from duetime.clock import Clock
from duetime.engine.leader import Leader
from duetime.engine.service import Service
from duetime.store import Store

_FIRST_BATCH = 256


class Promoter(Service):
    """Each round promotes every due task (``batch`` at a time), then sleeps until the earliest
    ``due_at`` still waiting — capped by ``poll_interval`` and cut short by the store's
    ``due_signal`` when a task with an earlier due time arrives."""

    name = "promoter"

    def __init__(
        self, store: Store, leader: Leader, clock: Clock, *, batch: int, poll_interval: float
    ) -> None:
        super().__init__(clock)
        self._store = store
        self._leader = leader
        self._batch = batch
        self._poll = poll_interval

    async def run_once(self) -> int:
        if not self._leader.is_leader:
            return 0
        total = 0
        # A small first batch, then doubling: when a herd falls due, dispatchers get the first
        # tasks within milliseconds instead of after one big UPDATE of ``batch`` rows.
        batch = min(self._batch, _FIRST_BATCH)
        while True:
            moved = await self._store.task_promote_due(batch)
            total += moved
            if moved < batch or self.stopping:
                break
            batch = min(self._batch, batch * 2)
            await asyncio.sleep(0)  # let dispatchers start on what is ready
        metrics.PROMOTED.inc(total)
        return total

    async def wait(self, did: int) -> None:
        timeout = self._poll
        if self._leader.is_leader:
            next_due = await self._store.task_next_due_at()
            if next_due is not None:
                until = (next_due - await self._store.now()).total_seconds()
                timeout = max(0.0, min(timeout, until))
        if timeout > 0 and not self.stopping:
            await self._store.due_signal.wait(timeout)
