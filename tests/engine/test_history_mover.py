"""The audit trail written behind (PostgreSQL migration 0019, ADR 0008) and the leader's history
mover: every record is readable from the moment its change commits, the same before and after
the move, exactly once while moves run; the mover waits for a busy hot path at most
``defer_max`` seconds; SQLite writes history directly and never has anything to move."""

from __future__ import annotations

import asyncio

from duetime.cli.doctor import store_checks
from duetime.clock import FakeClock
from duetime.engine.history import HistoryMover, HistoryMoverConfig
from duetime.engine.leader import Leader
from duetime.history.events import HistoryEvent, HistoryFilter
from duetime.store import Store
from duetime.store.postgres.backend import PostgresStore
from duetime.store.postgres.schema import connect as pg_connect
from duetime.types import AttemptOutcome, ClaimRequest, Completion, NewTask, TargetType, TaskStatus


async def run_tasks(store: Store, clock: FakeClock, tenant: str, n: int) -> None:
    """``n`` worker tasks created, claimed and completed (half failed): four records each
    (created, claimed, ended, the attempt)."""
    await store.task_create_many(
        [NewTask(tenant_id=tenant, target={"type": "worker"}, name="job") for _ in range(n)]
    )
    leases = await store.task_claim(
        ClaimRequest(
            worker_id="w", limit=n, tenant_id=tenant, target_types=frozenset({TargetType.WORKER})
        )
    )
    await store.task_complete_many(
        [
            Completion(
                task_id=lease.task.id, lease_id=lease.lease_id,
                outcome=AttemptOutcome.SUCCEEDED if i % 2 else AttemptOutcome.FAILED,
                started_at=clock.now(), duration_ms=1.0, error=None if i % 2 else "boom",
                retry_delay_seconds=None, worker="w",
                status=TaskStatus.SUCCEEDED if i % 2 else TaskStatus.FAILED,
            )
            for i, lease in enumerate(leases)
        ]
    )  # fmt: skip


async def records(store: Store, tenant: str) -> list[HistoryEvent]:
    return await store.history_query(HistoryFilter(tenant_id=tenant, limit=1000))


def leader_of(store: Store, clock: FakeClock) -> Leader:
    leader = Leader(store, "node-a", ttl_seconds=10, clock=clock)
    leader.is_leader = True
    return leader


async def test_records_read_the_same_before_and_after_the_move(
    store: Store, clock: FakeClock
) -> None:
    tenant = (await store.tenant_create("a")).id
    await run_tasks(store, clock, tenant, 6)
    # A row per statement (the create, the claim, the completions, their attempts) on PostgreSQL.
    assert await store.history_pending_rows() == (4 if isinstance(store, PostgresStore) else 0)
    before = await records(store, tenant)
    assert len(before) == 6 * 4
    assert {e.kind for e in before} == {"task", "attempt"}
    mover = HistoryMover(store, leader_of(store, clock), clock, HistoryMoverConfig(batch=1))
    while await mover.run_once():
        pass
    # PostgreSQL had every record pending (a row per statement: the create, the claim, the
    # completions, their attempts); SQLite writes history directly.
    assert mover.moved == (len(before) if isinstance(store, PostgresStore) else 0)
    assert await store.history_pending_rows() == 0
    assert await records(store, tenant) == before
    assert await store.history_attempts(tenant, before[0].task_id or "") != []
    assert await store.history_pending_move(100) == 0


class PendingStore:
    """Counts the mover's calls; ``left`` records wait, moved ``per_call`` at a time."""

    def __init__(self, left: int, per_call: int) -> None:
        self.left, self.per_call, self.calls = left, per_call, 0

    async def history_pending_move(self, limit: int) -> int:
        self.calls += 1
        moved = min(self.left, self.per_call)
        self.left -= moved
        return moved


async def test_the_mover_waits_for_a_busy_hot_path_at_most_defer_max(clock: FakeClock) -> None:
    store = PendingStore(left=25, per_call=10)
    leader = Leader(store, "node-a", ttl_seconds=10, clock=clock)  # type: ignore[arg-type]
    now = {"t": 100.0}
    hot = {"busy": True}
    mover = HistoryMover(
        store,  # type: ignore[arg-type]
        leader,
        clock,
        HistoryMoverConfig(defer_max=5.0),
        busy=lambda: hot["busy"],
        monotonic=lambda: now["t"],
    )
    assert await mover.run_once() == 0 and store.calls == 0  # not the leader: nothing
    leader.is_leader = True
    assert await mover.run_once() == 0 and store.calls == 0  # busy: it waits
    now["t"] += 4.9
    assert await mover.run_once() == 0 and store.calls == 0
    now["t"] += 0.2  # 5.1 s since it first waited: it moves, busy or not, until none is left
    assert [await mover.run_once() for _ in range(4)] == [10, 10, 5, 0]
    assert store.calls == 4 and mover.moved == 25
    store.left = 7  # the next burst: a new wait of up to defer_max
    assert await mover.run_once() == 0 and store.calls == 4
    hot["busy"] = False  # the hot path left room: at once
    assert await mover.run_once() == 7


async def test_reads_see_each_record_once_while_moves_run(pg_url: str) -> None:
    """Moves in one transaction each, concurrent with reads: every read counts every record
    exactly once (in one snapshot a record is pending or moved, never both or neither)."""
    clock = FakeClock()
    store = PostgresStore(pg_url, clock=clock)
    await store.open()
    try:
        tenant = (await store.tenant_create("a")).id
        for _ in range(10):
            await run_tasks(store, clock, tenant, 20)
        total = len(await records(store, tenant))
        assert total == 10 * 20 * 4  # under the page of 1,000: a duplicate would show
        conn = await pg_connect(pg_url)
        try:
            assert await conn.fetchval("SELECT count(*) FROM history") == 0
            counts: list[int] = []

            async def read() -> None:
                while True:
                    counts.append(len(await records(store, tenant)))
                    await asyncio.sleep(0)

            reader = asyncio.create_task(read())
            moves = 0
            while await store.history_pending_move(1):  # one statement's records a move
                moves += 1
                await asyncio.sleep(0)  # the reader's turn
            reader.cancel()
            assert moves == 10 * 4  # create, claim, completions, their attempts
            assert len(counts) > 5 and set(counts) == {total}
            assert await conn.fetchval("SELECT count(*) FROM history") == total
            assert await conn.fetchval("SELECT count(*) FROM history_pending") == 0
        finally:
            await conn.close()
    finally:
        await store.close()


def test_doctor_counts_the_records_waiting_to_be_moved(pg_url: str) -> None:
    async def write() -> None:
        clock = FakeClock()
        store = PostgresStore(pg_url, clock=clock)
        await store.open()
        try:
            await run_tasks(store, clock, (await store.tenant_create("a")).id, 3)
        finally:
            await store.close()

    asyncio.run(write())
    found = {c.check: c for c in store_checks(pg_url)}
    assert found["history"].status == "ok"
    assert found["history"].detail == "4 statements' audit records wait for the leader to move them"
