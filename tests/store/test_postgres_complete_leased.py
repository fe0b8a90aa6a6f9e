"""PostgreSQL's fast path for the lease API's completions (``task_complete_leased``): succeeded
attempts ended by lease id alone, fenced exactly like ``task_complete_many``, and everything it
cannot end (stale, another tenant's, a task with dependents, a repeat) left unchanged for the
general path."""

from __future__ import annotations

import uuid

from duetime.clock import FakeClock
from duetime.store.postgres.backend import PostgresStore
from duetime.store.protocols import LeaseCompleter
from duetime.store.recorded import LOGS_LIMIT_BYTES
from duetime.types import AttemptOutcome, ClaimRequest, NewTask, TargetType, TaskStatus

WORKER = {"type": "worker"}


def _claim(limit: int, tenant: str) -> ClaimRequest:
    return ClaimRequest(
        worker_id="w-1",
        limit=limit,
        target_types=frozenset({TargetType.WORKER}),
        lease_seconds=60,
        queue="default",
        tenant_id=tenant,
    )


async def test_completes_by_lease_id_fenced(pg_url: str, clock: FakeClock) -> None:
    store = PostgresStore(pg_url, clock=clock, pool_min=1, pool_max=2)
    await store.open()
    try:
        assert isinstance(store, LeaseCompleter)
        acme = (await store.tenant_create("acme")).id
        other = (await store.tenant_create("other")).id
        made = await store.task_create_many([NewTask(tenant_id=acme, target=WORKER)] * 4)
        parent = made[0].task.id
        await store.task_create_many(
            [NewTask(tenant_id=acme, target=WORKER, queue="later", depends_on=(parent,))]
        )
        leases = {lease.task.id: lease for lease in await store.task_claim(_claim(10, acme))}
        assert len(leases) == 4
        a, b, c = (leases[m.task.id].lease_id for m in made[1:])
        p = leases[parent].lease_id
        clock.advance(0.25)

        # Another tenant's lease id is simply not found: nothing changes.
        assert await store.task_complete_leased(other, [a], ['"x"']) == {}
        # A parent (has dependents) and a repeated lease id are left for the general path.
        ended = await store.task_complete_leased(
            acme,
            [a, b, p, c, c, "not-a-uuid", str(uuid.uuid4())],
            ['{"n": 1}', None, "1"] + ["2"] * 4,
        )
        assert ended == {
            a: (made[1].task.id, "default"),
            b: (made[2].task.id, "default"),
        }
        done = await store.task_get(acme, made[1].task.id)
        assert done is not None and done.status is TaskStatus.SUCCEEDED
        assert done.result == {"n": 1} and done.finished_at == clock.now()
        (attempt,) = await store.attempt_list(acme, made[1].task.id)
        assert attempt.outcome is AttemptOutcome.SUCCEEDED and attempt.number == 1
        assert attempt.worker == "w-1" and attempt.duration_ms == 250.0
        for task_id in (parent, made[3].task.id):
            still = await store.task_get(acme, task_id)
            assert still is not None and still.status is TaskStatus.RUNNING
            assert await store.attempt_list(acme, task_id) == []

        # A used lease is stale: a second ack ends nothing and changes nothing.
        before = await store.task_get(acme, made[1].task.id)
        assert await store.task_complete_leased(acme, [a], ['"again"']) == {}
        assert await store.task_get(acme, made[1].task.id) == before
        assert len(await store.attempt_list(acme, made[1].task.id)) == 1
    finally:
        await store.close()


async def test_text_that_is_not_json_is_recorded_as_a_string(pg_url: str, clock: FakeClock) -> None:
    store = PostgresStore(pg_url, clock=clock, pool_min=1, pool_max=2)
    await store.open()
    try:
        acme = (await store.tenant_create("acme")).id
        (made,) = await store.task_create_many([NewTask(tenant_id=acme, target=WORKER)])
        (lease,) = await store.task_claim(_claim(1, acme))
        ended = await store.task_complete_leased(acme, [lease.lease_id], ["not json"])
        assert ended == {lease.lease_id: (made.task.id, "default")}
        done = await store.task_get(acme, made.task.id)
        assert done is not None and done.result == "not json"
    finally:
        await store.close()


async def test_logs_ride_the_fast_path_cleaned_and_cut(pg_url: str, clock: FakeClock) -> None:
    store = PostgresStore(pg_url, clock=clock, pool_min=1, pool_max=2)
    await store.open()
    try:
        acme = (await store.tenant_create("acme")).id
        made = await store.task_create_many([NewTask(tenant_id=acme, target=WORKER)] * 3)
        leases = {
            lease.task.id: lease.lease_id for lease in await store.task_claim(_claim(3, acme))
        }
        ids = [m.task.id for m in made]
        long = "x" * (LOGS_LIMIT_BYTES + 100)
        ended = await store.task_complete_leased(
            acme, [leases[i] for i in ids], ["1", "2", "3"], ["a\x00b\nc", None, long]
        )
        assert set(ended) == set(leases.values())
        logs = [(await store.attempt_list(acme, i))[0].logs for i in ids]
        assert logs == ["a\ufffdb\nc", None, "x" * LOGS_LIMIT_BYTES]
    finally:
        await store.close()
