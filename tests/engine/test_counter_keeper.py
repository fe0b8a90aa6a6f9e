"""The leader's counter keeper: folds deltas, recounts one queue per reconcile round in turn
(wrapping around), corrects a drift and counts the correction; followers do nothing."""

from __future__ import annotations

import sqlite3

import asyncpg

from duetime import metrics
from duetime.clock import FakeClock
from duetime.engine.counters import CounterKeeper, CounterKeeperConfig
from duetime.engine.leader import Leader
from duetime.store import Store
from duetime.store.sqlite.backend import SqliteStore
from duetime.testing.conformance import _tenant, new_task


async def _pending_deltas(store: Store, store_url: str) -> int:
    if isinstance(store, SqliteStore):
        return 0  # SQLite's triggers write the totals directly
    pg = await asyncpg.connect(store_url)
    try:
        return int(await pg.fetchval("SELECT count(*) FROM task_count_deltas"))
    finally:
        await pg.close()


async def _add_to_counter(store: Store, store_url: str, queue: str, n: int) -> None:
    if isinstance(store, SqliteStore):
        conn = sqlite3.connect(store.path)
        with conn:
            conn.execute("UPDATE task_counts SET n = n + ? WHERE queue = ?", (n, queue))
        conn.close()
        return
    pg = await asyncpg.connect(store_url)
    try:
        await pg.execute("UPDATE task_counts SET n = n + $1 WHERE queue = $2", n, queue)
    finally:
        await pg.close()


async def test_the_keeper_folds_and_heals(store: Store, store_url: str, clock: FakeClock) -> None:
    tenant = await _tenant(store)
    for queue in ("a", "b", "c"):
        await store.task_create_many([new_task(tenant, queue=queue) for _ in range(2)])
    follower = Leader(store, "node-b", ttl_seconds=10, clock=clock)
    leader = Leader(store, "node-a", ttl_seconds=10, clock=clock)
    assert await leader.run_once() == 1
    assert await follower.run_once() == 0
    config = CounterKeeperConfig(interval=1, reconcile_every=1)
    idle = CounterKeeper(store, follower, clock, config)
    assert await idle.run_once() == 0
    assert await _pending_deltas(store, store_url) in (0, 3)
    keeper = CounterKeeper(store, leader, clock, config)
    await keeper.run_once()
    assert await _pending_deltas(store, store_url) == 0
    await _add_to_counter(store, store_url, "b", 5)
    before = metrics.COUNT_CORRECTIONS._value.get()
    # One queue per round, in order: the first round recounted a; then b (the drift), c, and
    # around again.
    corrected = [await keeper.reconcile_once() for _ in range(4)]
    assert corrected == [5, 0, 0, 0]
    assert metrics.COUNT_CORRECTIONS._value.get() == before + 5
    counts = {c.queue: c.count for c in await store.task_count_by_status()}
    assert counts == {"a": 2, "b": 2, "c": 2}
