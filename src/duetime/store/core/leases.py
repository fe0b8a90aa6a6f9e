"""Ending a lease without an attempt, as :mod:`duetime.lifecycle.release` decided it: the
task's new status and delay come with each release; the store only fences (a task still
``running`` under that lease id, whose cancel was not requested) and does the clock's arithmetic.
"""

from __future__ import annotations

from collections.abc import Sequence

from duetime.ids import is_uuid, uuid_text
from duetime.store.core.plan import Decode, Plan, Row, Wake, all_
from duetime.store.core.runner import Runs
from duetime.types import Release, Released, TaskStatus


def _held(r: Row, d: type[Decode]) -> tuple[str, str]:
    return d.ident(r["lease_id"]), d.ident(r["id"])


def _released(r: Row, d: type[Decode]) -> Released:
    return Released(task_id=d.ident(r["id"]), queue=r["queue"], status=TaskStatus(r["status"]))


def task_release(releases: Sequence[Release], tenant_id: str | None) -> Plan[dict[str, Released]]:
    """Hand back each task running under one of the releases' leases (of ``tenant_id``, when
    given), in the status and after the delay each release says. Returns lease id (as given) →
    what became of the task; a stale lease (ended, expired and reaped, unknown, another
    tenant's) or a task whose cancel was requested is left out and unchanged."""
    wanted: dict[str, tuple[str, Release]] = {}  # lease id, canonical -> as given, release
    for r in releases:
        canonical = uuid_text(r.lease_id)
        if canonical is not None:
            wanted.setdefault(canonical, (r.lease_id, r))
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
        delays=[wanted[lease][1].delay_seconds for lease, _ in held],
        statuses=[wanted[lease][1].status.value for lease, _ in held],
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
        self, releases: Sequence[Release], tenant_id: str | None = None
    ) -> dict[str, Released]:
        return await self._run(task_release(releases, tenant_id), write=True)
