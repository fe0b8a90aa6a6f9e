"""History maintenance (leader only; SPEC §8, docs/history.md). Each round:

1. retires finished tasks past their retention, in bounded batches, each batch written to the
   archive (with the ``history`` extra) before its deletion commits;
2. makes the time partitions of the current and next months (PostgreSQL), and of any month
   whose records wait in the default partition;
3. exports each month that ended more than ``hot_days`` ago to the archive (zstd Parquet),
   verifies the archived row counts against the store's, seals it with a manifest, and only then
   removes the month from the store (PostgreSQL: detach and drop the partition).

Every batch of steps 1 and 3 first waits while the hot path is busy (``busy``: the node's
dispatchers delivering in earnest, or its API creating, leasing or acking at more than a trickle,
see :meth:`duetime.engine.engine.Engine.busy`), up to ``yield_max`` seconds: the round takes
the machine's idle time, not the burst's (docs/history.md, "The round yields to the hot
path").

Idempotent if a node dies anywhere: a month without a manifest is written again (files are moved
into place whole, so a half-written file is never read); a sealed month whose removal was cut
short is just removed (:func:`duetime.history.partitions.export_needed`); every retention batch
is one transaction. Without an archive (no ``history`` extra, or PostgreSQL without
``DUETIME_ARCHIVE_URL``) step 3 is skipped and the hot store keeps every month; steps 1 and 2
still run (retention then deletes without exporting).
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import date, datetime
from typing import TYPE_CHECKING, Any

from duetime import metrics
from duetime.clock import Clock
from duetime.config import Settings
from duetime.engine.leader import Leader
from duetime.engine.service import Service
from duetime.history.partitions import (
    export_needed,
    month_label,
    months_ahead,
    months_due_for_export,
)
from duetime.history.retention import RetentionPolicy, default_policy
from duetime.store.core.history import PENDING_BATCH
from duetime.store.protocols import HistoryMaintenanceStore, PendingHistoryStore

if TYPE_CHECKING:
    from duetime.history.archive import Archive

log = logging.getLogger("duetime.engine")


class ExportMismatch(Exception):
    """The archive does not hold what the store holds for a month; the month stays hot."""


@dataclass(frozen=True, slots=True)
class HistoryConfig:
    """How the maintenance service works; :meth:`from_settings` reads ``DUETIME_*``."""

    defaults: RetentionPolicy
    batch: int = 1000
    max_batches: int = 10
    interval: float = 60.0
    backlog_pause: float = 0.5
    """Between rounds while a backlog remains: room for the hot path between batches."""
    hot_days: int = 30
    export_batch: int = 5_000
    months_per_round: int = 1
    yield_step: float = 0.1
    """While the hot path is busy, the round looks again this often before its next batch."""
    yield_max: float = 30.0
    """The longest the round waits before one batch: a node that is never idle still archives
    (a batch per ``yield_max`` at worst)."""

    @classmethod
    def from_settings(cls, settings: Settings) -> HistoryConfig:
        defaults = default_policy(
            settings.retention_succeeded, settings.retention_failed, settings.retention_cancelled
        )
        return cls(
            defaults=defaults,
            batch=settings.retention_batch,
            interval=settings.history_interval_seconds,
            hot_days=settings.hot_days,
        )


def open_archive(location: str, *, configured: bool = True) -> Archive | None:
    """The archive at ``location``, or None when the ``history`` extra is not installed. That
    is a warning when the cold tier was ``configured`` (``DUETIME_ARCHIVE_URL`` set) and only a
    debug line for SQLite's default location, which nobody asked for."""
    try:
        from duetime.history.archive import Archive
    except ImportError:
        log.log(
            logging.WARNING if configured else logging.DEBUG,
            "history: pyarrow is not installed (pip install 'duetime[history]'); months stay "
            "in the hot store",
        )
        return None
    return Archive(location)


