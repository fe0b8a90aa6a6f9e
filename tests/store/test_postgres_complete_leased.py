"""PostgreSQL's fast path for the lease API's completions (``task_complete_leased``): succeeded
attempts ended by lease id alone, fenced exactly like ``task_complete_many``, and everything it
cannot end (stale, another tenant's, a task with dependents, a repeat) left unchanged for the
general path; and both ways of ending a succeeded attempt record the same."""

from __future__ import annotations

import uuid

from duetime.clock import FakeClock
from duetime.lifecycle.finish import Ack, acked
from duetime.store.postgres.backend import PostgresStore
from duetime.store.protocols import LeaseCompleter
from duetime.store.recorded import LOGS_LIMIT_BYTES
from duetime.types import (
    Attempt,
    AttemptOutcome,
    ClaimRequest,
    NewTask,
    TargetType,
    Task,
    TaskStatus,
)

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
        assert {k: (v.task_id, v.queue, v.attempt) for k, v in ended.items()} == {
            a: (made[1].task.id, "default", 1),
            b: (made[2].task.id, "default", 1),
        }
        assert (
            ended[a].target_type == "worker"
            and ended[a].started_at == leases[made[1].task.id].task.started_at
        )
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
        assert {k: v.task_id for k, v in ended.items()} == {lease.lease_id: made.task.id}
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


async def test_the_fast_ack_records_what_the_general_ending_records(
    pg_url: str, clock: FakeClock
) -> None:
    """The one parity test of the two ways a worker's success is ended (ADR 0011): by lease id
    alone, and through the leases read and ``duetime.lifecycle.finish`` (SQLite's only way)."""
    store = PostgresStore(pg_url, clock=clock, pool_min=1, pool_max=2)
    await store.open()
    try:
        acme = (await store.tenant_create("acme")).id
        made = await store.task_create_many([NewTask(tenant_id=acme, target=WORKER)] * 2)
        leases = {lease.task.id: lease for lease in await store.task_claim(_claim(2, acme))}
        fast, general = (leases[m.task.id] for m in made)
        clock.advance(0.5)
        ended = await store.task_complete_leased(acme, [fast.lease_id], ['{"n": 1}'], ["log"])
        assert set(ended) == {fast.lease_id}
        ack = Ack(general.lease_id, ok=True, result_json='{"n": 1}', logs="log")
        (result,) = await store.task_complete_many([acked(ack, general, clock.now())])
        assert result.accepted and result.status is TaskStatus.SUCCEEDED

        def task_row(task: Task | None) -> tuple[object, ...]:
            assert task is not None
            return (
                task.status,
                task.result,
                task.attempts,
                task.finished_at,
                task.last_error,
                task.lease_id,
                task.version,
                task.updated_at,
            )

        def attempt_row(found: list[Attempt]) -> tuple[object, ...]:
            (a,) = found
            return (
                a.number,
                a.outcome,
                a.started_at,
                a.finished_at,
                a.duration_ms,
                a.worker,
                a.logs,
                a.error,
                a.http_status,
            )

        one, two = (m.task.id for m in made)
        assert task_row(await store.task_get(acme, one)) == task_row(
            await store.task_get(acme, two)
        )
        assert attempt_row(await store.attempt_list(acme, one)) == attempt_row(
            await store.attempt_list(acme, two)
        )
    finally:
        await store.close()
