"""What only the SQLite store has: a file on disk, WAL, in-process signals, crash safety.

The shared contracts are checked by the conformance suite (``test_conformance.py``); these tests
cover the embedded backend's own promises. Every test uses a real database file under ``tmp_path``.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sqlite3
import sys
import textwrap
import threading
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest

from duetime.clock import FakeClock
from duetime.errors import ConfigError, StoreUnavailable
from duetime.store import store_from_url
from duetime.store.sql import parse
from duetime.store.sqlite import hot
from duetime.store.sqlite.backend import SqliteStore
from duetime.store.sqlite.driver import split_statements
from duetime.store.sqlite.queries import QUERIES
from duetime.types import ClaimRequest, NewTask, TargetType, TaskFilter, TaskStatus

WORKER = {"type": "worker"}


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "nested" / "deeper" / "duetime.db"


@pytest.fixture
async def sqlite_store(db_path: Path, clock: FakeClock) -> AsyncIterator[SqliteStore]:
    s = SqliteStore(db_path, clock=clock)
    await s.open()
    await s.migrate()
    try:
        yield s
    finally:
        await s.close()


# -- the file ----------------------------------------------------------------------------------


async def test_open_creates_the_directory_and_the_file(db_path: Path) -> None:
    assert not db_path.parent.exists()
    store = SqliteStore(db_path)
    await store.open()
    try:
        assert await asyncio.to_thread(db_path.parent.is_dir)
        assert await asyncio.to_thread(db_path.is_file)
        pending = await store.migrations_pending()
        assert pending[0] == "0001_init"  # open() does not migrate
    finally:
        await store.close()


async def test_store_from_url_builds_a_sqlite_store(tmp_path: Path) -> None:
    store = store_from_url(f"sqlite:///{tmp_path / 'a.db'}")
    assert isinstance(store, SqliteStore)
    assert store.path == tmp_path / "a.db"


async def test_data_survives_close_and_reopen(db_path: Path, clock: FakeClock) -> None:
    first = SqliteStore(db_path, clock=clock)
    await first.open()
    await first.migrate()
    tenant = await first.tenant_create("acme")
    (made,) = await first.task_create_many(
        [NewTask(tenant_id=tenant.id, target=WORKER, payload_json='{"n": 1}', labels={"k": "v"})]
    )
    await first.close()

    second = SqliteStore(db_path, clock=clock)
    await second.open()
    try:
        assert await second.migrations_pending() == []
        assert await second.tenant_get(tenant.id) == tenant
        assert await second.task_get(tenant.id, made.task.id) == made.task
    finally:
        await second.close()


async def test_wal_mode_is_on(sqlite_store: SqliteStore, db_path: Path) -> None:
    await sqlite_store.ping()
    # journal_mode=WAL is persistent: any other connection to the file sees it.
    other = sqlite3.connect(db_path)
    try:
        assert other.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        other.close()


async def test_unknown_synchronous_level_is_a_config_error(db_path: Path) -> None:
    with pytest.raises(ConfigError, match="synchronous"):
        SqliteStore(db_path, synchronous="SOMETIMES")
    SqliteStore(db_path, synchronous="normal")  # case-insensitive


async def test_unopenable_paths_raise_store_unavailable(tmp_path: Path) -> None:
    a_file = tmp_path / "plain-file"
    a_file.write_text("not a directory")
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not an SQLite database, just bytes " * 200)
    for path in (a_file / "duetime.db", tmp_path, garbage):
        store = SqliteStore(path)
        with pytest.raises(StoreUnavailable) as raised:
            await store.open()
        assert str(path) in raised.value.detail
        await store.close()


async def test_calls_on_a_closed_or_unmigrated_store_raise_store_unavailable(
    db_path: Path,
) -> None:
    store = SqliteStore(db_path)
    with pytest.raises(StoreUnavailable, match="not open"):
        await store.ping()
    await store.open()
    try:
        with pytest.raises(StoreUnavailable, match="migrate"):
            await store.task_get("t", "00000000-0000-4000-8000-000000000000")
    finally:
        await store.close()
    with pytest.raises(StoreUnavailable):
        await store.tenant_get("t")


async def test_two_stores_on_one_file_see_each_other(
    sqlite_store: SqliteStore, db_path: Path
) -> None:
    """A second process-like handle (the CLI next to a server) reads and writes the same file;
    concurrent writers serialize on the write lock instead of failing."""
    other = SqliteStore(db_path)
    await other.open()
    try:
        tenant = await other.tenant_create("from-the-cli")
        assert await sqlite_store.tenant_get(tenant.id) == tenant
        batches = [[NewTask(tenant_id=tenant.id, target=WORKER)] * 50 for _ in range(4)]
        await asyncio.gather(
            *(
                s.task_create_many(b)
                for s, b in zip([sqlite_store, other] * 2, batches, strict=True)
            )
        )
        listed = await sqlite_store.task_list(TaskFilter(tenant_id=tenant.id, limit=1000))
        assert len(listed) == 200
    finally:
        await other.close()


# -- signals -----------------------------------------------------------------------------------


async def test_ready_signal_wakes_a_waiter_on_create(sqlite_store: SqliteStore) -> None:
    """A ready push task wakes the dispatcher's wait; a ready worker task only the long polls'
    wait_after (no dispatcher claims it)."""
    signal = sqlite_store.ready_signal
    while await signal.wait(0):  # start quiet
        pass
    waiter = asyncio.create_task(signal.wait(5.0))
    polls = asyncio.create_task(signal.wait_after(signal.generation, 5.0))
    await asyncio.sleep(0.01)
    assert not waiter.done() and not polls.done()
    await sqlite_store.task_create_many([NewTask(tenant_id="t", target=WORKER)])
    assert await asyncio.wait_for(polls, 5.0) is True
    await asyncio.sleep(0.05)
    assert not waiter.done(), "a worker task woke the dispatcher"
    http = {"type": "http", "url": "https://example.com/hook", "method": "POST", "headers": {}}
    await sqlite_store.task_create_many([NewTask(tenant_id="t", target=http)])
    assert await asyncio.wait_for(waiter, 5.0) is True


async def test_due_signal_fires_for_a_future_task(
    sqlite_store: SqliteStore, clock: FakeClock
) -> None:
    while await sqlite_store.due_signal.wait(0):
        pass
    waiter = asyncio.create_task(sqlite_store.due_signal.wait(5.0))
    await asyncio.sleep(0)
    # run_at == now is due at once: that wakes ready_signal, not due_signal.
    await sqlite_store.task_create_many([NewTask(tenant_id="t", target=WORKER, run_at=clock.now())])
    await asyncio.sleep(0.01)
    assert not waiter.done()
    await sqlite_store.task_create_many(
        [NewTask(tenant_id="t", target=WORKER, run_at=clock.now() + timedelta(minutes=5))]
    )
    assert await asyncio.wait_for(waiter, 5.0) is True


async def test_signal_notified_from_another_thread_wakes_the_waiter(
    sqlite_store: SqliteStore,
) -> None:
    while await sqlite_store.ready_signal.wait(0):
        pass
    waiter = asyncio.create_task(sqlite_store.ready_signal.wait(5.0))
    await asyncio.sleep(0.01)
    thread = threading.Thread(target=sqlite_store.ready_signal.notify)
    thread.start()
    thread.join()
    assert await asyncio.wait_for(waiter, 5.0) is True


async def test_a_notification_without_waiter_is_kept_for_the_next_wait(
    sqlite_store: SqliteStore,
) -> None:
    while await sqlite_store.ready_signal.wait(0):
        pass
    sqlite_store.ready_signal.notify()
    sqlite_store.ready_signal.notify()  # coalesces
    assert await sqlite_store.ready_signal.wait(5.0) is True  # at once: it is pending
    assert await sqlite_store.ready_signal.wait(0.05) is False


# -- durability ----------------------------------------------------------------------------------

_WRITER = textwrap.dedent(
    """
    import asyncio, os, signal, sys, time
    from pathlib import Path
    from duetime.store.sqlite.backend import SqliteStore
    from duetime.types import NewTask

    async def main() -> None:
        store = SqliteStore(Path(sys.argv[1]))
        await store.open()
        (made,) = await store.task_create_many(
            [NewTask(tenant_id="t", target={"type": "worker"}, idempotency_key="crash-1")]
        )
        print(made.task.id, flush=True)
        if sys.argv[2] == "exit":
            os._exit(0)  # no close(), no checkpoint, no interpreter shutdown
        time.sleep(60)  # wait here for SIGKILL, connection open, WAL not checkpointed

    asyncio.run(main())
    """
)


@pytest.mark.parametrize("how", ["exit", "sigkill"])
async def test_a_committed_task_survives_a_crash(db_path: Path, how: str) -> None:
    """A subprocess commits a task and dies without closing (os._exit, or SIGKILL while its
    connection is open and the WAL not checkpointed); the task is there on reopen."""
    setup = SqliteStore(db_path)
    await setup.open()
    await setup.migrate()
    await setup.close()  # the writer is the only connection when it dies
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _WRITER, str(db_path), how, stdout=asyncio.subprocess.PIPE
    )
    try:
        assert proc.stdout is not None
        task_id = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode().strip()
        assert task_id, "the writer printed no task id"
        if how == "sigkill":
            os.kill(proc.pid, signal.SIGKILL)
        returncode = await asyncio.wait_for(proc.wait(), 30)
        assert returncode == (0 if how == "exit" else -signal.SIGKILL)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    reopened = SqliteStore(db_path)
    await reopened.open()
    try:
        task = await reopened.task_get("t", task_id)
        assert task is not None and task.status is TaskStatus.READY
        assert task.idempotency_key == "crash-1"
    finally:
        await reopened.close()


# -- internals worth pinning down ----------------------------------------------------------------


async def test_unique_violation_on_create_becomes_an_idempotent_hit(
    sqlite_store: SqliteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Should the idempotency lookup miss a row (a race), the unique index fires and the batch is
    re-run, finding the winner: the caller sees an idempotent hit, not an error."""
    (first,) = await sqlite_store.task_create_many(
        [NewTask(tenant_id="t", target=WORKER, idempotency_key="k")]
    )
    real = hot._existing_by_idempotency_key
    calls = []

    def blind_once(conn: sqlite3.Connection, tasks: object) -> object:
        calls.append(1)
        return {} if len(calls) == 1 else real(conn, tasks)  # type: ignore[arg-type]

    monkeypatch.setattr(hot, "_existing_by_idempotency_key", blind_once)
    (again,) = await sqlite_store.task_create_many(
        [NewTask(tenant_id="t", target=WORKER, idempotency_key="k")]
    )
    assert len(calls) == 2
    assert again.created is False and again.task == first.task


