"""The engine: every background service of one node, started and stopped together.

::

    Leader ──(is_leader)──▶ Promoter   scheduled/retrying ──▶ ready      (leader only)
                      ├──▶ Reaper     expired leases ──▶ retrying/failed (leader only)
                      ├──▶ Materializer  schedule occurrences ──▶ tasks   (leader only)
                      ├──▶ CounterKeeper  task-count deltas ──▶ totals    (leader only)
                      ├──▶ HistoryMover  pending audit records ──▶ history (leader only)
                      ├──▶ IdentityUpkeep  held payloads, signing keys   (leader only)
                      ├──▶ FlowSweeper  spent flow ledger rows, full buckets ──▶ gone (leader only)
                      └──▶ History    finished tasks past retention ──▶ gone (leader only)
    Dispatcher  ready push tasks ──▶ Deliverers ──▶ Completer ──▶ store (every node)
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping

from duetime.clock import Clock, SystemClock
from duetime.config import Settings
from duetime.delivery.base import Deliverer
from duetime.delivery.outbound import OutboundIdentity
from duetime.engine.counters import CounterKeeper, CounterKeeperConfig
from duetime.engine.dispatcher import Dispatcher
from duetime.engine.flow import FlowSweeper
from duetime.engine.history import (
    HistoryConfig,
    HistoryMaintenance,
    HistoryMover,
    HistoryMoverConfig,
    open_archive,
)
from duetime.engine.identity_upkeep import IdentityUpkeep
from duetime.engine.leader import Leader
from duetime.engine.materializer import Materializer, MaterializerConfig
from duetime.engine.notifier import Notifier
from duetime.engine.promoter import Promoter
from duetime.engine.reaper import Reaper
from duetime.engine.service import Service
from duetime.schedule.plan import PlanLimits
from duetime.store import Store
from duetime.types import TargetType

log = logging.getLogger("duetime.engine")


class Engine:
    """Runs the leader, promoter, reaper and dispatcher of one node against a store."""

    def __init__(
        self,
        store: Store,
        settings: Settings,
        deliverers: Mapping[TargetType, Deliverer],
        *,
        clock: Clock | None = None,
    ) -> None:
        self.store = store
        self.settings = settings
        self.clock = clock or SystemClock()
        self.deliverers = dict(deliverers)
        self.leader = Leader(store, settings.node_id, settings.leader_ttl_seconds, self.clock)
        self.promoter = Promoter(
            store,
            self.leader,
            self.clock,
            batch=settings.promote_batch,
            poll_interval=settings.poll_interval_seconds,
        )
        self.reaper = Reaper(
            store, self.leader, self.clock, batch=1000, interval=settings.poll_interval_seconds
        )
        # Schedules: occurrences become tasks ahead of time (see engine/materializer.py).
        self.materializer = Materializer(
            store,
            self.leader,
            self.clock,
            MaterializerConfig(
                interval=min(1.0, settings.poll_interval_seconds),
                # Not a whole number of minutes: the next occurrences of every-minute (and
                # hourly) herds are made half-way between firings, not at the very instant the
                # herd fires and the node is busy delivering it.
                limits=PlanLimits(horizon_seconds=90.0),
            ),
        )
        self.dispatcher = Dispatcher.from_settings(store, self.deliverers, self.clock, settings)
        # Retention (and, with the cold tier, archiving) of history (engine/history.py): its
        # batches wait while the node is busy (:meth:`busy`).
        self.history = HistoryMaintenance(
            store,
            self.leader,
            self.clock,
            HistoryConfig.from_settings(settings),
            # Several PostgreSQL nodes must share the archive: no node-local default there.
            open_archive(settings.archive_location, configured=bool(settings.archive_url))
            if settings.archive_url or settings.is_sqlite
            else None,
            busy=self.busy,
        )
        # PostgreSQL's audit trail is written behind (ADR 0008): moved into the history table
        # when the node's hot path leaves room, within seconds.
        self.history_mover = HistoryMover(
            store,
            self.leader,
            self.clock,
            HistoryMoverConfig(interval=min(1.0, settings.poll_interval_seconds)),
            busy=self.busy,
        )
        self.counters = CounterKeeper(
            store,
            self.leader,
            self.clock,
            CounterKeeperConfig(interval=settings.poll_interval_seconds),
        )
        # Keyed flow control's ledger and buckets, swept; unkeyed tasks of keyed queues keyed.
        self.flow = FlowSweeper(store, self.leader, self.clock)
        # Notifications: the store's harm events go to the tenants that asked (notify/); the
        # leader sends them, whichever node recorded them.
        self.notifier = Notifier(
            store,
            self.leader,
            self.clock,
            window=settings.notify_window_seconds,
            interval=min(1.0, settings.poll_interval_seconds),
        )
        self.identity = IdentityUpkeep(
            store,
            self.leader,
            self.clock,
            OutboundIdentity.from_settings(store, settings, self.clock).keys,
        )
        self._tasks: list[asyncio.Task[None]] = []
        self.busy_elsewhere: list[Callable[[], bool]] = []
        """More signs of a busy node (its dispatcher processes', added by the node)."""
        self.more: list[Service] = []
        """Services of the layers above, run and stopped with these (the node adds the API's
        intake of workflows requested through SQL)."""

    def busy(self) -> bool:
        """Whether this node's hot path is busy (its dispatcher, or one of
        :attr:`busy_elsewhere`: its dispatcher processes, its API's pulse): the history round
        waits before each batch while it is."""
        return self.dispatcher.busy() or any(sign() for sign in self.busy_elsewhere)

    @property
    def services(self) -> tuple[Service, ...]:
        return (
            self.leader,
            self.promoter,
            self.reaper,
            self.materializer,
            self.history,
            self.history_mover,
            self.dispatcher,
            self.counters,
            self.flow,
            self.notifier,
            self.identity,
            *self.more,
        )

    async def start(self) -> None:
        await self.dispatcher.start()
        for service in self.services:
            self._tasks.append(asyncio.create_task(service.run(), name=f"duetime-{service.name}"))
        log.info("engine started on node %s", self.settings.node_id)

    async def stop(self, grace: float = 10.0) -> None:
        """Stop every service; in-flight deliveries get ``grace`` seconds to finish."""
        for service in self.services:
            service.stop()
        await self.dispatcher.drain(grace)
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        try:
            await self.leader.resign()
        except Exception as exc:  # the lease simply expires if the store is gone
            log.warning("could not resign leadership: %s", exc)
        for deliverer in self.deliverers.values():
            await deliverer.close()
        log.info("engine stopped on node %s", self.settings.node_id)
