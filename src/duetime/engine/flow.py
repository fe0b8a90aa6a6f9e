"""Flow sweeper: removes what keyed flow control leaves behind — uniqueness windows, debounces
and throttles whose time has passed, per-key buckets full again — and keys the ready tasks of
queues with a keyed rate limit that came without a flow key (leader only; see
:func:`duetime.store.core.flow.flow_sweep`)."""

from __future__ import annotations

from duetime.clock import Clock
from duetime.engine.leader import Leader
from duetime.engine.service import Service
from duetime.store.protocols import FlowSweepStore

SWEEP_BATCH = 1000
SWEEP_SECONDS = 5.0
"""Between two rounds that found little to do: a ready task without a flow key waits at most
about this long before a keyed claim sees it (where a claim finds none at all, it keys them
itself)."""


class FlowSweeper(Service):
    """Each round sweeps up to ``batch`` rows of each kind; a full round goes again at once."""

    name = "flow"

    def __init__(
        self,
        store: FlowSweepStore,
        leader: Leader,
        clock: Clock,
        *,
        interval: float = SWEEP_SECONDS,
        batch: int = SWEEP_BATCH,
    ) -> None:
        super().__init__(clock)
        if interval <= 0 or batch <= 0:
            raise ValueError("interval and batch must be positive")
        self._store = store
        self._leader = leader
        self._interval = interval
        self._batch = batch

    async def run_once(self) -> int:
        if not self._leader.is_leader:
            return 0
        return await self._store.flow_sweep(self._batch)

    async def wait(self, did: int) -> None:
        if did < self._batch:
            await self._pause(self._interval)
