"""Materializer: turns schedule occurrences into tasks, durably and ahead of time (leader only).

Each round reads the store's clock once, asks the store for the schedules with an occurrence to
handle (:meth:`~duetime.store.protocols.Store.schedule_due`: work grows with the occurrences due,
not with the schedules stored), plans each one with :func:`~duetime.schedule.plan.plan_advance`
(pure: occurrences, overlap, catch-up, DST, jitter, the tick ledger; in the node's evaluation
pool, :mod:`duetime.schedule.evaluation`, off the event loop), keys their tasks under their
queues' keyed limits (:mod:`duetime.lifecycle.flow`) and applies a batch of plans
in one transaction (:meth:`~duetime.store.protocols.Store.schedule_advance`), which moves each
schedule's cursor together with its tasks and ticks. Nothing lives only in memory: a node that
dies mid-round leaves either the whole batch or none of it, and the next leader starts from the
stored cursors. Two nodes that both believe they lead (a fail-over window) cannot double an
occurrence: a plan applies only while the cursor it was made from is current, and
``(schedule_id, scheduled_for)`` is unique.

Poison rows: a schedule that cannot be read is left out by the store; one that cannot be planned,
or whose plan the store refuses (a batch that fails is split until the plan to blame is found,
see :mod:`duetime.store.isolation`), is logged and left alone for :data:`HOLD_SECONDS` or until a
user change; every other schedule goes on.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta

from duetime import metrics
from duetime.clock import Clock
from duetime.engine.leader import Leader
from duetime.engine.service import Service
from duetime.lifecycle.flow import FlowGate
from duetime.schedule.evaluation import EvaluationPool, PlanFailure, node_pool, plan_batch
from duetime.schedule.plan import PlanLimits
from duetime.store.isolation import bisect, reason
from duetime.store.protocols import MaterializerStore
from duetime.types import ScheduleAdvance, ScheduleDue, TickOutcome

log = logging.getLogger("duetime.engine")

HOLD_SECONDS = 300.0
"""A schedule that cannot be planned or applied is tried again after this long (or at once when
a user change bumps its version)."""

_MAX_HELD = 10_000

TICK_LISTENERS: list[Callable[[str, str, int], None]] = []
"""Told (tenant id, schedule id, count) of each applied plan that recorded missed ticks."""


@dataclass(frozen=True, slots=True)
class MaterializerConfig:
    """``batch``: schedules read at a time; ``max_batches``: reads per round before the loop
    yields; ``interval``: the sleep between rounds; ``rows_per_transaction``: tasks and ticks
    applied per transaction (a batch's plans are split when they add up to more); ``limits``:
    see :class:`~duetime.schedule.plan.PlanLimits`."""

    batch: int = 500
    max_batches: int = 20
    interval: float = 1.0
    rows_per_transaction: int = 10_000
    limits: PlanLimits = field(default_factory=PlanLimits)

    def __post_init__(self) -> None:
        if self.batch <= 0 or self.max_batches <= 0 or self.rows_per_transaction <= 0:
            raise ValueError("batch, max_batches and rows_per_transaction must be positive")
        if self.interval <= 0:
            raise ValueError("interval must be positive")
        if self.limits.horizon_seconds < 0 or self.limits.late_seconds < 0:
            raise ValueError("horizon_seconds and late_seconds must not be negative")


class Materializer(Service):
    """Each round handles every schedule with an occurrence due within the horizon (``batch``
    schedules per transaction), then sleeps ``interval``; without leadership it does nothing."""

    name = "materializer"

    def __init__(
        self,
        store: MaterializerStore,
        leader: Leader,
        clock: Clock,
        config: MaterializerConfig | None = None,
        evaluations: EvaluationPool | None = None,
    ) -> None:
        super().__init__(clock)
        self._store = store
        self._leader = leader
        self.config = config or MaterializerConfig()
        self._evaluations = evaluations or node_pool()
        self._broken: dict[str, tuple[int, float]] = {}
        """Schedules left alone: id → (version, monotonic time to try again)."""
        self._tenant_of: dict[str, str] = {}
        self._flows = FlowGate()
        """The queues' keyed limits, applied to occurrences' tasks (their keys only)."""

    async def run_once(self) -> int:
        """One round; returns how many tasks and ledger rows the applied plans wrote."""
        if not self._leader.is_leader:
            return 0
        cfg = self.config
        total = 0
        for _ in range(cfg.max_batches):
            now = await self._store.now()
            horizon = now + timedelta(seconds=cfg.limits.horizon_seconds)
            due = await self._store.schedule_due(now, horizon, cfg.batch)
            if not due:
                break
            self._tenant_of = {item.schedule.id: item.schedule.tenant_id for item in due}
            wanted = [item for item in due if not self._held(item)]
            # Planning searches fire times: CPU that must not stall the node's event loop.
            planned = (
                await self._evaluations.run(None, plan_batch, wanted, now, cfg.limits)
                if wanted
                else []
            )
            plans: list[ScheduleAdvance] = []
            for item, plan in zip(wanted, planned, strict=True):
                if isinstance(plan, PlanFailure):  # one broken schedule must not stop the others
                    self._hold(item.schedule.id, item.schedule.version, "plan", plan)
                else:
                    plans.append(plan)
            if not plans:
                break  # only held schedules are due: reading on would find them again
            total += await self._apply([await self._keyed(plan) for plan in plans])
            # Waiting (buffer_one) schedules come last: once they show up, every schedule with
            # something due was handled, and reading on would only see them again.
            full = len(due) == cfg.batch and not due[-1].waiting
            if not full or self.stopping or not self._leader.is_leader:
                break
            await asyncio.sleep(0)
        return total

    async def _keyed(self, plan: ScheduleAdvance) -> ScheduleAdvance:
        """``plan`` with its tasks' keys under their queues' keyed limits, as a create's
        (:func:`duetime.lifecycle.flow.keyed`, without uniqueness, debounce or throttle)."""
        if not plan.tasks:
            return plan
        tenant_id = self._tenant_of[plan.schedule_id]
        tasks = await self._flows.apply(self._store, tenant_id, plan.tasks, asks=False)
        return plan if tasks is plan.tasks else dataclasses.replace(plan, tasks=tasks)

    async def _apply(self, plans: list[ScheduleAdvance]) -> int:
        """Apply ``plans`` in transactions of about ``rows_per_transaction`` tasks and ticks (a
        catch-up can make thousands for one schedule); returns the rows written."""
        written = 0
        chunk: list[ScheduleAdvance] = []
        size = 0
        for i, plan in enumerate(plans):
            chunk.append(plan)
            size += len(plan.tasks) + len(plan.ticks)
            if size >= self.config.rows_per_transaction or i == len(plans) - 1:
                applied = await bisect(chunk, self._store.schedule_advance, self._refused)
                done = [p for p, ok in zip(chunk, applied, strict=True) if ok]
                written += sum(len(p.tasks) + len(p.ticks) for p in done)
                self._observe(done)
                chunk, size = [], 0
        return written

    def _observe(self, applied: list[ScheduleAdvance]) -> None:
        """Count the ledger rows written; tell the listeners of missed ticks."""
        for plan in applied:
            missed = 0
            for tick in plan.ticks:
                metrics.child(metrics.SCHEDULE_TICKS, tick.outcome.value).inc()
                missed += tick.outcome is TickOutcome.MISSED
            if missed:
                log.warning(
                    "schedule %s missed %d ticks (the node was down or late)",
                    plan.schedule_id,
                    missed,
                    extra={"schedule_id": plan.schedule_id, "missed": missed},
                )
                tenant_id = self._tenant_of.get(plan.schedule_id)
                if tenant_id is None:
                    continue
                for listener in list(TICK_LISTENERS):
                    try:
                        listener(tenant_id, plan.schedule_id, missed)
                    except Exception:
                        log.exception("missed-tick listener failed")

    async def _refused(self, plan: ScheduleAdvance, exc: Exception) -> bool:
        """The store refused this one plan (see :func:`~duetime.store.isolation.bisect`)."""
        self._hold(plan.schedule_id, plan.expected_version, "apply the plan of", exc)
        return False

    def _held(self, item: ScheduleDue) -> bool:
        held = self._broken.get(item.schedule.id)
        if held is None:
            return False
        version, until = held
        if version == item.schedule.version and self._clock.monotonic() < until:
            return True
        del self._broken[item.schedule.id]  # changed since, or time to try again
        return False

    def _hold(self, schedule_id: str, version: int, what: str, exc: Exception) -> None:
        """Leave a schedule that cannot be planned or applied alone until it changes or
        :data:`HOLD_SECONDS` pass, logging it once, instead of failing on it every round."""
        if len(self._broken) >= _MAX_HELD:
            self._broken.clear()
        self._broken[schedule_id] = (version, self._clock.monotonic() + HOLD_SECONDS)
        log.error(
            "materializer: %s; schedule %s (version %d) is left alone for %.0fs or until it "
            "changes",
            reason(f"could not {what} schedule", exc),
            schedule_id,
            version,
            HOLD_SECONDS,
        )

    async def wait(self, did: int) -> None:
        await self._pause(self.config.interval)
