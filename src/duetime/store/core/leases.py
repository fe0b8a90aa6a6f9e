"""Ending a lease without an attempt: the holder hands the task back (SPEC §3, §7).

A worker that stops with prefetched leases it never started, or a dispatcher holding a task for
an origin whose circuit is open, gives the task back: it waits again (``ready`` now, or
``scheduled`` until its new due time), and the attempt the claim counted is not spent. Fenced like
every lease call: only a task still ``running`` under that lease id changes. A task whose cancel
was requested is not handed back (its holder ends it, and it ends ``cancelled``).
"""

from __future__ import annotations

from collections.abc import Sequence

from duetime.ids import is_uuid, uuid_text
from duetime.store.core.plan import Decode, Plan, Row, Wake, all_
from duetime.store.core.runner import Runs
from duetime.types import Released, TaskStatus

MAX_RELEASE_DELAY_SECONDS = 30 * 24 * 3600.0


def _held(r: Row, d: type[Decode]) -> tuple[str, str]:
    return d.ident(r["lease_id"]), d.ident(r["id"])


def _released(r: Row, d: type[Decode]) -> Released:
    return Released(task_id=d.ident(r["id"]), queue=r["queue"], status=TaskStatus(r["status"]))


def task_release(
    lease_ids: Sequence[str], delay_seconds: float | Sequence[float], tenant_id: str | None
) -> Plan[dict[str, Released]]:
    """Hand back each task running under one of ``lease_ids`` (of ``tenant_id``, when given),
    due again ``delay_seconds`` from now (one delay for all, or one per lease). Returns lease id
    → what became of the task; a stale lease (ended, expired and reaped, unknown, another
    tenant's) or a task whose cancel was requested is left out and unchanged."""
    delays = (
        [float(delay_seconds)] * len(lease_ids)
        if isinstance(delay_seconds, int | float)
        else [float(d) for d in delay_seconds]
    )
    if len(delays) != len(lease_ids):
        raise ValueError("task_release needs one delay per lease id")
    wanted: dict[str, tuple[str, float]] = {}  # lease id, canonical -> as given, delay
    for lease_id, delay in zip(lease_ids, delays, strict=True):
        canonical = uuid_text(lease_id)
        if canonical is not None:
            clamped = min(max(0.0, delay), MAX_RELEASE_DELAY_SECONDS)
            wanted.setdefault(canonical, (lease_id, clamped))
    if not wanted:
        return {}
    held: list[tuple[str, str]] = yield all_(
        "task_release_find", _held, lease_ids=list(wanted), tenant_id=tenant_id
    )
    if not held:
        return {}
    ended: list[Released] = yield all_(
        "task_release",
        _released,
        ids=[task_id for _, task_id in held],
        lease_ids=[lease for lease, _ in held],
        delays=[wanted[lease][1] for lease, _ in held],
    )
    by_task = {r.task_id: r for r in ended}
    done = {wanted[lease][0]: by_task[t] for lease, t in held if t in by_task}
    if done:
        statuses = {r.status for r in done.values()}
        yield Wake(ready=TaskStatus.READY in statuses, due=TaskStatus.SCHEDULED in statuses)
    return done


def task_cancel_requested(task_ids: Sequence[str]) -> Plan[set[str]]:
    """Which of ``task_ids`` are running with a cancel requested (their holder should stop)."""
    ids = [i for i in dict.fromkeys(task_ids) if is_uuid(i)]
    if not ids:
        return set()
    found: list[str] = yield all_("task_cancel_requested", _task_id, ids=ids)
    return set(found)


def _task_id(r: Row, d: type[Decode]) -> str:
    return d.ident(r["id"])


class LeaseReleaseMethods(Runs):
    async def task_cancel_requested(self, task_ids: Sequence[str]) -> set[str]:
        return await self._run(task_cancel_requested(task_ids))

    async def task_release(
        self,
        lease_ids: Sequence[str],
        delay_seconds: float | Sequence[float] = 0.0,
        tenant_id: str | None = None,
    ) -> dict[str, Released]:
        return await self._run(task_release(lease_ids, delay_seconds, tenant_id), write=True)
