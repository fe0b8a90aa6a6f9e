"""Ends of tasks across PostgreSQL nodes: a task ending on one node wakes a wait on another
through a NOTIFY of its id, sent only while some node says it waits — a cluster where nobody
waits sends none, whatever it completes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

import pytest

from duetime.clock import FakeClock
from duetime.lifecycle.waits import EndWatch
from duetime.store.postgres import ends
from duetime.store.postgres.backend import PostgresStore
from duetime.store.postgres.schema import connect as pg_connect
from duetime.types import AttemptOutcome, ClaimRequest, Completion, NewTask, TargetType, TaskStatus

WORKER = {"type": "worker"}


@asynccontextmanager
async def _nodes(url: str, clock: FakeClock) -> AsyncIterator[tuple[PostgresStore, PostgresStore]]:
    a = PostgresStore(url, clock=clock, pool_min=1, pool_max=4)
    b = PostgresStore(url, clock=clock, pool_min=1, pool_max=4)
    await a.open()
    await b.open()
    try:
        yield a, b
    finally:
        await a.close()
        await b.close()


async def _eventually(check: Callable[[], bool], seconds: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + seconds
    while not check():
        assert asyncio.get_running_loop().time() < deadline, "condition never became true"
        await asyncio.sleep(0.02)


async def _run_one(store: PostgresStore, tenant: str) -> str:
    (made,) = await store.task_create_many([NewTask(tenant_id=tenant, target=WORKER)])
    (lease,) = await store.task_claim(
        ClaimRequest(
            worker_id="w", limit=1, target_types=frozenset({TargetType.WORKER}), tenant_id=tenant,
            queue="default", lease_seconds=60,
        )
    )  # fmt: skip
    done = Completion(
        task_id=lease.task.id,
        lease_id=lease.lease_id,
        outcome=AttemptOutcome.SUCCEEDED,
        started_at=datetime(2030, 1, 1, tzinfo=UTC),
        duration_ms=1.0,
        status=TaskStatus.SUCCEEDED,
    )
    (result,) = await store.task_complete_many([done])
    assert result.accepted
    return made.task.id


async def test_an_end_on_one_node_wakes_a_wait_on_another(pg_url: str, clock: FakeClock) -> None:
    async with _nodes(pg_url, clock) as (a, b):
        tenant = (await a.tenant_create("acme")).id
        (made,) = await b.task_create_many([NewTask(tenant_id=tenant, target=WORKER)])
        watch = EndWatch(a, sweep_seconds=3600)  # no sweep: only the NOTIFY can wake it
        waiting = asyncio.create_task(watch.wait(tenant, [made.task.id], 30))
        await _eventually(lambda: b.ended.wanted)  # b heard that a waits
        (lease,) = await b.task_claim(
            ClaimRequest(
                worker_id="w", limit=1, target_types=frozenset({TargetType.WORKER}),
                tenant_id=tenant, queue="default", lease_seconds=60,
            )
        )  # fmt: skip
        done = Completion(
            task_id=made.task.id,
            lease_id=lease.lease_id,
            outcome=AttemptOutcome.SUCCEEDED,
            started_at=datetime(2030, 1, 1, tzinfo=UTC),
            duration_ms=1.0,
            status=TaskStatus.SUCCEEDED,
        )
        await b.task_complete_many([done])
        assert await asyncio.wait_for(waiting, 10) is True
        assert watch.sweeps == 0


async def test_no_notify_of_ends_while_nobody_waits(
    pg_url: str, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ends, "WAITERS_SECONDS", 0.3)
    heard: list[str] = []
    raw = await pg_connect(pg_url)
    await raw.add_listener(ends.ENDED_CHANNEL, lambda *args: heard.append(str(args[3])))
    try:
        async with _nodes(pg_url, clock) as (a, _):
            tenant = (await a.tenant_create("acme")).id
            await _run_one(a, tenant)
            await asyncio.sleep(0.3)
            assert heard == [], "ends were sent while no node waits"
            await raw.execute("SELECT pg_notify($1, 'another-node:')", ends.WAITS_CHANNEL)
            await _eventually(lambda: a.ended.wanted)
            task_id = await _run_one(a, tenant)
            await _eventually(lambda: len(heard) == 1)
            assert heard[0].split(":", 1)[1] == task_id
            await _eventually(lambda: not a.ended.wanted)  # the waiting node went quiet
            await _run_one(a, tenant)
            await asyncio.sleep(0.3)
            assert len(heard) == 1
    finally:
        await raw.close()


class _ReadCounting:
    """A store for an :class:`EndWatch` that counts the status reads it has answered."""

    def __init__(self, store: PostgresStore) -> None:
        self._store = store
        self.reads = 0

    @property
    def ended(self) -> Any:
        return self._store.ended

    async def task_statuses(self, task_ids: Any) -> Any:
        statuses = await self._store.task_statuses(task_ids)
        self.reads += 1
        return statuses

    async def tasks_get(self, task_ids: Any) -> Any:
        return await self._store.tasks_get(task_ids)


async def test_a_lost_end_is_read_by_the_sweep(pg_url: str, clock: FakeClock) -> None:
    """An end whose NOTIFY never came (a node died between its commit and the send) is seen
    by the waiting node's sweep."""
    async with _nodes(pg_url, clock) as (a, _):
        tenant = (await a.tenant_create("acme")).id
        (made,) = await a.task_create_many([NewTask(tenant_id=tenant, target=WORKER)])
        store = _ReadCounting(a)
        watch = EndWatch(store, sweep_seconds=0.1)
        waiting = asyncio.create_task(watch.wait(tenant, [made.task.id], 30))
        await _eventually(lambda: store.reads >= 1)  # the wait's own first read is behind it
        conn: Any = await pg_connect(pg_url)
        try:  # ended behind the store's back: no publication at all
            await conn.execute("UPDATE tasks SET status = 'cancelled' WHERE id = $1", made.task.id)
        finally:
            await conn.close()
        assert await asyncio.wait_for(waiting, 10) is True
        assert watch.sweeps >= 1
