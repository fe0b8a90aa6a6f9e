"""Reaper: ends attempts whose lease expired as ``lease_expired`` (leader only)."""

from __future__ import annotations

import logging
from datetime import datetime

from duetime import metrics
from duetime.clock import Clock
from duetime.engine.leader import Leader
from duetime.engine.service import Service
from duetime.observe.endings import attempts_ended
from duetime.retry import next_retry_delay
from duetime.store.isolation import complete_isolated, reason
from duetime.store.protocols import ReaperStore
from duetime.types import AttemptOutcome, Completion, Lease

log = logging.getLogger("duetime.engine")

HOLD_SECONDS = 300.0
"""A lease whose ending could not be recorded at all is tried again after this long."""

_MAX_HELD = 10_000


class Reaper(Service):
    """Each round finds up to ``batch`` expired leases and completes them, fenced by the very lease
    that expired: if the holder completes first, the reaper's completion is refused, and vice
    versa. The task is retried with backoff, or fails when attempts are exhausted. A lease whose
    ending cannot be worked out or recorded is isolated (see :mod:`duetime.store.isolation`): it
    never stops the round for the other leases."""

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
        completions = [_ending(lease, now) for lease in expired]
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


def _ending(lease: Lease, now: datetime) -> Completion:
    """The ``lease_expired`` completion of an expired lease. A task whose retry cannot be worked
    out (whatever its stored policy holds) fails with the reason instead of stopping the round
    for every tenant."""
    task = lease.task
    started = task.started_at or now
    error = f"lease expired at {lease.lease_expires_at.isoformat()}"
    try:
        delay = next_retry_delay(task, retryable=True)
    except Exception as exc:
        delay = None
        error = f"{error}; {reason('could not compute the retry', exc)}"
        log.error("task %s: %s", task.id, error)
    return Completion(
        task_id=task.id,
        lease_id=lease.lease_id,
        outcome=AttemptOutcome.LEASE_EXPIRED,
        started_at=started,
        duration_ms=max(0.0, (now - started).total_seconds() * 1000),
        error=error,
        retry_delay_seconds=delay,
        worker=task.worker_id,
    )
