"""The ends of attempts under leases that pull workers report (acks), fenced, many at a time.

A worker's success needs nothing of its task to be recorded: on a store that can
(:class:`~duetime.store.protocols.LeaseCompleter`, PostgreSQL) successes are ended by lease id in
one statement with no read first. Everything else (fails, leases that statement left: stale,
another tenant's, a task with dependents) takes the general way: one round trip reads the leases
(the caller's tenant only, so another tenant's lease id is simply stale), one ends them all, each
ending decided by :mod:`duetime.lifecycle.finish`. The two ways record the same
(``tests/store/test_postgres_complete_leased.py``); why there are two: ADR 0011. An ack the store
cannot record is isolated (:mod:`duetime.store.isolation`): its task gets a failed attempt saying
why, the others in the call are recorded.
"""

from __future__ import annotations

import collections
import logging
from collections.abc import Sequence
from typing import Any

from duetime import metrics
from duetime.clock import utcnow
from duetime.errors import StoreUnavailable
from duetime.lifecycle.finish import Ack, acked
from duetime.observe import tracing
from duetime.observe.endings import attempts_ended, trace_succeeded
from duetime.store.isolation import complete_isolated
from duetime.store.protocols import LeaseCompleter, LeaseStore
from duetime.types import AttemptOutcome, Completion, LeasedEnd, TaskStatus, value_type

log = logging.getLogger("duetime.lifecycle")


async def end_acks(
    store: LeaseStore,
    completer: LeaseCompleter | None,
    tenant_id: str,
    items: Sequence[Ack],
) -> list[AckResult]:
    """End the attempts under the items' leases, fenced; results in input order. ``completer``
    is ``store`` when it ends successes by lease id (checked once by the caller: an isinstance
    against a runtime-checkable protocol costs ~10 µs)."""
    out: list[AckResult | None] = [None] * len(items)
    ended_by: collections.Counter[tuple[str, str]] = collections.Counter()
    rest = list(range(len(items)))
    if completer is not None:
        ok = [i for i in rest if items[i].ok]
        if ok:
            fast = await _complete_leased(completer, tenant_id, [items[i] for i in ok])
            for i in ok:
                end = fast.get(items[i].lease_id)
                if end is not None:
                    ended_by[end.queue, AttemptOutcome.SUCCEEDED.value] += 1
                    out[i] = AckResult(items[i].lease_id, end.task_id, TaskStatus.SUCCEEDED)
                    if tracing.ENABLED:
                        trace_succeeded(tenant_id, end)
            rest = [i for i in rest if out[i] is None]
            if len(rest) < len(items):
                succeeded = AttemptOutcome.SUCCEEDED.value
                metrics.child(metrics.TENANT_ATTEMPTS, tenant_id, succeeded).inc(
                    len(items) - len(rest)
                )
    if rest:
        await _ack_general(store, tenant_id, items, rest, out, ended_by)
    done = [r for r in out if r is not None]
    assert len(done) == len(items)
    for (queue, outcome), count in ended_by.items():  # one increment per label set
        metrics.child(metrics.ATTEMPTS, queue, outcome).inc(count)
    stale = sum(1 for r in done if r.task_status is None)
    if stale:
        metrics.STALE_COMPLETIONS.labels("lease_api").inc(stale)
    return done


async def _ack_general(
    store: LeaseStore,
    tenant_id: str,
    items: Sequence[Ack],
    indexes: list[int],
    out: list[AckResult | None],
    ended_by: collections.Counter[tuple[str, str]],
) -> None:
    """Read the leases of ``items[indexes]``, then end their attempts (isolated)."""
    wanted = [items[i].lease_id for i in indexes]
    leases = await store.task_leases_get(wanted, tenant_id=tenant_id)
    now = utcnow()
    completions: list[Completion] = []
    for i in indexes:
        lease = leases.get(items[i].lease_id)
        if lease is not None:
            completions.append(acked(items[i], lease, now))
    # A completion the store refuses fails its own task, never the whole call.
    results = await complete_isolated(store, completions)
    attempts_ended(
        zip([leases[c.lease_id] for c in completions], completions, results, strict=True)
    )
    ended = iter(results)
    for i in indexes:
        item = items[i]
        lease = leases.get(item.lease_id)
        result = None if lease is None else next(ended)
        if lease is None or result is None or not result.accepted:
            out[i] = AckResult(item.lease_id, None if lease is None else lease.task.id)
            continue
        task = lease.task
        ended_by[task.queue, item.outcome.value] += 1
        out[i] = AckResult(item.lease_id, task.id, result.status)


@value_type
class AckResult:
    """``task_status`` None = stale: the lease was not current and nothing changed."""

    lease_id: str
    task_id: str | None
    task_status: TaskStatus | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "lease_id": self.lease_id,
            "status": "stale" if self.task_status is None else "ok",
            "task_id": self.task_id,
            "task_status": None if self.task_status is None else self.task_status.value,
        }


async def _complete_leased(
    store: LeaseCompleter, tenant_id: str, items: Sequence[Ack]
) -> dict[str, LeasedEnd]:
    """The fast path of completions; on any error but an outage it ends nothing, and the
    general path (which isolates a completion the store refuses) takes every item."""
    logs = [i.logs for i in items] if any(i.logs is not None for i in items) else None
    try:
        return await store.task_complete_leased(
            tenant_id, [i.lease_id for i in items], [i.result_json for i in items], logs
        )
    except StoreUnavailable:
        raise
    except Exception as exc:
        log.warning("completing %d leases by id failed (%s); reading them first", len(items), exc)
        return {}
