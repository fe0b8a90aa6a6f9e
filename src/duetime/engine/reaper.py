"""Reaper: ends attempts whose lease expired as ``lease_expired`` (leader only)."""

from __future__ import annotations

import logging

from duetime import metrics
from duetime.clock import Clock
from duetime.engine.leader import Leader
from duetime.engine.service import Service
from duetime.lifecycle import finish
from duetime.observe.endings import attempts_ended
from duetime.store.isolation import complete_isolated
from duetime.store.protocols import ReaperStore
from duetime.types import AttemptOutcome, Completion

log = logging.getLogger("duetime.engine")

HOLD_SECONDS = 300.0
"""A lease whose ending could not be recorded at all is tried again after this long."""

_MAX_HELD = 10_000


class Reaper(Service):
    """Each round finds up to ``batch`` expired leases and completes them, fenced by the very lease
    that expired: if the holder completes first, the reaper's completion is refused, and vice
    versa. The task is retried with backoff, or fails when attempts are exhausted
    (:func:`duetime.lifecycle.finish.expired`). A lease whose ending cannot be recorded is
    isolated (see :mod:`duetime.store.isolation`): it never stops the round for the other
    leases."""

    name = "reaper"

    def __init__(
        self, store: ReaperStore, leader: Leader, clock: Clock, *, batch: int, interval: float
    ) -> None:
        super().__init__(clock)
        self._store = store
        self._leader = leader
        self._batch = batch
        self._interval = interval
        self._held: dict[str, float] = {}
        """Leases whose ending could not be recorded at all: lease id → monotonic retry time."""

    async def run_once(self) -> int:
        if not self._leader.is_leader:
            return 0
        self._release_held()
        expired = await self._store.task_expired_leases(self._batch + len(self._held))
        expired = [lease for lease in expired if lease.lease_id not in self._held][: self._batch]
        if not expired:
            return 0
        now = await self._store.now()
        completions = [finish.expired(lease, now) for lease in expired]
        results = await complete_isolated(self._store, completions, on_skipped=self._hold)
        reaped = sum(1 for r in results if r.accepted)
        metrics.LEASE_EXPIRATIONS.inc(reaped)
        for lease, result in zip(expired, results, strict=True):
            if result.accepted:
                outcome = AttemptOutcome.LEASE_EXPIRED.value
                metrics.child(metrics.ATTEMPTS, lease.task.queue, outcome).inc()
        attempts_ended(zip(expired, completions, results, strict=True))
        return reaped

    def _hold(self, completion: Completion) -> None:
        """Not even a failure could be recorded under this lease: leave it out of the next
        rounds for :data:`HOLD_SECONDS`, so such leases (read oldest first) never crowd out the
        others."""
        if len(self._held) >= _MAX_HELD:
            self._held.clear()
        self._held[completion.lease_id] = self._clock.monotonic() + HOLD_SECONDS

    def _release_held(self) -> None:
        now = self._clock.monotonic()
        for lease_id in [i for i, until in self._held.items() if until <= now]:
            del self._held[lease_id]

    async def wait(self, did: int) -> None:
        if did < self._batch:
            await self._pause(self._interval)
