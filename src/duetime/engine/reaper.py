"""Reaper: ends attempts whose lease expired as ``lease_expired`` (leader only)."""

from __future__ import annotations

from duetime import metrics
from duetime.clock import Clock
from duetime.engine.leader import Leader
from duetime.engine.service import Service
from duetime.retry import next_retry_delay
from duetime.store import Store
from duetime.types import AttemptOutcome, Completion


class Reaper(Service):
    """Each round finds up to ``batch`` expired leases and completes them, fenced by the very lease
    that expired: if the holder completes first, the reaper's completion is refused, and vice
    versa. The task is retried with backoff, or fails when attempts are exhausted."""

    name = "reaper"

    def __init__(
        self, store: Store, leader: Leader, clock: Clock, *, batch: int, interval: float
    ) -> None:
        super().__init__(clock)
        self._store = store
        self._leader = leader
        self._batch = batch
        self._interval = interval

    async def run_once(self) -> int:
        if not self._leader.is_leader:
            return 0
        expired = await self._store.task_expired_leases(self._batch)
        if not expired:
            return 0
        now = await self._store.now()
        completions = []
        for lease in expired:
            task = lease.task
            started = task.started_at or now
            completions.append(
                Completion(
                    task_id=task.id,
                    lease_id=lease.lease_id,
                    outcome=AttemptOutcome.LEASE_EXPIRED,
                    started_at=started,
                    duration_ms=max(0.0, (now - started).total_seconds() * 1000),
                    error=f"lease expired at {lease.lease_expires_at.isoformat()}",
                    retry_delay_seconds=next_retry_delay(task, retryable=True),
                    worker=task.worker_id,
                )
            )
        results = await self._store.task_complete_many(completions)
        reaped = sum(1 for r in results if r.accepted)
        metrics.LEASE_EXPIRATIONS.inc(reaped)
        for lease, result in zip(expired, results, strict=True):
            if result.accepted:
                outcome = AttemptOutcome.LEASE_EXPIRED.value
                metrics.child(metrics.ATTEMPTS, lease.task.queue, outcome).inc()
        return reaped

    async def wait(self, did: int) -> None:
        if did < self._batch:
            await self._pause(self._interval)
