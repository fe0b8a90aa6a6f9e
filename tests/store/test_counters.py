"""The maintained task counts: the contracts (:mod:`duetime.testing.conformance_counters`) on
every backend, and a drift — counters out of step with the tasks — healed by reconcile rounds."""

from __future__ import annotations

import asyncio
import sqlite3

from duetime.clock import FakeClock
from duetime.store import Store
from duetime.store.postgres.schema import connect as pg_connect
from duetime.store.sqlite.backend import SqliteStore
from duetime.testing.conformance import _create, _tenant, new_task
from duetime.testing.conformance_counters import *  # noqa: F403
from duetime.testing.conformance_counters import _agree


async def _drift(store: Store, store_url: str, tenant_id: str) -> None:
    """Put the counters out of step with the tasks behind the store's back."""
    if isinstance(store, SqliteStore):
        conn = sqlite3.connect(store.path)
        with conn:  # SQLite cannot disable triggers: corrupt the counters themselves
            conn.execute("UPDATE task_counts SET n = n + 7 WHERE tenant_id = ?", (tenant_id,))
            conn.execute("UPDATE task_counts SET n = 1 WHERE queue = 'other'")
        conn.close()
        return
    pg = await pg_connect(store_url)
    try:  # a change made with triggers disabled (as a logical-replication apply would)
        await pg.execute("SET session_replication_role = replica")
        await pg.execute("UPDATE tasks SET status = 'cancelled' WHERE queue = 'q'")
        await pg.execute("UPDATE task_counts SET n = 1 WHERE queue = 'other'")
    finally:
        await pg.close()


async def test_reconcile_heals_a_drift(store: Store, store_url: str, clock: FakeClock) -> None:
    a = await _tenant(store, "a")
    await store.task_create_many([new_task(a, queue="q") for _ in range(4)])
    await _create(store, a, queue="other")
    await _create(store, a, queue="other")
    await store.task_counts_fold(1000)
    await _drift(store, store_url, a)
    try:
        await _agree(store, a)
    except AssertionError:
        pass
    else:
        raise AssertionError("the drift did not show")
    after = None
    corrected = 0
    while (done := await store.task_counts_reconcile(after, 1000)) is not None:
        corrected += done.corrected
        after = done.key
    assert corrected > 0
    await _agree(store, a)
    # A second pass finds nothing more to correct.
    assert (await store.task_counts_reconcile(None, 1000)).corrected == 0  # type: ignore[union-attr]


async def test_counts_stay_exact_under_concurrent_batches(store: Store, clock: FakeClock) -> None:
    """Creates, claims and completions racing from many callers (several connections on
    PostgreSQL) leave the counts equal to a real count, before and after a fold."""
    from duetime.testing.conformance import _claim, _completion

    a = await _tenant(store, "a")

    async def create(queue: str) -> None:
        for _ in range(5):
            await store.task_create_many([new_task(a, queue=queue) for _ in range(20)])

    async def work() -> None:
        for _ in range(10):
            leases = await _claim(store, 15)
            await store.task_complete_many([_completion(lease) for lease in leases])

    await asyncio.gather(*(create(q) for q in ("x", "y", "z")), *(work() for _ in range(4)))
    await _agree(store, a)
