"""Counter keeper: folds pending task-count deltas into the totals and reconciles one queue's
counts against the task table now and then (leader only; see :mod:`duetime.store.counters`)."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from duetime import metrics
from duetime.clock import Clock
from duetime.engine.leader import Leader
from duetime.engine.service import Service
from duetime.store.counters import FOLD_BATCH, RECONCILE_MAX_ROWS, CountKey
from duetime.store.protocols import CounterStore

log = logging.getLogger("duetime.engine")


@dataclass(frozen=True, slots=True)
class CounterKeeperConfig:
    """``interval``: seconds between fold rounds; ``reconcile_every``: rounds between two
    reconciles (each recounts one queue of at most ``reconcile_max_rows`` tasks)."""

    interval: float = 1.0
    fold_batch: int = FOLD_BATCH
    reconcile_every: int = 60
    reconcile_max_rows: int = RECONCILE_MAX_ROWS

    def __post_init__(self) -> None:
        if self.interval <= 0 or self.fold_batch <= 0 or self.reconcile_every <= 0:
            raise ValueError("interval, fold_batch and reconcile_every must be positive")


class CounterKeeper(Service):
    """Each round folds up to ``fold_batch`` deltas; every ``reconcile_every`` rounds it
    recounts the next queue in key order (wrapping around), so every queue is recounted in turn
    at a bounded cost per round. Corrections are counted in
    ``duetime_task_count_corrections_total``: a non-zero rate means something changes tasks
    behind the triggers."""

    name = "counters"

    def __init__(
        self, store: CounterStore, leader: Leader, clock: Clock, config: CounterKeeperConfig
    ) -> None:
        super().__init__(clock)
        self._store = store
        self._leader = leader
        self._config = config
        self._rounds = 0
        self._cursor: CountKey | None = None

    async def run_once(self) -> int:
        if not self._leader.is_leader:
            return 0
        folded = await self._store.task_counts_fold(self._config.fold_batch)
        self._rounds += 1
        if self._rounds % self._config.reconcile_every == 0:
            await self.reconcile_once()
        return folded

    async def reconcile_once(self) -> int:
        """Recount the next queue; returns the size of the correction written."""
        done = await self._store.task_counts_reconcile(
            self._cursor, self._config.reconcile_max_rows
        )
        if done is None and self._cursor is not None:  # past the last queue: start again
            self._cursor = None
            done = await self._store.task_counts_reconcile(None, self._config.reconcile_max_rows)
        if done is None:
            return 0
        self._cursor = done.key
        if done.skipped:
            log.debug(
                "counters: queue %s (tenant %s) too large to recount",
                done.key.queue,
                done.key.tenant_id,
            )
        elif done.corrected:
            metrics.COUNT_CORRECTIONS.inc(done.corrected)
            log.warning(
                "counters: corrected the counts of queue %s (tenant %s) by %d",
                done.key.queue,
                done.key.tenant_id,
                done.corrected,
            )
        return done.corrected

    async def wait(self, did: int) -> None:
        if did < self._config.fold_batch:
            await self._pause(self._config.interval)
