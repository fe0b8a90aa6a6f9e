"""Promoter: moves due ``scheduled``/``retrying`` tasks to ``ready``, in batches (leader only).

Poison rows: a promotion that fails for anything but a store outage is redone by id, split until
the task to blame is found (:mod:`duetime.store.isolation`); the others are promoted, and that one
is logged and left waiting for :data:`HOLD_SECONDS` — the only write promoting it could make is to
its own row, which is what the store refuses, so no failure can be recorded on it either. While
one is held, rounds promote by id (two statements instead of one) and skip it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from datetime import timedelta

from duetime import metrics
from duetime.clock import Clock, utcnow
from duetime.engine.leader import Leader
from duetime.engine.service import Service
from duetime.errors import StoreUnavailable
from duetime.observe import tracing
from duetime.store.isolation import bisect, reason
from duetime.store.protocols import PromoterStore

log = logging.getLogger("duetime.engine")

_FIRST_BATCH = 256
_MAX_HELD = 1000

HOLD_SECONDS = 300.0
"""A task the store refused to promote is tried again after this long."""


class Promoter(Service):
    """Each round promotes every due task (``batch`` at a time), then sleeps until the earliest
    ``due_at`` still waiting — capped by ``poll_interval`` and cut short by the store's
    ``due_signal`` when a task with an earlier due time arrives."""

    name = "promoter"

    def __init__(
        self,
        store: PromoterStore,
        leader: Leader,
        clock: Clock,
        *,
        batch: int,
        poll_interval: float,
    ) -> None:
        super().__init__(clock)
        self._store = store
        self._leader = leader
        self._batch = batch
        self._poll = poll_interval
        self._held: dict[str, float] = {}
        """Tasks the store refused to promote: id → monotonic time to try again."""

    async def run_once(self) -> int:
        if not self._leader.is_leader:
            return 0
        total = 0
        # A small first batch, then doubling: when a herd falls due, dispatchers get the first
        # tasks within milliseconds instead of after one big UPDATE of ``batch`` rows.
        batch = min(self._batch, _FIRST_BATCH)
        started = utcnow() if tracing.ENABLED else None
        total = await self._round(batch)
        if total and started is not None:  # a span per round that moved tasks, not per poll
            tracing.record("duetime.promote", None, started, None, {"duetime.promoted": total})
        metrics.PROMOTED.inc(total)
        return total

    async def _round(self, batch: int) -> int:
        total = 0
        while True:
            moved, full = await self._promote(batch)
            total += moved
            if not full or self.stopping:
                break
            batch = min(self._batch, batch * 2)
            await asyncio.sleep(0)  # let dispatchers start on what is ready
        return total

    async def _promote(self, limit: int) -> tuple[int, bool]:
        """Promote up to ``limit`` due tasks: (how many moved, whether more may be due)."""
        self._release_held()
        if not self._held:
            try:
                moved = await self._store.task_promote_due(limit)
                return moved, moved >= limit
            except StoreUnavailable:
                raise
            except Exception as exc:
                log.warning("promoter: %s; promoting by id", reason("a promotion failed", exc))
        found = await self._store.task_due_ids(limit + len(self._held))
        ids = [i for i in found if i not in self._held][:limit]
        counts = await bisect(ids, self._promote_ids, self._refused)
        return sum(counts), len(ids) >= limit

    async def _promote_ids(self, ids: Sequence[str]) -> list[int]:
        moved = await self._store.task_promote(ids)
        return [moved] + [0] * (len(ids) - 1)

    async def _refused(self, task_id: str, exc: Exception) -> int:
        if len(self._held) >= _MAX_HELD:
            self._held.clear()
        self._held[task_id] = self._clock.monotonic() + HOLD_SECONDS
        log.error(
            "promoter: task %s: %s; left waiting, tried again in %.0fs",
            task_id,
            reason("could not promote", exc),
            HOLD_SECONDS,
        )
        return 0

    def _release_held(self) -> None:
        now = self._clock.monotonic()
        for task_id in [i for i, until in self._held.items() if until <= now]:
            del self._held[task_id]

    async def wait(self, did: int) -> None:
        timeout = self._poll
        signal = self._store.due_signal
        wakes_by = None
        if self._leader.is_leader:
            next_due = await self._store.task_next_due_at()
            if next_due is not None:
                now = await self._store.now()
                until = (next_due - now).total_seconds()
                if until > 0 or not self._held:
                    timeout = max(0.0, min(timeout, until))
                # else: the earliest due task may be a held one; poll instead of spinning.
                wakes_by = now + timedelta(seconds=timeout)
        if timeout > 0 and not self.stopping:
            # A task created due at or after ``wakes_by`` need not wake us (nor, on
            # PostgreSQL, cost a NOTIFY): we are up by then (duetime.store.horizon).
            signal.horizon = wakes_by
            try:
                await signal.wait(timeout)
            finally:
                signal.horizon = None
