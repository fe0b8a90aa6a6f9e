"""History maintenance (leader only): retires finished tasks past their retention, in bounded
batches that leave the hot path alone (SPEC §8, docs/history.md).

Each round sweeps at most ``max_batches`` batches of ``batch`` tasks; a round that found a full
batch comes back soon (there is a backlog), one that found less waits ``interval``. A node that
dies halfway loses nothing: every batch is one transaction, and the next leader's next round
simply continues.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from duetime.clock import Clock
from duetime.config import Settings
from duetime.engine.leader import Leader
from duetime.engine.service import Service
from duetime.history.retention import RetentionPolicy, default_policy
from duetime.store import Store

log = logging.getLogger("duetime.engine")


@dataclass(frozen=True, slots=True)
class HistoryConfig:
    """How the maintenance service works; :meth:`from_settings` reads ``DUETIME_*``."""

    defaults: RetentionPolicy
    batch: int = 1000
    max_batches: int = 10
    interval: float = 60.0
    backlog_pause: float = 0.5
    """Between rounds while a backlog remains: room for the hot path between batches."""

    @classmethod
    def from_settings(cls, settings: Settings) -> HistoryConfig:
        defaults = default_policy(
            settings.retention_succeeded, settings.retention_failed, settings.retention_cancelled
        )
        return cls(
            defaults=defaults,
            batch=settings.retention_batch,
            interval=settings.history_interval_seconds,
        )


class HistoryMaintenance(Service):
    """Leader-only: ``run_once()`` sweeps retention in bounded batches; returns tasks retired."""

    name = "history"

    def __init__(self, store: Store, leader: Leader, clock: Clock, config: HistoryConfig) -> None:
        super().__init__(clock)
        self._store = store
        self._leader = leader
        self.config = config
        self._backlog = False

    async def run_once(self) -> int:
        self._backlog = False
        if not self._leader.is_leader:
            return 0
        retired = 0
        for _ in range(self.config.max_batches):
            swept = await self._store.task_retention_sweep(self.config.defaults, self.config.batch)
            retired += swept
            if swept < self.config.batch:
                break
        else:
            self._backlog = True
        if retired:
            log.info("history: retired %d finished tasks past their retention", retired)
        return retired

    async def wait(self, did: int) -> None:
        await self._pause(self.config.backlog_pause if self._backlog else self.config.interval)