async def test_label_filter_accepts_any_key_text(sqlite_store: SqliteStore) -> None:
    odd = {'a"b': "1", "x.y": "2", "$[0]": "3", "ünï": "4", "": "5"}
    (match,) = await sqlite_store.task_create_many(
        [NewTask(tenant_id="t", target=WORKER, labels=odd)]
    )
    await sqlite_store.task_create_many(
        [NewTask(tenant_id="t", target=WORKER, labels={"x.y": "9"})]
    )
    for key, value in odd.items():
        found = await sqlite_store.task_list(TaskFilter(tenant_id="t", labels={key: value}))
        assert [t.id for t in found] == [match.task.id], key
    found = await sqlite_store.task_list(TaskFilter(tenant_id="t", labels=odd))
    assert [t.id for t in found] == [match.task.id]
    assert await sqlite_store.task_list(TaskFilter(tenant_id="t", labels={'a"b': "2"})) == []


async def test_a_limited_claim_counts_its_own_queues_running_tasks(
    sqlite_store: SqliteStore, db_path: Path
) -> None:
    """The running counts of a limited queue's claim (``queue_running``) and of a keyed one
    (``task_claim_keyed``) read the queue's own running tasks (tasks_running_queue), not every
    running task of the tenant, also with statistics that know of thousands running elsewhere."""
    await sqlite_store.task_create_many(
        [NewTask(tenant_id="default", target={"type": "worker"}, queue="busy")] * 2000
    )
    only = frozenset({TargetType.WORKER})
    busy = ClaimRequest(
        worker_id="w", limit=1000, target_types=only, tenant_id="default", queue="busy"
    )
    for _ in range(2):
        claimed = await sqlite_store.task_claim(busy)
        assert len(claimed) == 1000
    conn = sqlite3.connect(db_path)
    conn.create_function("duetime_uuid", 0, lambda: "", deterministic=False)  # as the store's
    try:
        conn.execute("ANALYZE")
        args = {"tenant_id": "default", "queue": "lim", "types": '["worker"]', "limit": 10}
        args |= {"per_key": 1, "worker_id": "w", "now": 0}
        for name in ("queue_running", "task_claim_keyed"):
            text = hot.Q[name]
            wanted = {k: args.get(k) for k in re.findall(r":([a-z_]+)", text)}  # others NULL
            plan = conn.execute(f"EXPLAIN QUERY PLAN {text}", wanted).fetchall()
            details = " | ".join(row[-1] for row in plan)
            assert "tasks_running_queue" in details, f"{name}: {details}"
    finally:
        conn.close()


def test_named_queries_load_and_reject_duplicates() -> None:
    assert "begin_immediate" in QUERIES and "commit" in QUERIES
    assert all(not sql.rstrip().endswith("--") and sql.strip() for sql in QUERIES.values())
    parsed = parse("-- name: a\nSELECT 1;\n-- says b\n-- name: b\nSELECT 2;\n", "sqlite")
    assert {name: q.text for name, q in parsed.items()} == {"a": "SELECT 1;", "b": "SELECT 2;"}
    with pytest.raises(ValueError, match="twice"):
        parse("-- name: a\nSELECT 1;\n-- name: a\nSELECT 2;\n", "sqlite")


def test_migration_scripts_split_into_statements() -> None:
    script = (
        "-- header; with a semicolon\nCREATE TABLE t (x TEXT DEFAULT ';');\n"
        "CREATE TRIGGER tr AFTER INSERT ON t BEGIN SELECT 1; SELECT 2; END;\n-- trailing\n"
    )
    statements = split_statements(script)
    assert len(statements) == 2
    assert statements[1].startswith("CREATE TRIGGER") and statements[1].endswith("END;")
    with pytest.raises(ValueError, match="incomplete"):
        split_statements("CREATE TABLE u (x)")
