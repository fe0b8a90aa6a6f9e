"""What only the PostgreSQL store has: many nodes on one database.

The conformance suite checks every contract on one store; these tests put two or more
:class:`PostgresStore` instances (two "nodes") on the same database and check that they never
share a claimed task, that signals cross between them through LISTEN/NOTIFY and survive a lost
listener connection, that migrations and idempotent creates race safely, that an outage surfaces as
``StoreUnavailable`` and heals by itself, and that the hot statements keep linear plans when
PostgreSQL switches them to generic plans.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta, timezone
from types import MappingProxyType
from typing import Any

import pytest

from duetime.clock import FakeClock
from duetime.errors import StoreUnavailable, ValidationError
from duetime.history.retention import RetentionPolicy
from duetime.ids import id_prefix_range
from duetime.store.postgres import signals
from duetime.store.postgres.backend import PostgresStore
from duetime.store.postgres.schema import connect as pg_connect
from duetime.store.sql import migrations
from duetime.testing.plans import explain, index_names, plan_nodes, rows_read, statement
from duetime.types import (
    AttemptOutcome,
    ClaimRequest,
    Completion,
    FlowRules,
    Lease,
    NewTask,
    QueueSettings,
    TargetType,
    TaskFilter,
    TaskStatus,
)

PG_ADMIN_URL = os.environ.get("DUETIME_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")
WORKER = {"type": "worker"}
HTTP = {"type": "http", "url": "https://example.com/hook", "method": "POST", "headers": {}}
ANY_TYPE = frozenset(TargetType)


def _with_db(url: str, db: str) -> str:
    return f"{url.rpartition('/')[0]}/{db}"


@contextlib.asynccontextmanager
async def _stores(url: str, n: int, clock: FakeClock | None = None) -> AsyncIterator[list[Any]]:
    """``n`` open stores ("nodes") on one database."""
    stores = [PostgresStore(url, clock=clock, pool_min=1, pool_max=4) for _ in range(n)]
    try:
        for store in stores:
            await store.open()
        yield stores
    finally:
        for store in stores:
            await store.close()


async def _admin(url: str, query: str, *args: Any) -> Any:
    conn = await pg_connect(url, timeout=5)
    try:
        return await conn.fetch(query, *args)
    finally:
        await conn.close()


async def _eventually(check: Callable[[], Any], seconds: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + seconds
    while not await check():
        assert asyncio.get_running_loop().time() < deadline, "condition never became true"
        await asyncio.sleep(0.02)


async def _drain(signal: Any) -> None:
    while await signal.wait(0.05):
        pass


def _claim_request(limit: int, worker: str = "w") -> ClaimRequest:
    return ClaimRequest(worker_id=worker, limit=limit, target_types=ANY_TYPE, lease_seconds=60)


def _success(lease: Lease) -> Completion:
    assert lease.task.started_at is not None
    return Completion(
        task_id=lease.task.id,
        lease_id=lease.lease_id,
        outcome=AttemptOutcome.SUCCEEDED,
        started_at=lease.task.started_at,
        duration_ms=1.0,
        status=TaskStatus.SUCCEEDED,
    )


# -- many nodes, one database -------------------------------------------------------------------


async def test_concurrent_claimers_never_get_the_same_task(pg_url: str, clock: FakeClock) -> None:
    """FOR UPDATE SKIP LOCKED: claimers on two nodes racing over the same ready rows split them
    without overlap, and together claim every one."""
    async with _stores(pg_url, 2, clock) as (a, b):
        tenant = (await a.tenant_create("acme")).id
        created = await a.task_create_many(
            [NewTask(tenant_id=tenant, target=WORKER) for _ in range(400)]
        )
        want = {c.task.id for c in created}

        async def claimer(store: PostgresStore, name: str) -> list[str]:
            got: list[str] = []
            while leases := await store.task_claim(_claim_request(7, name)):
                got.extend(lease.task.id for lease in leases)
            return got

        results = await asyncio.gather(
            *(claimer(store, f"{i}") for i, store in enumerate([a, b, a, b, a, b]))
        )
        claimed = [task_id for got in results for task_id in got]
        assert len(claimed) == len(set(claimed)), "a task was claimed twice"
        assert set(claimed) == want
        assert sum(1 for got in results if got) >= 2, "the race never happened"


async def test_a_keyed_queue_another_node_lifted_is_claimed_by_the_next_claim(
    pg_url: str, clock: FakeClock
) -> None:
    """A claim of one keyed (or limited) queue runs only the locked path. When another node
    lifts the queue's limits, this node's cache of limited queues may still name it: that
    claim finds no limit to lock and drops the cache, so the next one claims on the plain path."""
    async with _stores(pg_url, 2, clock) as (a, b):
        tenant = (await a.tenant_create("acme")).id
        rules = FlowRules(key=("payload.k",), key_rate=1.0, key_burst=1)
        await a.queue_put(tenant, "q", QueueSettings(flow=rules))
        await a.task_create_many(
            [NewTask(tenant_id=tenant, target=WORKER, queue="q", flow_key="x") for _ in range(3)]
        )
        only = frozenset({TargetType.WORKER})
        claim = ClaimRequest(
            worker_id="w", limit=10, target_types=only, tenant_id=tenant, queue="q"
        )
        assert len(await b.task_claim(claim)) == 1  # the key's one token
        await a.queue_put(tenant, "q", QueueSettings())
        assert (tenant, "q") in b._limited  # b's cache, still fresh
        got = await b.task_claim(claim) or await b.task_claim(claim)
        assert len(got) == 2


async def test_idempotent_create_races_across_nodes(pg_url: str, clock: FakeClock) -> None:
    """ON CONFLICT: two nodes creating the same key at once make one task; both get it."""
    async with _stores(pg_url, 2, clock) as (a, b):
        tenant = (await a.tenant_create("acme")).id
        for round_ in range(15):
            new = NewTask(tenant_id=tenant, target=WORKER, idempotency_key=f"k{round_}")
            (ra,), (rb,) = await asyncio.gather(
                a.task_create_many([new]), b.task_create_many([new])
            )
            assert ra.task.id == rb.task.id
            assert sorted([ra.created, rb.created]) == [False, True]


async def test_child_created_while_parent_completes_is_never_stranded(
    pg_url: str, clock: FakeClock
) -> None:
    """Creating a child locks its parents: a parent that succeeds at the same moment either
    releases the child or is seen as succeeded by it. The child is never left blocked."""
    async with _stores(pg_url, 2, clock) as (a, b):
        tenant = (await a.tenant_create("acme")).id
        for _ in range(15):
            (parent,) = await a.task_create_many([NewTask(tenant_id=tenant, target=WORKER)])
            (lease,) = await a.task_claim(_claim_request(1))
            (created,), (done,) = await asyncio.gather(
                b.task_create_many(
                    [NewTask(tenant_id=tenant, target=WORKER, depends_on=(parent.task.id,))]
                ),
                a.task_complete_many([_success(lease)]),
            )
            assert done.accepted
            child = await a.task_get(tenant, created.task.id)
            assert child is not None and child.status is TaskStatus.READY
            # Keep the queue empty for the next round's claim.
            (child_lease,) = await a.task_claim(_claim_request(1))
            await a.task_complete_many([_success(child_lease)])


async def test_concurrent_creates_share_statements_yet_keep_their_own_contract(
    pg_url: str, clock: FakeClock
) -> None:
    """Group commit: concurrent creates on one node go out in shared INSERTs, yet each call gets
    exactly its own tasks, a key repeated across calls makes one task, and a task the database
    refuses fails only its own call (as a ValidationError)."""
    async with _stores(pg_url, 1, clock) as (store,):
        tenant = (await store.tenant_create("acme")).id
        largest = 0
        run = store._inserts._run

        async def watching_run(key: Any, records: list[Any]) -> Any:
            nonlocal largest
            largest = max(largest, len(records))
            return await run(key, records)

        store._inserts._run = watching_run
        calls = [
            store.task_create_many([NewTask(tenant_id=tenant, target=WORKER, name=f"n{i}")])
            for i in range(40)
        ]
        calls += [
            store.task_create_many([NewTask(tenant_id=tenant, target=WORKER, idempotency_key="k")])
            for _ in range(5)
        ]
        # PostgreSQL's jsonb cannot hold a NUL character: this one call must fail, alone.
        bad = NewTask(tenant_id=tenant, target={"type": "worker", "note": "\x00"})
        calls.append(store.task_create_many([bad]))
        results = await asyncio.gather(*calls, return_exceptions=True)

        assert isinstance(results[-1], ValidationError)
        singles = [r for r in results[:40] if not isinstance(r, BaseException)]
        assert [r[0].task.name for r in singles] == [f"n{i}" for i in range(40)]
        assert all(r[0].created for r in singles)
        keyed = [r[0] for r in results[40:45] if not isinstance(r, BaseException)]
        assert len(keyed) == 5
        assert len({c.task.id for c in keyed}) == 1
        assert sum(c.created for c in keyed) == 1
        assert largest > 1, "no statement was shared"
        listed = await store.task_list(TaskFilter(tenant_id=tenant, limit=1000))
        assert len(listed) == 41


async def test_created_task_equals_the_stored_one(pg_url: str) -> None:
    """task_create_many builds its result from the input (it does not read the rows back); it
    must equal what task_get reads, UTC times included."""
    async with _stores(pg_url, 1) as (store,):
        tenant = (await store.tenant_create("acme")).id
        paris = timezone(timedelta(hours=2))
        when = datetime(2031, 5, 1, 12, 0, tzinfo=paris)
        (parent,) = await store.task_create_many([NewTask(tenant_id=tenant, target=WORKER)])
        (created,) = await store.task_create_many(
            [
                NewTask(
                    tenant_id=tenant,
                    target={"type": "http", "url": "https://example.com/", "headers": {"X": "1"}},
                    payload_json='{"b": 1, "a": [1, 2.5]}',
                    name="report",
                    queue="q",
                    run_at=when,
                    idempotency_key="k",
                    priority=3,
                    timeout_seconds=12,
                    depends_on=(parent.task.id, parent.task.id),
                    concurrency_key="c",
                    labels=MappingProxyType({"team": "billing"}),
                    schedule_id="s1",
                    scheduled_for=when,
                )
            ]
        )
        stored = await store.task_get(tenant, created.task.id)
        assert created.task == stored
        assert created.task.scheduled_for is not None
        assert created.task.scheduled_for.tzinfo == UTC
        assert created.task.depends_on == (parent.task.id,)


async def test_created_statuses_follow_the_insert_rule_on_the_clock_it_returned(
    pg_url: str,
) -> None:
    """The insert answers with its clock and a count, not a row per task: the status, run_at and
    created_at each result reports (worked out by the core's rule) are what the rows hold, for
    every starting status, and an existing idempotency key in the same batch is a hit."""
    async with _stores(pg_url, 1) as (store,):
        tenant = (await store.tenant_create("acme")).id
        (first,) = await store.task_create_many(
            [NewTask(tenant_id=tenant, target=WORKER, idempotency_key="seen")]
        )
        (pending,) = await store.task_create_many(
            [NewTask(tenant_id=tenant, target=WORKER, run_at=datetime(2100, 1, 1, tzinfo=UTC))]
        )
        await store.task_cancel(tenant, pending.task.id)
        (waiting,) = await store.task_create_many(
            [NewTask(tenant_id=tenant, target=WORKER, run_at=datetime(2100, 1, 1, tzinfo=UTC))]
        )
        past, future = datetime(2001, 1, 1, tzinfo=UTC), datetime(2100, 1, 1, tzinfo=UTC)
        plain = [
            NewTask(tenant_id=tenant, target=WORKER),
            NewTask(tenant_id=tenant, target=WORKER, run_at=past),
            NewTask(tenant_id=tenant, target=WORKER, run_at=future),
            NewTask(tenant_id=tenant, target=WORKER, idempotency_key="seen"),
            NewTask(tenant_id=tenant, target=WORKER, idempotency_key="new"),
        ]
        made = await store.task_create_many(plain)
        assert [m.created for m in made] == [True, True, True, False, True]
        assert made[3].task == first.task
        children = await store.task_create_many(
            [
                NewTask(tenant_id=tenant, target=WORKER, depends_on=(waiting.task.id,)),
                NewTask(tenant_id=tenant, target=WORKER, depends_on=(pending.task.id,)),
            ]
        )
        statuses = [m.task.status for m in (*made, *children)]
        assert statuses == [
            TaskStatus.READY,
            TaskStatus.READY,
            TaskStatus.SCHEDULED,
            TaskStatus.READY,  # the hit: the first task as it is
            TaskStatus.READY,
            TaskStatus.BLOCKED,
            TaskStatus.FAILED,
        ]
        for m in (*made, *children):
            assert m.task == await store.task_get(tenant, m.task.id)
        assert made[0].task.run_at == made[0].task.created_at  # "now" is the database's


# -- signals across nodes -----------------------------------------------------------------------


async def test_signals_cross_nodes(pg_url: str, clock: FakeClock) -> None:
    """LISTEN/NOTIFY: a create on one node wakes the other's ready_signal (ready task) and
    due_signal (scheduled task); notify() on one node wakes the other; a node does not hear its
    own notification twice."""
    async with _stores(pg_url, 2, clock) as (a, b):
        tenant = (await a.tenant_create("acme")).id
        await _drain(b.ready_signal)
        await a.task_create_many([NewTask(tenant_id=tenant, target=HTTP)])
        assert await b.ready_signal.wait(5.0)
        # A ready worker task wakes the other node's long polls, not its dispatchers.
        seen = b.ready_signal.generation
        await a.task_create_many([NewTask(tenant_id=tenant, target=WORKER)])
        assert await b.ready_signal.wait_after(seen, 5.0)
        assert not await b.ready_signal.wait(0.3)

        await _drain(b.due_signal)
        later = clock.now() + timedelta(hours=1)
        await a.task_create_many([NewTask(tenant_id=tenant, target=WORKER, run_at=later)])
        assert await b.due_signal.wait(5.0)

        for signal_a, signal_b in ((a.ready_signal, b.ready_signal), (a.due_signal, b.due_signal)):
            await _drain(signal_a)
            await _drain(signal_b)
            signal_a.notify()
            assert await signal_b.wait(5.0)
            assert await signal_a.wait(0)  # woken locally at once
            # The echo of its own NOTIFY is ignored by the sender.
            assert not await signal_a.wait(0.3)


async def test_worker_task_wakes_cross_nodes_only_while_another_node_polls(
    pg_url: str, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A create of worker tasks sends its NOTIFY (``<token>:pulls``) only while another node
    has announced waiting long polls on ``duetime_polls``; a push task's always goes out."""
    monkeypatch.setattr(signals, "POLLS_PEER_SECONDS", 0.3)
    heard: list[str] = []
    raw = await pg_connect(pg_url)
    await raw.add_listener(signals.READY_CHANNEL, lambda *args: heard.append(str(args[3])))
    try:
        async with _stores(pg_url, 1, clock) as (a,):
            tenant = (await a.tenant_create("acme")).id
            await _eventually(_is(lambda: not a.ready_signal.remote_pollers), 5.0)
            await a.task_create_many([NewTask(tenant_id=tenant, target=WORKER)])
            await asyncio.sleep(0.3)
            assert heard == [], "a worker task woke other nodes while none polls"

            await raw.execute("SELECT pg_notify($1, 'another-node')", signals.POLLS_CHANNEL)
            await _eventually(_is(lambda: a.ready_signal.remote_pollers), 5.0)
            await a.task_create_many([NewTask(tenant_id=tenant, target=WORKER)])
            await _eventually(_is(lambda: len(heard) == 1), 5.0)
            assert heard[0].endswith(":pulls")

            await _eventually(_is(lambda: not a.ready_signal.remote_pollers), 5.0)  # it went quiet
            await a.task_create_many([NewTask(tenant_id=tenant, target=HTTP)])
            await _eventually(_is(lambda: len(heard) == 2), 5.0)
            assert not heard[1].endswith(":pulls")
    finally:
        await raw.close()


async def test_a_waiting_poll_announces_its_node(
    pg_url: str, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A long poll waiting on node b (``wait_after``) makes node a count b as polling, so a's
    create of a worker task wakes it."""
    monkeypatch.setattr(signals, "POLLS_PEER_SECONDS", 1.0)
    async with _stores(pg_url, 2, clock) as (a, b):
        await _eventually(_is(lambda: not a.ready_signal.remote_pollers), 5.0)
        waiting = asyncio.ensure_future(b.ready_signal.wait_after(b.ready_signal.generation, 5))
        await _eventually(_is(lambda: a.ready_signal.remote_pollers), 5.0)
        tenant = (await a.tenant_create("acme")).id
        await a.task_create_many([NewTask(tenant_id=tenant, target=WORKER)])
        assert await asyncio.wait_for(waiting, 5.0) is True


def _is(check: Callable[[], bool]) -> Callable[[], Any]:
    """``check`` as the coroutine function :func:`_eventually` awaits."""

    async def checked() -> bool:
        return check()

    return checked


async def test_listener_reconnects_after_its_backend_is_terminated(
    pg_url: str, clock: FakeClock
) -> None:
    """The listener connection heals by itself: kill its backend, and a later notify from
    another node still arrives."""
    async with _stores(pg_url, 2, clock) as (a, b):
        pid = a._listener.server_pid
        assert pid is not None
        await _admin(pg_url, "SELECT pg_terminate_backend($1)", pid)

        async def reconnected() -> bool:
            return a._listener.connections >= 2 and a._listener.server_pid not in (None, pid)

        await _eventually(reconnected)
        await _drain(a.ready_signal)  # a reconnect wakes waiters once, on purpose
        b.ready_signal.notify()
        assert await a.ready_signal.wait(5.0)


# -- migrations ---------------------------------------------------------------------------------


async def test_concurrent_migrate_applies_each_version_once() -> None:
    """migrate() takes an advisory lock: four nodes migrating a blank database at once apply
    each version exactly once between them."""
    name = f"duetime_mig_{uuid.uuid4().hex[:10]}"
    await _admin(PG_ADMIN_URL, f'CREATE DATABASE "{name}"')
    url = _with_db(PG_ADMIN_URL, name)
    try:
        async with _stores(url, 4) as stores:
            applied = await asyncio.gather(*(store.migrate() for store in stores))
            versions = list(migrations("duetime.store.postgres"))
            assert sorted(v for batch in applied for v in batch) == versions
            recorded = await _admin(url, "SELECT version FROM schema_migrations ORDER BY 1")
            assert [r["version"] for r in recorded] == versions
            for store in stores:
                assert await store.migrations_pending() == []
    finally:
        await _admin(PG_ADMIN_URL, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# -- outages ------------------------------------------------------------------------------------


async def test_unreachable_port_raises_store_unavailable() -> None:
    """Nothing listens on loopback port 1: open() and any call raise StoreUnavailable, whose
    detail names the server (without credentials)."""
    store = PostgresStore("postgresql://postgres:secret@127.0.0.1:1/duetime", connect_timeout=2)
    with pytest.raises(StoreUnavailable) as caught:
        await store.open()
    assert "127.0.0.1:1/duetime" in caught.value.detail
    assert "secret" not in caught.value.detail
    with pytest.raises(StoreUnavailable):
        await store.ping()
    await store.close()


class _Proxy:
    """A loopback TCP proxy to PostgreSQL that can be cut and restored: a controllable outage."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.port = 0
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def cut(self) -> None:
        assert self._server is not None
        self._server.close()
        for writer in list(self._writers):
            writer.transport.abort()
        await self._server.wait_closed()
        self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        except OSError:
            writer.transport.abort()
            return
        self._writers |= {writer, up_writer}

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except (OSError, asyncio.IncompleteReadError):
                pass
            finally:
                dst.transport.abort()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        self._writers -= {writer, up_writer}


async def test_outage_raises_store_unavailable_and_heals(pg_url: str, clock: FakeClock) -> None:
    """While the server cannot be reached, calls raise StoreUnavailable; once it is back the pool
    and the listener reconnect by themselves (no reopen), and signals cross nodes again."""
    port = int(PG_ADMIN_URL.rpartition(":")[2].split("/")[0])
    proxy = _Proxy(port)
    await proxy.start()
    db = pg_url.rpartition("/")[2]
    proxied = f"postgresql://postgres@127.0.0.1:{proxy.port}/{db}"
    store = PostgresStore(proxied, clock=clock, pool_min=1, pool_max=3, connect_timeout=2)
    await store.open()
    try:
        async with _stores(pg_url, 1, clock) as (direct,):
            tenant = (await store.tenant_create("acme")).id
            await proxy.cut()
            with pytest.raises(StoreUnavailable):
                await store.ping()
            with pytest.raises(StoreUnavailable):
                await store.task_create_many([NewTask(tenant_id=tenant, target=WORKER)])
            # Accepted work is safe: nothing half-written.
            assert await direct.task_claim(_claim_request(10)) == []

            await proxy.start()  # same port

            async def healthy() -> bool:
                try:
                    await store.ping()
                except StoreUnavailable:
                    return False
                return store._listener.server_pid is not None

            await _eventually(healthy)
            (created,) = await store.task_create_many([NewTask(tenant_id=tenant, target=WORKER)])
            assert created.created
            await _drain(store.ready_signal)
            direct.ready_signal.notify()
            assert await store.ready_signal.wait(5.0)
    finally:
        await store.close()
        with contextlib.suppress(AssertionError):
            await proxy.cut()


# -- plans --------------------------------------------------------------------------------------


async def test_generic_plans_stay_linear_with_stale_statistics(pg_url: str) -> None:
    """Statistics taken when nothing runs must not turn a batch completion into a nested loop
    that re-reads the batch per task (quadratic); claims, promotion and reaping keep their
    partial indexes."""
    async with _stores(pg_url, 1) as (store,):
        tenant = (await store.tenant_create("acme")).id
        await store.task_create_many([NewTask(tenant_id=tenant, target=WORKER) for _ in range(300)])
        conn = await pg_connect(pg_url)
        try:
            await conn.execute("ANALYZE tasks")  # "no task is running"
            empty = {"completions": "ARRAY[]::task_completion[]"}
            plan = await explain(
                conn, *statement("task_complete_many", empty), mode="force_generic_plan"
            )
            for node in plan_nodes(plan):
                if node["Node Type"] == "Nested Loop":
                    inner = node["Plans"][1]
                    assert inner["Node Type"] not in ("Function Scan", "CTE Scan", "Materialize")

            await conn.execute("SET enable_seqscan = off")
            claim = {"names": "NULL", "limit": "10", "lease_seconds": "NULL"}
            claim |= {"grace_seconds": "10", "worker_id": "'w'"}
            expected = {
                "task_claim_push": (
                    "tasks_ready_push_idx",
                    claim
                    | {"types": "'{http}'", "queue": "NULL", "tenant_id": "NULL"}
                    | {"tenant_ids": "'{t}'", "queues": "'{default}'", "shares": "'{10}'"},
                ),
                "task_claim_worker": (
                    "tasks_ready_worker_idx",
                    claim | {"types": "'{worker}'", "queue": "'q'", "tenant_id": "'t'"},
                ),
                "task_promote_due": ("tasks_due_idx", {"limit": "10"}),
                "task_expired_leases": ("tasks_lease_expiry_idx", {"limit": "10"}),
                "task_complete_leased": (
                    "tasks_lease_id_idx",
                    {
                        "lease_ids": "ARRAY[gen_random_uuid()]",
                        "results": "ARRAY['1']",
                        "logs": "NULL",  # no completion with logs: the usual case
                        "tenant_id": "'t'",
                    },
                ),
            }
            for name, (index, args) in expected.items():
                plan = await explain(conn, *statement(name, args), mode="force_generic_plan")
                used = index_names(plan)
                assert index in used, f"{name} does not use {index}: {used}"
        finally:
            await conn.close()


async def test_a_lease_walks_its_index_under_an_analyzed_ready_backlog(pg_url: str) -> None:
    """Statistics that know of thousands of ready tasks must not turn a lease into a read and
    sort of the whole backlog (57 ms for 10 out of 100,000 ready tasks, against 1 ms walking the
    index): both the custom and the generic plan of the worker claim walk
    tasks_ready_worker_idx in its order and sort nothing, with sequential scans allowed."""
    async with _stores(pg_url, 1) as (store,):
        tenant = (await store.tenant_create("acme")).id
        for _ in range(3):
            await store.task_create_many(
                [NewTask(tenant_id=tenant, target=WORKER, queue="q") for _ in range(1000)]
            )
        conn = await pg_connect(pg_url)
        try:
            await conn.execute("ANALYZE tasks")  # "3,000 tasks are ready"
            args = {"names": "NULL", "limit": "10", "lease_seconds": "NULL"}
            args |= {"grace_seconds": "10", "worker_id": "'w'", "types": "'{worker}'"}
            args |= {"queue": "'q'", "tenant_id": f"'{tenant}'"}
            for mode in ("force_custom_plan", "force_generic_plan"):
                plan = await explain(conn, *statement("task_claim_worker", args), mode=mode)
                nodes = plan_nodes(plan)
                used = index_names(plan)
                assert "tasks_ready_worker_idx" in used, f"{mode}: {used}"
                assert not [n for n in nodes if n["Node Type"] == "Sort"], mode
                scans = [n for n in nodes if n.get("Relation Name") == "tasks"]
                assert all(n["Node Type"] != "Seq Scan" for n in scans), mode
            claimed = await store.task_claim(
                ClaimRequest(
                    limit=10,
                    worker_id="w",
                    target_types=frozenset({TargetType.WORKER}),
                    tenant_id=tenant,
                    queue="q",
                )
            )
            assert len(claimed) == 10
        finally:
            await conn.close()


async def test_the_history_update_trigger_always_hash_joins(pg_url: str) -> None:
    """Its two transition tables have no statistics and the claim runs with enable_sort off:
    with a nested loop the http burst fell from ~12,600 to ~1,950 tasks/s (docs/benchmarks.md).
    Here, a 2,000-row status change in a claim-like transaction records every row, and the
    function carries the planner settings that keep the join a hash join."""
    store = PostgresStore(pg_url)
    await store.open()
    try:
        tenant = await store.tenant_create("acme")
        await store.task_create_many(
            [NewTask(tenant_id=tenant.id, target={"type": "worker"}) for _ in range(2000)]
        )
    finally:
        await store.close()
    conn = await pg_connect(pg_url)
    try:
        config = await conn.fetchval(
            "SELECT proconfig FROM pg_proc WHERE proname = 'history_tasks_updated'"
        )
        assert {"enable_nestloop=off", "enable_sort=on"} <= set(config)
        async with conn.transaction():
            await conn.execute("SET LOCAL enable_sort = off")
            await conn.execute("UPDATE tasks SET status = 'cancelled', updated_at = now()")
        recorded = await conn.fetchval(
            "SELECT count(*) FROM history_pending p CROSS JOIN LATERAL unnest(p.rows) AS h"
            " WHERE h.kind = 'task' AND h.to_status = 'cancelled'"
        )
        assert recorded == 2000
    finally:
        await conn.close()


# -- plans under an analyzed backlog (benchmarks/plan_backlog.py) -------------------------------

_BACKLOG = """
INSERT INTO tasks (id, tenant_id, queue, status, target_type, target, payload, retry,
                   timeout_seconds, run_at, due_at, created_at, updated_at, finished_at)
SELECT encode(overlay(uuid_send(gen_random_uuid()) PLACING
              substring(int8send(1700000000000 + $4 + i) FROM 3) FROM 1 FOR 6), 'hex')::uuid,
       $1, 'default', $2, 'worker', '{"type": "worker"}', '{}', '{}', 30, now(), now(), now(),
       now(), CASE WHEN $2 = 'cancelled' THEN now() END
FROM generate_series(1, $3::int) AS i
"""


@pytest.mark.parametrize(
    "statuses",
    [(), (TaskStatus.CANCELLED,), (TaskStatus.CANCELLED, TaskStatus.FAILED)],
    ids=["all", "cancelled", "cancelled+failed"],
)
async def test_a_listing_reads_a_page_in_id_order_under_an_analyzed_backlog(
    pg_url: str, statuses: tuple[TaskStatus, ...]
) -> None:
    """GET /v1/tasks with no status, one or several, under statistics that know of many tasks
    (a rare old status under 20,000 newer ready ones, and another tenant's newer ones in that
    status): each status asked for is one walk of tasks_tenant_status_idx backwards, stopping
    after a page, and only those pages are sorted. Not a walk of the primary key filtering out
    every newer task (the planner's pick here when the branches asked for `status = <it>`:
    25,000 rows for a page), nor of every task of a status (390 ms for a page of 20,000 under
    160,000 newer ones, against 1.5 ms). There is no (tenant_id, id) index since migration 0018;
    the store forces custom plans (plan_custom)."""
    async with _stores(pg_url, 1) as (store,):
        tenant = (await store.tenant_create("acme")).id
        other = (await store.tenant_create("other")).id
        conn = await pg_connect(pg_url)
        try:
            # Made in SQL: quicker. Ids grow with the last argument.
            await conn.execute(_BACKLOG, tenant, "cancelled", 1000, 0)
            await conn.execute(_BACKLOG, tenant, "failed", 30, 2000)
            await conn.execute(_BACKLOG, tenant, "ready", 20000, 4000)
            await conn.execute(_BACKLOG, other, "cancelled", 5000, 30000)
            await conn.execute("VACUUM ANALYZE tasks")  # as autovacuum would
            indexes = await conn.fetch("SELECT indexname FROM pg_indexes WHERE tablename = 'tasks'")
            assert "tasks_tenant_idx" not in {r["indexname"] for r in indexes}
            # What the store runs: task_list_status for one status, task_list otherwise.
            name, args = "task_list", {"tenant_id": f"'{tenant}'", "limit": "50"}
            if len(statuses) == 1:
                name, args["status"] = "task_list_status", f"'{statuses[0]}'"
            else:
                args["statuses"] = "'{" + ",".join(statuses) + "}'" if statuses else "NULL"
            args |= dict.fromkeys(
                (
                    "queue",
                    "name",
                    "schedule_id",
                    "labels",
                    "run_after",
                    "run_before",
                    "cursor",
                    "error_contains",
                    "payload_path",
                    "payload_json",
                ),
                "NULL",
            ) | dict.fromkeys(
                ("id_low",),  # no id prefix
                "NULL",
            )
            async with conn.transaction():
                plan = await explain(
                    conn, *statement(name, args), mode="force_custom_plan", analyze=True
                )
            wanted = [str(s) for s in statuses] or [str(s) for s in TaskStatus]
            scans = [n for n in plan_nodes(plan) if n.get("Relation Name") == "tasks"]
            assert len(scans) == len(wanted), json.dumps(plan)
            assert {n.get("Index Name") for n in scans} == {"tasks_tenant_status_idx"}
            assert rows_read(plan) <= len(wanted) * 50, json.dumps(plan)
            expected = await conn.fetch(
                "SELECT id::text FROM tasks WHERE tenant_id = $1 AND status = ANY($2::text[])"
                " ORDER BY id DESC",
                tenant,
                wanted,
            )
            pages: list[str] = []
            cursor = None
            while True:  # the whole listing, page after page, through the store
                page = await store.task_list(
                    TaskFilter(tenant_id=tenant, statuses=list(statuses), limit=700, cursor=cursor)
                )
                pages += [t.id for t in page]
                if len(page) < 700:
                    break
                cursor = page[-1].id
            assert pages == [r["id"] for r in expected]
        finally:
            await conn.close()


async def test_an_id_prefix_listing_reads_only_its_range_of_ids(pg_url: str) -> None:
    """GET /v1/tasks?id_prefix=...: each status branch scans only the prefix's range of ids
    (the core's bounds, both ends: in tasks_tenant_status_idx or the primary key, as the planner
    picks), never the backlog of 22,000 tasks; the store finds exactly the ids with that
    start."""
    async with _stores(pg_url, 1) as (store,):
        tenant = (await store.tenant_create("acme")).id
        conn = await pg_connect(pg_url)
        try:
            await conn.execute(_BACKLOG, tenant, "ready", 20000, 0)
            await conn.execute(_BACKLOG, tenant, "failed", 2000, 30000)
            await conn.execute("VACUUM ANALYZE tasks")
            ids = [r["id"] for r in await conn.fetch("SELECT id::text FROM tasks ORDER BY id")]
            prefix = ids[12345][:11]  # 10 hex digits: the ids of one millisecond or so
            bounds = id_prefix_range(prefix)
            assert bounds is not None and bounds[1] is not None
            args = {"tenant_id": f"'{tenant}'", "limit": "50", "statuses": "NULL"}
            args |= dict.fromkeys(
                (
                    "queue",
                    "name",
                    "schedule_id",
                    "labels",
                    "run_after",
                    "run_before",
                    "error_contains",
                    "payload_path",
                    "payload_json",
                ),
                "NULL",
            )
            # What the core passes: the prefix's lower end, and its upper end as the cursor.
            args |= {"id_low": f"'{bounds[0]}'", "cursor": f"'{bounds[1]}'"}
            async with conn.transaction():
                plan = await explain(
                    conn, *statement("task_list", args), mode="force_custom_plan", analyze=True
                )
            wanted = [i for i in ids if i.startswith(prefix)]
            scans = [n for n in plan_nodes(plan) if n.get("Relation Name") == "tasks"]
            assert len(scans) == len(TaskStatus), json.dumps(plan)
            for scan in scans:  # the range bounds the scan, whichever index the planner takes
                assert "id >=" in scan["Index Cond"] and "id <" in scan["Index Cond"]
            assert rows_read(plan) <= len(TaskStatus) * len(wanted) < len(ids) / 10
            found = await store.task_list(
                TaskFilter(tenant_id=tenant, id_prefix=prefix, limit=1000)
            )
            assert sorted(t.id for t in found) == wanted
        finally:
            await conn.close()


_DUE_SCHEDULES = """
INSERT INTO schedules (id, tenant_id, every, timezone, jitter_seconds, dst_nonexistent,
                       dst_ambiguous, task, overlap, catchup, catchup_window_seconds,
                       catchup_max_runs, anchor_at, next_run_at, materialized_until, created_at,
                       updated_at)
SELECT 'sch' || i, $1, '1h', 'UTC', 0, 'shift', 'first', '{"target": {"type": "worker"}}',
       CASE WHEN i % 2 = 0 THEN 'allow' ELSE 'skip' END, 'none', 0, 1, now() - interval '1 day',
       now() - interval '10 minutes' + i * interval '1 millisecond',
       now() - interval '10 minutes', now(), now()
FROM generate_series(1, $2) AS i
"""


async def test_a_materializer_round_reads_a_batch_under_an_analyzed_due_backlog(
    pg_url: str,
) -> None:
    """Statistics that know of thousands of due schedules must not make each materializer
    round read, join and sort all of them for a batch (26 ms for 100 of 20,000, then ~1 ms):
    both due indexes are walked in next_run_at order, each walk stopping at the batch."""
    async with _stores(pg_url, 1) as (store,):
        tenant = (await store.tenant_create("acme")).id
        conn = await pg_connect(pg_url)
        try:
            await conn.execute(_DUE_SCHEDULES, tenant, 4000)
            await conn.execute("ANALYZE schedules")  # "4,000 schedules are due"
            args = {"at": "now()", "horizon": "now() + interval '1 minute'", "limit": "10"}
            for mode in ("force_custom_plan", "force_generic_plan"):
                plan = await explain(conn, *statement("schedule_due", args), mode=mode)
                nodes = plan_nodes(plan)
                due = {"schedules_due_ahead_idx", "schedules_due_now_idx"}
                assert due <= index_names(plan), mode
                # Each walk stops at the round's batch: the index scan is under its Limit.
                for parent in nodes:
                    for child in parent.get("Plans", []):
                        if child.get("Index Name") in due:
                            assert parent["Node Type"] == "Limit", f"{mode}: {parent}"
                scans = [n for n in nodes if n.get("Relation Name") == "schedules"]
                assert all(n["Node Type"] != "Seq Scan" for n in scans), mode
        finally:
            await conn.close()


async def test_a_retention_sweep_does_not_read_every_schedule(pg_url: str) -> None:
    """Whether a finished task is still a schedule's last occurrence is asked of its own
    schedule by primary key, not by reading every schedule for each sweep (a sweep of 500: 38 ms
    with 100,000 schedules, 13 ms without): no sequential scan of schedules in either plan, and
    the sweep still deletes."""
    async with _stores(pg_url, 1) as (store,):
        tenant = (await store.tenant_create("acme")).id
        await store.task_create_many(
            [NewTask(tenant_id=tenant, target=WORKER) for _ in range(1000)]
        )
        conn = await pg_connect(pg_url)
        try:
            await conn.execute(_DUE_SCHEDULES, tenant, 3000)
            await conn.execute(
                "UPDATE tasks SET status = 'succeeded', finished_at = now() - interval '30 days'"
            )
            await conn.execute("ANALYZE")
            week = str(7 * 86400.0)
            args = {"succeeded": week, "failed": week, "cancelled": week, "limit": "100"}
            for mode in ("force_custom_plan", "force_generic_plan"):
                plan = await explain(conn, *statement("task_retention_sweep", args), mode=mode)
                nodes = plan_nodes(plan)
                scans = [n for n in nodes if n.get("Relation Name") == "schedules"]
                assert scans and all(n["Node Type"] != "Seq Scan" for n in scans), mode
                assert "tasks_finished_idx" in index_names(plan), mode
            week_policy = RetentionPolicy(succeeded=7 * 86400, failed=7 * 86400)
            assert await store.task_retention_sweep(week_policy, 100) == 100
        finally:
            await conn.close()


async def test_a_limited_claim_counts_its_own_queues_running_tasks(pg_url: str) -> None:
    """A limited queue's room (max_concurrency, and max_concurrency_per_key by key) is counted
    from the queue's own running tasks (tasks_running_queue_idx), not from every running task of
    the tenant (16 ms a claim with 100,000 running in another queue, against 0.6 ms): under
    statistics that know of thousands running elsewhere, neither plan of either claim reads the
    tenant's tasks by status, and the limit still holds."""
    async with _stores(pg_url, 1) as (store,):
        tenant = (await store.tenant_create("acme")).id
        await store.task_create_many(
            [NewTask(tenant_id=tenant, target=WORKER, queue="busy") for _ in range(3000)]
        )
        only = frozenset({TargetType.WORKER})
        busy = ClaimRequest(
            worker_id="w", limit=1000, target_types=only, tenant_id=tenant, queue="busy"
        )
        for _ in range(3):
            assert len(await store.task_claim(busy)) == 1000
        await store.queue_put(tenant, "lim", QueueSettings(max_concurrency=2))
        await store.queue_put(tenant, "keyed", QueueSettings(max_concurrency_per_key=1))
        conn = await pg_connect(pg_url)
        try:
            await conn.execute(_BACKLOG, tenant, "cancelled", 20000, 0)  # and a history
            await conn.execute("ANALYZE tasks")  # "3,000 tasks of the tenant are running"
            args = {"names": "NULL", "limit": "10", "lease_seconds": "NULL"}
            args |= {"grace_seconds": "10", "worker_id": "'w'", "types": "'{worker}'"}
            args |= {"tenant_id": f"'{tenant}'", "max_concurrency": "2", "per_key": "1"}
            for name, queue in {
                "task_claim_keyed": "'keyed'",
                "task_claim_limited_worker": "'lim'",
            }.items():
                plans = {}
                for mode in ("force_custom_plan", "force_generic_plan"):
                    async with conn.transaction():  # as the store runs the keyed claim
                        await conn.execute("SET LOCAL enable_sort = off")
                        plans[mode] = await explain(
                            conn, *statement(name, args | {"queue": queue}), mode=mode
                        )
                for mode, plan in plans.items():
                    used = index_names(plan)
                    assert "tasks_tenant_status_idx" not in used, f"{name} {mode}: {used}"
                    # The keyed claim forces its generic plan (claim_keyed_plan); the others'
                    # is never chosen when it costs more than their custom plans.
                    kept = plans["force_custom_plan"]["Total Cost"] * 2 >= plan["Total Cost"]
                    if mode == "force_custom_plan" or name == "task_claim_keyed" or kept:
                        assert "tasks_running_queue_idx" in used, f"{name} {mode}: {used}"
            await store.task_create_many(
                [NewTask(tenant_id=tenant, target=WORKER, queue="lim") for _ in range(5)]
            )
            lim = dataclasses.replace(busy, limit=10, queue="lim")
            assert len(await store.task_claim(lim)) == 2
            assert await store.task_claim(lim) == []
        finally:
            await conn.close()


_HISTORY_BACKLOG = """
INSERT INTO history (at, tenant_id, kind, task_id, name, queue, to_status, actor)
SELECT timestamptz '2026-01-01' + (i % 600) * interval '1 hour', 't' || (i % 3),
       'task', gen_random_uuid(), CASE WHEN i % 7 = 0 THEN NULL ELSE 'n' || (i % 20) END,
       'default', 'ready', 'node'
FROM generate_series(1, $1::int) AS i
"""


async def test_history_reads_walk_the_ascending_indexes_in_order(pg_url: str) -> None:
    """Migration 0017 builds history_tenant_idx, history_name_idx and tasks_tenant_status_idx
    ascending: a tenant's history newest first reads history_tenant_idx backwards, one name's
    history_name_idx backwards, and every page of the month export reads history_name_idx
    forwards from where the last one ended — none of them sorts what it read of the history table
    (the history reads merge the few pending records in, sorted on their own)."""
    async with _stores(pg_url, 1) as _:
        conn = await pg_connect(pg_url)
        try:
            await conn.execute(_HISTORY_BACKLOG, 30000)
            await conn.execute("VACUUM ANALYZE history")
            month = {
                "lo": "'2026-01-01'::timestamptz",
                "hi": "'2026-02-01'::timestamptz",
                "limit": "20",
            }
            named = {"tenant_id": "'t1'", "name": "'n5'", "at": "'2026-01-02'", "id": "10"}
            pages = {
                "history_month_first": month,
                "history_month_group": month | named,
                "history_month_after": month | named,
                "history_month_after_null": month | {"tenant_id": "'t1'"},
                "history_month_group_null": month | named | {"name": "NULL"},
            }
            query = dict.fromkeys(
                [
                    "task_id",
                    "schedule_id",
                    "name",
                    "queue",
                    "kinds",
                    "outcomes",
                    "labels",
                    "since",
                    "until",
                    "cursor_at",
                    "cursor_id",
                ],
                "NULL",
            ) | {"tenant_id": "'t1'", "limit": "50"}
            reads = {
                "history_query": query,
                "history_query by name": query | {"name": "'n5'"},
                "history_query after a cursor": query
                | {"cursor_at": "'2026-01-10'", "cursor_id": "5"},
            }
            tenant_index, name_index = "tenant_id_at_id_idx", "tenant_id_name_at_id_idx"
            wanted = dict.fromkeys(pages, name_index) | dict.fromkeys(reads, tenant_index)
            wanted["history_query by name"] = name_index
            # An unnamed group may be read through either index (the planner's pick), in order.
            del wanted["history_month_group_null"]
            for label, args in (pages | reads).items():
                name = label.split(" ")[0]
                plan = await explain(conn, *statement(name, args), mode="force_custom_plan")
                used = index_names(plan)
                # The only sort allowed is of the pending records (migration 0019), merged with
                # the index walk: nothing read from the history table is sorted.
                sorted_ = [n for n in plan_nodes(plan) if n["Node Type"] == "Sort"]
                scanned = {r.get("Relation Name") for n in sorted_ for r in plan_nodes(n)}
                assert scanned <= {None, "history_pending"}, (label, used)
                if label in wanted:
                    assert any(i.endswith(wanted[label]) for i in used), (label, used)
        finally:
            await conn.close()
