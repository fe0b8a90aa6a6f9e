"""A new task's starting status is one rule (:func:`duetime.store.core.hot.starting_status`).

PostgreSQL's ``task_insert`` keeps the clock's part of it in SQL (the database clock decides
"ready or scheduled", see docs/adr/0005-store-core.md): this pins that both backends start every
combination of parents and ``run_at`` exactly as the rule says.
"""

from __future__ import annotations

from datetime import timedelta

from duetime.clock import FakeClock
from duetime.states import after_attempt
from duetime.store.core.hot import DEPENDENCY_FAILED, starting_status
from duetime.store.protocols import Store
from duetime.testing.conformance import new_task
from duetime.types import AttemptOutcome, ClaimRequest, Completion, TargetType, Task, TaskStatus

PARENT_SETS = [
    (),
    ("succeeded",),
    ("ready",),
    ("failed",),
    ("cancelled",),
    ("succeeded", "ready"),
    ("ready", "failed"),
    ("succeeded", "cancelled"),
    ("succeeded", "succeeded"),
]


async def _parent(store: Store, tenant: str, status: str) -> Task:
    (made,) = await store.task_create_many([new_task(tenant)])
    task = made.task
    if status == "cancelled":
        return await store.task_cancel(tenant, task.id)
    if status in ("succeeded", "failed"):
        claim = ClaimRequest("w", 1, frozenset({TargetType.WORKER}), 30.0, names=[task.name or ""])
        (lease,) = await store.task_claim(claim)
        ok = status == "succeeded"
        outcome = AttemptOutcome.SUCCEEDED if ok else AttemptOutcome.FAILED
        done = Completion(
            task.id,
            lease.lease_id,
            outcome,
            lease.task.started_at or task.run_at,
            1,
            status=after_attempt(outcome is AttemptOutcome.SUCCEEDED, None),
        )
        (result,) = await store.task_complete_many([done])
        assert result.status == TaskStatus(status)
    return task


async def test_every_backend_starts_tasks_by_the_one_rule(store: Store, clock: FakeClock) -> None:
    tenant = (await store.tenant_create("acme")).id
    now = await store.now()
    for parent_statuses in PARENT_SETS:
        parents = [await _parent(store, tenant, status) for status in parent_statuses]
        for run_at in (None, now - timedelta(seconds=5), now, now + timedelta(hours=1)):
            asked = new_task(tenant, depends_on=tuple(p.id for p in parents), run_at=run_at)
            (made,) = await store.task_create_many([asked])
            expected, _ = starting_status(parent_statuses, run_at, now)
            stored = await store.task_get(tenant, made.task.id)
            case = f"parents {parent_statuses}, run_at {run_at}"
            assert made.task.status is expected, case
            assert stored == made.task, case
            failed = expected is TaskStatus.FAILED
            assert made.task.last_error == (DEPENDENCY_FAILED if failed else None), case
            assert made.task.finished_at == (now if failed else None), case
