"""The history maintenance service: leader only, bounded batches, a backlog comes back soon,
config defaults from settings. On the SQLite store in memory (retention has rules) and a fake
leadership."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from duetime.clock import FakeClock
from duetime.config import Settings
from duetime.engine.history import HistoryConfig, HistoryMaintenance
from duetime.engine.leader import Leader
from duetime.history.retention import RetentionPolicy
from duetime.store import Store
from duetime.testing.fakes import FakeLeadership, memory_store
from duetime.types import (
    AttemptOutcome,
    ClaimRequest,
    Completion,
    NewTask,
    TargetType,
    TaskFilter,
    TaskStatus,
)

DAY = 86400.0


@pytest.fixture
async def store(clock: FakeClock) -> AsyncIterator[Store]:
    async with memory_store(clock) as s:
        yield s


async def _finished(store: Store, clock: FakeClock, tenant: str, n: int) -> None:
    await store.task_create_many([NewTask(tenant_id=tenant, target={"type": "worker"})] * n)
    leases = await store.task_claim(
        ClaimRequest(worker_id="w", limit=n, target_types=frozenset({TargetType.WORKER}))
    )
    await store.task_complete_many(
        [
            Completion(
                task_id=lease.task.id,
                lease_id=lease.lease_id,
                outcome=AttemptOutcome.SUCCEEDED,
                started_at=clock.now(),
                duration_ms=1.0,
                worker="w",
                status=TaskStatus.SUCCEEDED,
            )
            for lease in leases
        ]
    )


def test_config_from_settings_reads_defaults() -> None:
    config = HistoryConfig.from_settings(
        Settings(retention_succeeded="P1D", retention_failed="P2D", retention_batch=50)
    )
    assert config.defaults == RetentionPolicy(DAY, 2 * DAY, 7 * DAY)
    assert config.batch == 50


async def test_leader_sweeps_in_bounded_batches(store: Store, clock: FakeClock) -> None:
    tenant = (await store.tenant_create("t")).id
    await _finished(store, clock, tenant, 7)
    leader = Leader(FakeLeadership(clock), "node-a", ttl_seconds=10, clock=clock)
    config = HistoryConfig(defaults=RetentionPolicy(DAY, DAY, DAY), batch=2, max_batches=2)
    service = HistoryMaintenance(store, leader, clock, config)

    clock.advance(2 * DAY)
    assert await service.run_once() == 0, "a follower retires nothing"
    assert await leader.run_once() == 1
    assert await service.run_once() == 4  # two batches of two: a backlog remains
    assert service._backlog
    assert await service.run_once() == 3
    assert not service._backlog
    assert await service.run_once() == 0
    assert await store.task_list(TaskFilter(tenant_id=tenant)) == []
