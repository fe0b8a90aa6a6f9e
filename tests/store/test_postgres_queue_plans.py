"""PostgreSQL only (the multi-node store): the queue and lease queries keep their indexes under
the generic plans prepared statements end up with, also with statistics taken when nothing ran
(stale); limits hold across nodes; ``Signal.wait_after`` wakes on another node's notify."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

from duetime.clock import FakeClock
from duetime.store import store_from_url
from duetime.store.postgres import driver
from duetime.store.postgres.hot import Q
from duetime.store.postgres.schema import connect as pg_connect
from duetime.testing.plans import explain, index_names, plan_nodes, statement
from duetime.types import ClaimRequest, NewTask, QueueSettings, TargetType

WORKER = {"type": "worker"}
HTTP = {"type": "http", "url": "http://127.0.0.1:9/hook", "method": "POST", "headers": {}}
CLAIM = {"now": "NULL", "queue": "'a'", "names": "NULL", "limit": "5", "lease_seconds": "NULL"}
CLAIM |= {"grace_seconds": "1", "worker_id": "'w'", "tenant_id": "'t'", "max_concurrency": "3"}
CLAIM |= {"exclude": "'{}'", "per_key": "1", "tenant_ids": "'{t}'", "shares": "'{50}'"}
CLAIM |= {"queues": "'{a}'"}
PROBE = {"tenant_ids": "'{t}'", "queues": "'{a}'", "names": "NULL"}


async def test_generic_plans_use_the_partial_indexes(pg_url: str) -> None:
    store = store_from_url(pg_url)
    await store.open()
    try:
        await store.tenant_create("acme", tenant_id="t")
        for queue in ("a", "b", "c"):
            batch = [NewTask(tenant_id="t", target=WORKER, queue=queue) for _ in range(300)]
            batch += [NewTask(tenant_id="t", target=HTTP, queue=queue) for _ in range(300)]
            await store.task_create_many(batch)
        await store.queue_put("t", "a", QueueSettings(max_concurrency=5))
    finally:
        await store.close()
    conn = await pg_connect(pg_url)
    try:
        await conn.execute("ANALYZE")  # "nothing is running"
        await conn.execute("SET plan_cache_mode = force_generic_plan")
        await conn.execute("SET enable_seqscan = off")
        worker, push = {"types": "'{worker}'"}, {"types": "'{http}'"}
        expected = {
            "task_claim_limited_worker": (
                statement("task_claim_limited_worker", CLAIM | worker),
                "tasks_ready_worker_idx",
            ),
            "task_claim_limited_push": (
                statement("task_claim_limited_push", CLAIM | push),
                "tasks_ready_push_idx",
            ),
            "ready_push_queues": (
                statement("ready_push_queues", CLAIM | push),
                "tasks_ready_push_idx",
            ),
            "queue_limited_ready_worker": (
                statement("queue_limited_ready_worker", PROBE | worker),
                "tasks_ready_worker_idx",
            ),
            "queue_limited_ready_push": (
                statement("queue_limited_ready_push", PROBE | push),
                "tasks_ready_push_idx",
            ),
            "task_leases_get": (
                (
                    driver.QUERIES["task_leases_get"].text,
                    "'{00000000-0000-4000-8000-000000000000}', 't'",
                ),
                "tasks_lease_id_idx",
            ),
        }
        for name, ((query, args), index) in expected.items():
            used = index_names(await explain(conn, query, args))
            assert index in used, f"{name} does not use {index}: {used}"
    finally:
        await conn.close()


async def test_the_push_claim_walks_its_index_in_order_on_stale_statistics(pg_url: str) -> None:
    """Statistics taken before a burst say nothing is ready. The dispatcher's claim must still
    stop after ``limit`` rows of tasks_ready_push_idx instead of reading and sorting the whole
    ready set, for the first (custom) plan and the generic one alike."""
    store = store_from_url(pg_url)
    await store.open()
    conn = await pg_connect(pg_url)
    try:
        await store.tenant_create("acme", tenant_id="t")
        await conn.execute("ANALYZE")  # "nothing is ready"
        await store.task_create_many([NewTask(tenant_id="t", target=HTTP) for _ in range(3000)])
        push_any = {"types": "'{http}'", "queue": "NULL", "limit": "50", "tenant_id": "NULL"}
        push_any |= {"queues": "'{default}'"}
        values = CLAIM | push_any
        claim, args = statement("task_claim_push", values)
        for mode in ("force_custom_plan", "force_generic_plan"):
            tx = conn.transaction()
            await tx.start()
            try:  # EXPLAIN ANALYZE runs the claim: rolled back below
                await conn.execute(f"SET LOCAL plan_cache_mode = {mode}")
                await conn.execute(Q["claim_in_index_order"].text)
                plan = await explain(conn, claim, args, analyze=True)
            finally:
                await tx.rollback()
            nodes = plan_nodes(plan)
            scans = [n for n in nodes if n.get("Index Name") == "tasks_ready_push_idx"]
            assert scans, f"{mode}: the claim does not use tasks_ready_push_idx"
            # The only sort is of the rows taken (a tenant's best across its queues).
            sorts = [n for n in nodes if n["Node Type"] == "Sort"]
            assert all(n["Actual Rows"] <= 50 for n in sorts), f"{mode}: it sorts the backlog"
            assert max(n["Actual Rows"] for n in scans) <= 50, f"{mode}: it reads past 50"
    finally:
        await conn.close()
        await store.close()


async def test_the_promoter_walks_its_index_in_order_on_stale_statistics(pg_url: str) -> None:
    """Statistics taken before a burst was created say nothing is scheduled. A promoter round must
    still stop after ``limit`` rows of tasks_due_idx, in due order, instead of reading and
    sorting every due task (as it did on each of a burst's ~23 rounds); the store runs it with
    sorts off, custom and generic plans alike."""
    # Created a minute ago (a pinned clock) and due since: the statement then reads the
    # database's own now(), as in production, whose selectivity the planner cannot know.
    clock = FakeClock(datetime.now(UTC) - timedelta(minutes=1))
    store = store_from_url(pg_url, clock=clock)
    await store.open()
    conn = await pg_connect(pg_url)
    try:
        await store.tenant_create("acme", tenant_id="t")
        later = clock.now() + timedelta(seconds=10)
        await store.task_create_many([NewTask(tenant_id="t", target=WORKER)] * 3)
        await conn.execute("ANALYZE")  # "three tasks, all ready: nothing is scheduled"
        await store.task_create_many(
            [NewTask(tenant_id="t", target=WORKER, run_at=later) for _ in range(3000)]
        )
        query, args = statement("task_promote_due", {"limit": "50"})
        for mode in ("force_custom_plan", "force_generic_plan"):
            tx = conn.transaction()
            await tx.start()
            try:  # EXPLAIN ANALYZE promotes: rolled back below
                await conn.execute(f"SET LOCAL plan_cache_mode = {mode}")
                # Whatever makes a sort look cheap to the planner (in a burst: statistics that
                # put 32 of 20,000 due tasks in the index); sorts off must still win.
                await conn.execute("SET LOCAL random_page_cost = 1000")
                await conn.execute(Q["claim_in_index_order"].text)
                plan = await explain(conn, query, args, analyze=True)
            finally:
                await tx.rollback()
            scans = [n for n in plan_nodes(plan) if n.get("Index Name") == "tasks_due_idx"]
            assert scans, f"{mode}: the promoter does not use tasks_due_idx"
            assert max(n["Actual Rows"] for n in scans) <= 50, f"{mode}: it reads past 50"
            assert plan["Actual Rows"] == 0 and plan_nodes(plan)[0]["Node Type"] == "ModifyTable"
        # The store's own round promotes exactly its limit, earliest first.
        clock.advance(11)
        assert await store.task_promote_due(50) == 50
        ready = await conn.fetchval("SELECT count(*) FROM tasks WHERE status = 'ready'")
        assert ready == 3 + 50
    finally:
        await conn.close()
        await store.close()


def _work(plan: dict[str, Any]) -> int:
    """Rows every node of an analyzed plan produced or read and dropped by a filter, over all
    its loops."""
    return round(
        sum(
            (n["Actual Rows"] + n.get("Rows Removed by Filter", 0)) * n["Actual Loops"]
            for n in plan_nodes(plan)
        )
    )


async def test_lease_endings_reach_tasks_by_key_on_stale_statistics(pg_url: str) -> None:
    """Statistics taken while the store was small (a new deployment) say the tenant has a few
    tasks. Reading 500 leases at once (an ack's first step), heart-beating them and ending them
    (by lease id, or in general) must still reach each task by its key (the lease id or the
    primary key), not walk the tenant's tasks or every running task once per lease (which
    cost 30-130 ms per 500 acks, against one), and every statement must do the same under the
    generic plan a prepared statement ends up with."""
    store = store_from_url(pg_url)
    await store.open()
    conn = await pg_connect(pg_url)
    try:
        await store.tenant_create("acme", tenant_id="t")
        await store.task_create_many([NewTask(tenant_id="t", target=WORKER) for _ in range(3)])
        await conn.execute("ANALYZE")  # "the tenant has three tasks"
        await store.task_create_many([NewTask(tenant_id="t", target=WORKER) for _ in range(1500)])
        claim = ClaimRequest(
            worker_id="w",
            limit=500,
            target_types=frozenset({TargetType.WORKER}),
            queue="default",
            tenant_id="t",
            lease_seconds=60,
        )
        leases = await store.task_claim(claim)
        assert len(leases) == 500
        ids = "'{" + ",".join(lease.lease_id for lease in leases) + "}'"
        nulls = "'{" + ",".join(["NULL"] * 500) + "}'"
        completions = (
            "ARRAY["
            + ",".join(
                f"ROW('{lease.task.id}', '{lease.lease_id}', 'succeeded', now(), 1.0, NULL, NULL, "
                "NULL, NULL, 'w', NULL, NULL, 'succeeded')::task_completion"
                for lease in leases
            )
            + "]"
        )
        cases = {
            "task_leases_get": statement("task_leases_get", {"lease_ids": ids, "tenant_id": "'t'"}),
            "task_complete_leased": statement(
                "task_complete_leased",
                {"lease_ids": ids, "results": nulls, "logs": "NULL", "tenant_id": "'t'"},
            ),
            "task_heartbeat": statement(
                "task_heartbeat", {"lease_ids": ids, "extend_seconds": "60"}
            ),
            "task_complete_many": statement("task_complete_many", {"completions": completions}),
        }
        for name, (query, args) in cases.items():
            for mode in ("force_custom_plan", "force_generic_plan"):
                tx = conn.transaction()
                await tx.start()
                try:  # EXPLAIN ANALYZE ends the leases: rolled back below
                    await conn.execute(f"SET LOCAL plan_cache_mode = {mode}")
                    plan = await explain(conn, query, args, analyze=True)
                finally:
                    await tx.rollback()
                used = index_names(plan)
                assert used <= {"tasks_pkey", "tasks_lease_id_idx"}, f"{name}, {mode}: {used}"
                assert used, f"{name}, {mode}: tasks not by key"
                assert _work(plan) < 20 * 500, f"{name}, {mode}: {_work(plan)} rows of work"
    finally:
        await conn.close()
        await store.close()


async def test_limited_claims_stay_exact_across_two_nodes(pg_url: str) -> None:
    """Two stores (two nodes) racing for a limited queue never exceed its limit."""
    a, b = store_from_url(pg_url), store_from_url(pg_url)
    await a.open()
    await b.open()
    try:
        await a.tenant_create("acme", tenant_id="t")
        await a.task_create_many(
            [NewTask(tenant_id="t", target=WORKER, queue="q") for _ in range(40)]
        )
        await a.queue_put("t", "q", QueueSettings(max_concurrency=7))

        def claim(node: str) -> ClaimRequest:
            return ClaimRequest(
                worker_id=node,
                limit=3,
                target_types=frozenset({TargetType.WORKER}),
                queue="q",
                tenant_id="t",
                lease_seconds=30,
            )

        batches = await asyncio.gather(
            *(store.task_claim(claim(f"n{i}")) for i in range(6) for store in (a, b))
        )
        claimed = [lease.task.id for batch in batches for lease in batch]
        assert len(claimed) == 7
        assert len(set(claimed)) == 7
    finally:
        await a.close()
        await b.close()


async def test_wait_after_wakes_on_another_nodes_notify(pg_url: str) -> None:
    a, b = store_from_url(pg_url), store_from_url(pg_url)
    await a.open()
    await b.open()
    try:
        await a.tenant_create("acme", tenant_id="t")
        seen = b.ready_signal.generation
        waiting = asyncio.ensure_future(b.ready_signal.wait_after(seen, 5.0))
        await asyncio.sleep(0.05)
        assert not waiting.done()
        await a.task_create_many([NewTask(tenant_id="t", target=WORKER)])
        assert await asyncio.wait_for(waiting, 5.0) is True
    finally:
        await a.close()
        await b.close()
