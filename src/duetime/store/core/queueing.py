"""Queue settings, pull workers and the maintained task counts (:mod:`duetime.store.counters`):
the rules, once for both backends.

Counts are read from the counters, never by counting tasks. Where the backends keep them
differently only the SQL differs: PostgreSQL's triggers append deltas that a fold moves into the
totals (``counts_fold``), SQLite's write the totals directly (its fold folds nothing). A recount
compares one queue's real count with its counters in ONE statement, so both come from one
snapshot and their difference is exactly the drift; the correction commutes with whatever
commits meanwhile.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from duetime.flow.rules import flow_document
from duetime.store.core import rows
from duetime.store.core.plan import Json, Plan, Stmt, Wake, all_, execute, one, value
from duetime.store.core.runner import Runs
from duetime.store.counters import CountKey, Reconciled
from duetime.types import Queue, QueueSettings, QueueStats, StatusCount, TaskStatus, WorkerInfo

WORKER_RETENTION_SECONDS = 7 * 86400.0
"""Workers not seen for this long are forgotten (when a new worker of the tenant shows up)."""

MAX_WORKER_QUEUES = 64
"""The most queue names kept per worker (the SQL keeps the first 64 in order too)."""


def _only(statement: Stmt) -> Plan[Any]:
    """A plan of one statement: its result."""
    return (yield statement)


def queue_put(tenant_id: str, name: str, settings: QueueSettings) -> Plan[Queue]:
    """Replace the queue's settings; a new keyed rate or burst starts every key's bucket
    full (as a new queue rate does the queue's)."""
    old: Queue | None = yield one("queue_get", rows.queue, tenant_id=tenant_id, name=name)
    flow = settings.flow
    queue: Queue = yield one(
        "queue_put",
        rows.queue,
        tenant_id=tenant_id,
        name=name,
        rate_limit_per_second=settings.rate_limit_per_second,
        burst=settings.burst,
        max_concurrency=settings.max_concurrency,
        max_concurrency_per_key=settings.max_concurrency_per_key,
        paused=settings.paused,
        flow=Json(flow_document(flow, settings.max_concurrency_per_key)) if flow else None,
        key_rate=flow.key_rate,
        key_burst=flow.key_burst,
    )
    was = None if old is None else (old.settings.flow.key_rate, old.settings.flow.key_burst)
    if was is not None and was != (flow.key_rate, flow.key_burst):
        yield execute("flow_buckets_reset", tenant_id=tenant_id, queue=name)
    yield Wake(ready=True)  # resuming or raising a limit may let waiting tasks run
    return queue


def worker_seen(tenant_id: str, worker_id: str, queues: Sequence[str]) -> Plan[None]:
    names = sorted(set(queues))[:MAX_WORKER_QUEUES]
    if (yield value("worker_seen", tenant_id=tenant_id, worker_id=worker_id, queues=names)):
        # A new worker: forget the tenant's long-gone ones.
        yield execute(
            "worker_prune", tenant_id=tenant_id, retention_seconds=WORKER_RETENTION_SECONDS
        )


def queue_stats(tenant_id: str, name: str | None) -> Plan[list[QueueStats]]:
    """Counts above zero by queue, each with its oldest ready task's lag (one statement: rows
    of ``(queue, status, n, NULL)`` and ``(queue, NULL, NULL, lag)``)."""
    found = yield all_("queue_stats", rows.queue_figure, tenant_id=tenant_id, queue=name)
    counts: dict[str, dict[TaskStatus, int]] = {}
    lags: dict[str, float] = {}
    for queue, status, n, lag in found:
        if status is None:
            lags[queue] = max(0.0, lag)
        else:
            counts.setdefault(queue, {})[status] = n
    return [
        QueueStats(tenant_id, queue, counts=by_status, oldest_due_lag_seconds=lags.get(queue))
        for queue, by_status in sorted(counts.items())
    ]


def task_counts_fold(limit: int) -> Plan[int]:
    folded = yield value("counts_fold", limit=limit)
    yield execute("counts_drop_zeros")
    return int(folded)


def count_key_after(after: CountKey | None) -> Plan[CountKey | None]:
    """The (tenant, queue) after ``after`` in key order, among counted and configured queues."""
    key: CountKey | None = yield one(
        "counts_next_key",
        rows.count_key,
        tenant_id=None if after is None else after.tenant_id,
        queue=None if after is None else after.queue,
    )
    return key


def recount(key: CountKey, max_rows: int) -> Plan[Reconciled]:
    """Correct ``key``'s counters by the drift, unless it holds more than ``max_rows`` tasks."""
    yield execute("counts_recount_budget")
    found = yield all_(
        "counts_recount", rows.recount, tenant_id=key.tenant_id, queue=key.queue, max_rows=max_rows
    )
    if sum(real for _, real, _ in found) > max_rows:
        return Reconciled(key, 0, skipped=True)
    fix = {status: real - counted for status, real, counted in found if real != counted}
    if fix:
        yield execute("counts_correct", tenant_id=key.tenant_id, queue=key.queue, deltas=fix)
    return Reconciled(key, sum(abs(d) for d in fix.values()))


class QueueingMethods(Runs):
    """Queue, worker and count methods of :class:`~duetime.store.protocols.Store`, for both
    backends."""

    _over_budget: tuple[type[BaseException], ...] = ()
    """What a recount over its time budget raises (PostgreSQL's cancelled statement)."""

    async def queue_put(self, tenant_id: str, name: str, settings: QueueSettings) -> Queue:
        queue = await self._run(queue_put(tenant_id, name, settings), write=True)
        self._limits_changed()
        return queue

    async def queue_get(self, tenant_id: str, name: str) -> Queue | None:
        found: Queue | None = await self._run(
            _only(one("queue_get", rows.queue, tenant_id=tenant_id, name=name))
        )
        return found

    async def queue_list(self, tenant_id: str) -> list[Queue]:
        found: list[Queue] = await self._run(
            _only(all_("queue_list", rows.queue, tenant_id=tenant_id))
        )
        return found

    async def queue_stats(self, tenant_id: str, name: str | None = None) -> list[QueueStats]:
        return await self._run(queue_stats(tenant_id, name))

    async def worker_seen(self, tenant_id: str, worker_id: str, queues: Sequence[str]) -> None:
        await self._run(worker_seen(tenant_id, worker_id, queues), write=True)

    async def worker_list(self, tenant_id: str, live_within_seconds: float) -> list[WorkerInfo]:
        found: list[WorkerInfo] = await self._run(
            _only(
                all_(
                    "worker_list",
                    rows.worker,
                    tenant_id=tenant_id,
                    live_within_seconds=float(live_within_seconds),
                )
            )
        )
        return found

    async def task_count_by_status(self) -> list[StatusCount]:
        found: list[StatusCount] = await self._run(_only(all_("counts_all", rows.status_count)))
        return found

    async def task_counts_fold(self, limit: int) -> int:
        return await self._run(task_counts_fold(limit), write=True)

    async def task_counts_reconcile(
        self, after: CountKey | None, max_rows: int
    ) -> Reconciled | None:
        key = await self._run(count_key_after(after))
        if key is None:
            return None
        try:
            return await self._run(recount(key, max_rows), write=True)
        except self._over_budget:
            return Reconciled(key, 0, skipped=True)
