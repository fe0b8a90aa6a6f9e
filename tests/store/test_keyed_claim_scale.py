"""A keyed claim (``task_claim_keyed``, PostgreSQL) reads what it takes, not the queue's backlog.

Ranking every ready task of the queue with a window function would make each claim read and
sort the whole backlog (288 ms with 100,000 ready tasks). Here, under analyzed
statistics that know of a backlog of a few thousand ready tasks in each shape (a key per task,
one key idle or busy, a few keys of many tasks, keyed and unkeyed mixed), both the custom and
the generic plan are run (``EXPLAIN ANALYZE``, rolled back) and the rows they read from
``tasks`` are counted: where the room can be filled from the first tasks in claim order, a
claim reads about the room (and each key it meets, once); where nothing may run, it walks the
ready tasks once in index order, without sorting or ranking them. A ranking statement fails the
first kind outright (it reads every ready task). Times are in ``benchmarks/keyed_claim.py``.
"""

from __future__ import annotations

from typing import Any

import asyncpg

from duetime.store.postgres import hot
from duetime.store.postgres.schema import connect as pg_connect
from duetime.testing.plans import explain, plan_nodes, rows_read, statement

N = 3000
ROOM = 10

_INSERT = """
INSERT INTO tasks (id, tenant_id, name, queue, status, target_type, target, payload, priority,
                   retry, timeout_seconds, concurrency_key, run_at, due_at, created_at,
                   updated_at, attempts, lease_id, started_at)
SELECT gen_random_uuid(), 'acme', 'job', $1, $2, $4::text, jsonb_build_object('type', $4::text),
       '{}', i % 3, '{}', 30, {key}, c, c, c, c,
       CASE WHEN $2 = 'running' THEN 1 ELSE 0 END,
       CASE WHEN $2 = 'running' THEN gen_random_uuid() END,
       CASE WHEN $2 = 'running' THEN c END
FROM generate_series(1, $3) AS i,
     LATERAL (SELECT now() - interval '1 hour' + i * interval '1 millisecond' AS c) AS cc
"""

# queue: (its tasks' concurrency_key as an SQL expression of i, the key one running task holds);
# the "push" queue holds http tasks (the dispatcher's claim), every other one worker tasks.
SHAPES: dict[str, tuple[str, str | None]] = {
    "push": ("'k' || i", None),
    "distinct": ("'k' || i", None),  # every task its own key
    "blocks": ("'k' || ((i - 1) / 100)", None),  # 30 keys, each 100 tasks in a row
    "interleaved": ("'k' || (i % 30)", None),  # 30 keys of 100 tasks, taking turns
    "mixed": ("CASE WHEN i % 2 = 0 THEN 'k' || (i % 50) END", None),  # half without a key
    "one idle": ("'K'", None),  # one key of 3,000 tasks
    "one busy": ("'K'", "K"),  # ... that one key already running
}
# The shapes whose room is filled from the first tasks in claim order, and the rows a claim may
# read there: about the room, the key list (at most 33 keys) and each key's first tasks (150),
# plus, in "blocks", the rest of each key it takes from (its next 32 tasks come next in claim
# order, one priority in three). A ranking statement reads all 3,000 and more.
SHORT = {"push": 150, "distinct": 150, "interleaved": 150, "mixed": 150}
SHORT |= {"blocks": 150 + ROOM * 33}


async def _build(conn: asyncpg.Connection[Any]) -> None:
    await conn.execute("VACUUM ANALYZE tasks")  # first: statistics that say "nothing is ready"
    for queue, (key, running) in SHAPES.items():
        target = "http" if queue == "push" else "worker"
        await conn.execute(_INSERT.replace("{key}", key), queue, "ready", N, target)
        if running is not None:
            sql = _INSERT.replace("{key}", f"'{running}'")
            await conn.execute(sql, queue, "running", 1, target)


async def _explain(conn: asyncpg.Connection[Any], queue: str, mode: str) -> dict[str, Any]:
    wanted = "'{http}'" if queue == "push" else "'{worker}'"
    values = {"types": wanted, "queue": f"'{queue}'", "names": "NULL"}
    values |= {"limit": str(ROOM), "lease_seconds": "NULL", "grace_seconds": "10"}
    values |= {"worker_id": "'w'", "tenant_id": "'acme'", "max_concurrency": "1000"}
    values |= {"per_key": "1"}
    tx = conn.transaction()
    await tx.start()
    try:
        await conn.execute(hot.Q["claim_keyed_plan"].text)  # as the store runs it
        await conn.execute(f"SET LOCAL plan_cache_mode = {mode}")  # both plans, though
        return await explain(conn, *statement("task_claim_keyed", values), analyze=True)
    finally:
        await tx.rollback()


async def test_a_keyed_claim_reads_about_its_room_not_the_backlog(pg_url: str) -> None:
    conn = await pg_connect(pg_url, server_settings={"jit": "off"})
    try:
        await _build(conn)
        for statistics in ("stale", "analyzed"):
            if statistics == "analyzed":
                await conn.execute("VACUUM ANALYZE tasks")  # they know of every backlog
            for queue in SHAPES:
                for mode in ("force_custom_plan", "force_generic_plan"):
                    await _check(conn, queue, mode, statistics)
    finally:
        await conn.close()


async def _check(conn: asyncpg.Connection[Any], queue: str, mode: str, statistics: str) -> None:
    plan = await _explain(conn, queue, mode)
    nodes = plan_nodes(plan)
    read = rows_read(plan)
    where = f"{queue}, {statistics} statistics, {mode}: {read} rows read"
    assert "WindowAgg" not in {n["Node Type"] for n in nodes}, where
    scans = [n for n in nodes if n.get("Relation Name") == "tasks"]
    assert not [n for n in scans if n["Node Type"] == "Seq Scan"], where
    # No sort of the backlog: a sort sees the rows taken (the room from each ready index) or one
    # (priority, due time) group, which is one task here.
    for n in nodes:
        if n["Node Type"] == "Sort":
            fed = n["Plans"][0]["Actual Rows"] * n["Plans"][0]["Actual Loops"]
            assert fed <= 2 * ROOM + 2, f"{where}; a sort of {fed} rows"
    if queue in SHORT:
        assert read <= SHORT[queue], where
    else:  # nothing more may run: one walk of the ready tasks, each row once
        assert read <= N + 150, where
    expected = {"one idle": 1, "one busy": 0}.get(queue, ROOM)
    assert plan["Actual Rows"] == expected, where
