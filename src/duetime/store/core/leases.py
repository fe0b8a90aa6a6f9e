"""Ending a lease without an attempt: the holder hands the task back (SPEC §3, §7).

A worker that stops with prefetched leases it never started, or a dispatcher holding a task for
an origin whose circuit is open, gives the task back: it waits again (``ready`` now, or
``scheduled`` until its new due time), and the attempt the claim counted is not spent. Fenced like
every lease call: only a task still ``running`` under that lease id changes. A task whose cancel
was requested is not handed back (its holder ends it, and it ends ``cancelled``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from duetime.ids import is_uuid
from duetime.store.core.plan import Decode, Plan, Row, Wake, one
from duetime.store.core.runner import Runs
from duetime.types import TaskStatus

MAX_RELEASE_DELAY_SECONDS = 30 * 24 * 3600.0


@dataclass(frozen=True, slots=True)
class Released:
    """A task handed back: its id, queue and status now (``ready`` or ``scheduled``)."""

    task_id: str
    queue: str
    status: TaskStatus


def _released(r: Row, d: type[Decode]) -> Released:
    return Released(task_id=d.ident(r["id"]), queue=r["queue"], status=TaskStatus(r["status"]))


def task_release(
    lease_ids: Sequence[str], delay_seconds: float, tenant_id: str | None
) -> Plan[dict[str, Released]]:
    """Hand back each task running under one of ``lease_ids`` (of ``tenant_id``, when given),
    due again ``delay_seconds`` from now. Returns lease id → what became of the task; a stale
    lease (ended, expired and reaped, unknown, another tenant's) or a task whose cancel was
    requested is left out and unchanged."""
    delay = min(max(0.0, float(delay_seconds)), MAX_RELEASE_DELAY_SECONDS)
    done: dict[str, Released] = {}
    for lease_id in dict.fromkeys(lease_ids):
        if not is_uuid(lease_id):
            continue
        found: Released | None = yield one(
            "task_release", _released, lease_id=lease_id, delay=delay, tenant_id=tenant_id
        )
        if found is not None:
            done[lease_id] = found
    if done:
        yield Wake(ready=delay == 0, due=delay > 0)
    return done


class LeaseReleaseMethods(Runs):
    async def task_release(
        self, lease_ids: Sequence[str], delay_seconds: float = 0.0, tenant_id: str | None = None
    ) -> dict[str, Released]:
        return await self._run(task_release(lease_ids, delay_seconds, tenant_id), write=True)