class HistoryMaintenance(Service):
    """Leader-only: ``run_once()`` does one round (see the module docstring) and returns how
    many tasks it retired plus how many months it archived."""

    name = "history"

    def __init__(
        self,
        store: HistoryMaintenanceStore,
        leader: Leader,
        clock: Clock,
        config: HistoryConfig,
        archive: Archive | None = None,
        busy: Callable[[], bool] | None = None,
    ) -> None:
        super().__init__(clock)
        self._store = store
        self._leader = leader
        self.config = config
        self.archive = archive
        self._busy = busy
        self._backlog = False
        self.yielded = 0.0
        """Seconds this service has waited for the hot path, in all (for tests and benches)."""

    async def _yield(self) -> None:
        """Before each batch: wait while the hot path is busy (``busy``; the node passes
        :meth:`duetime.engine.engine.Engine.busy`), at most ``config.yield_max`` seconds."""
        if self._busy is None:
            return
        steps = 0
        while self._busy() and steps * self.config.yield_step < self.config.yield_max:
            if self.stopping:
                return
            await self._pause(self.config.yield_step)
            steps += 1
        self.yielded += steps * self.config.yield_step

    async def _paced(
        self, rows: AsyncIterator[list[dict[str, Any]]]
    ) -> AsyncIterator[list[dict[str, Any]]]:
        """``rows``, each batch read only once the hot path leaves room for it."""
        while True:
            await self._yield()
            try:
                batch = await anext(rows)
            except StopAsyncIteration:
                return
            yield batch

    async def run_once(self) -> int:
        self._backlog = False
        if not self._leader.is_leader:
            return 0
        # Retention first: a month that cannot be archived (and raises) must not hold it up.
        retired = await self.retention_round()
        # The hot tier's months ahead, with or without an archive (without one, history would
        # otherwise pile up in the default partition, and making the months later moves rows).
        now = await self._store.now()
        await self._store.history_partitions_ensure(months_ahead(now))
        archived = 0 if self.archive is None else await self.archive_round(now)
        return retired + archived

    async def archive_round(self, now: datetime) -> int:
        """Export, verify and remove due months. Returns months done."""
        due = months_due_for_export(await self._store.history_months(), now, self.config.hot_days)
        done = 0
        for month in due[: self.config.months_per_round]:
            await self.month_archive(month)
            done += 1
        if len(due) > self.config.months_per_round:
            self._backlog = True
        return done

    async def month_archive(self, month: date) -> None:
        """Export ``month``, verify it, seal it, remove it from the store (idempotent)."""
        archive = self.archive
        assert archive is not None
        hot = await self._store.history_month_counts(month)
        manifest = await archive.manifest(month)
        sealed = None if manifest is None else dict(manifest["tenants"])
        if export_needed(sealed, hot):
            rows = self._paced(self._store.history_month_rows(month, self.config.export_batch))
            written = await archive.month_write(month, rows)
            on_disk = await archive.month_counts(month, list(written))
            if written != hot or on_disk != hot:
                raise ExportMismatch(
                    f"history {month_label(month)}: store {hot}, written {written}, "
                    f"archived {on_disk}; the month stays in the store"
                )
            # Tenants sealed before keep their files and counts (a month is exported once in
            # practice; this keeps a second export from forgetting anyone).
            sealed = {**(sealed or {}), **hot}
            await archive.month_seal(month, sealed)
        else:
            assert sealed is not None
            on_disk = await archive.month_counts(month, list(sealed))
            if on_disk != sealed:
                raise ExportMismatch(
                    f"history {month_label(month)}: manifest {sealed}, archived {on_disk}"
                )
        await self._store.history_month_drop(month)
        log.info("history: archived %s (%d records)", month_label(month), sum(sealed.values()))

    async def retention_round(self) -> int:
        """Retire finished tasks past their retention, at most ``max_batches`` batches."""
        retired = 0
        for _ in range(self.config.max_batches):
            await self._yield()
            swept = await self._store.task_retention_sweep(
                self.config.defaults,
                self.config.batch,
                archive=None if self.archive is None else self.archive.tasks_write,
            )
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


@dataclass(frozen=True, slots=True)
class HistoryMoverConfig:
    """``interval``: seconds between rounds when nothing is deferred; ``batch``: pending rows
    (statements) moved per transaction; ``defer_max``: the longest the mover waits for a busy
    hot path, counted from the first round it waited; ``step``: how often it looks again
    meanwhile."""

    interval: float = 1.0
    batch: int = PENDING_BATCH
    defer_max: float = 5.0
    step: float = 0.1

    def __post_init__(self) -> None:
        if self.interval <= 0 or self.batch <= 0 or self.defer_max < 0 or self.step <= 0:
            raise ValueError("interval, batch and step must be positive, defer_max >= 0")


class HistoryMover(Service):
    """Leader-only: moves the audit records PostgreSQL's hot path writes behind (one
    ``history_pending`` row per statement, migration 0019,
    docs/adr/0008-history-written-behind.md) into the indexed history table, ``batch``
    statements' records a transaction, until none is left.

    While the node's hot path is busy (``busy``, :meth:`duetime.engine.engine.Engine.busy`) it
    waits, at most ``defer_max`` seconds from its first wait: a burst drains without paying for
    the history indexes as it goes, and its records follow within seconds of its end; a node that
    stays busy still has them moved every ``defer_max`` seconds. Reads of history see pending
    records all along, so the deferral changes how fast, not what, they answer. On SQLite
    nothing is ever pending and each round is one trivial statement a second."""

    name = "history-mover"

    def __init__(
        self,
        store: PendingHistoryStore,
        leader: Leader,
        clock: Clock,
        config: HistoryMoverConfig | None = None,
        busy: Callable[[], bool] | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(clock)
        self._store = store
        self._leader = leader
        self.config = config or HistoryMoverConfig()
        self._busy = busy
        self._monotonic = monotonic
        self._deferred_since: float | None = None
        self._deferring = False
        self.moved = 0
        """Records moved in all (for tests and benches)."""

    async def run_once(self) -> int:
        self._deferring = False
        if not self._leader.is_leader:
            self._deferred_since = None
            return 0
        if self._busy is not None and self._busy():
            now = self._monotonic()
            if self._deferred_since is None:
                self._deferred_since = now
            if now - self._deferred_since < self.config.defer_max:
                self._deferring = True
                return 0
        moved = await self._store.history_pending_move(self.config.batch)
        self.moved += moved
        metrics.HISTORY_MOVED.inc(moved)
        if not moved:
            self._deferred_since = None
        return moved

    async def wait(self, did: int) -> None:
        if did:
            return  # more may be pending: the next batch at once
        if self._deferring:
            metrics.HISTORY_DEFERRED.inc(self.config.step)
            await self._pause(self.config.step)
        else:
            await self._pause(self.config.interval)
