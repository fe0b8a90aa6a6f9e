"""The cold tier on both stores, with the test's FakeClock: months past the hot window are
exported to Parquet, verified and removed from the store; queries span the tier boundary; a
node that dies in the middle of an export, or between the export and the removal, loses and
duplicates nothing; tenants never see each other's history."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

pytest.importorskip("pyarrow")

from duetime.clock import FakeClock
from duetime.engine.history import HistoryConfig, HistoryMaintenance
from duetime.engine.leader import Leader
from duetime.history import archive as archive_mod
from duetime.history.archive import Archive
from duetime.history.events import HistoryEvent, HistoryFilter
from duetime.history.partitions import month_of, months_ahead
from duetime.history.query import history_attempts, history_page
from duetime.history.retention import ArchiveFailed, RetentionPolicy
from duetime.store import Store
from duetime.types import (
    AttemptOutcome,
    ClaimRequest,
    Completion,
    NewTask,
    TargetType,
    TaskStatus,
)

JAN = datetime(2030, 1, 10, tzinfo=UTC)
MAR = datetime(2030, 3, 20, tzinfo=UTC)
DAY = 86400.0
LOGS = "step 1 ok\n\tstep 2: boom\n"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(JAN)


async def fail_tasks(store: Store, clock: FakeClock, tenant: str, n: int, name: str) -> list[str]:
    made = await store.task_create_many(
        [NewTask(tenant_id=tenant, target={"type": "worker"}, name=name) for _ in range(n)]
    )
    leases = await store.task_claim(
        ClaimRequest(
            worker_id="w", limit=n, tenant_id=tenant, target_types=frozenset({TargetType.WORKER})
        )
    )
    await store.task_complete_many(
        [
            Completion(
                task_id=lease.task.id, lease_id=lease.lease_id, outcome=AttemptOutcome.FAILED,
                started_at=clock.now(), duration_ms=3.0, error="boom", http_status=500,
                retry_delay_seconds=None, worker="w", logs=LOGS, response="upstream said no",
                status=TaskStatus.FAILED,
            )
            for lease in leases
        ]
    )  # fmt: skip
    return [m.task.id for m in made]


async def everything(store: Store, cold: Archive, tenant: str, page: int = 3) -> list[HistoryEvent]:
    """Every record of the tenant over both tiers, walked page by page with the cursor."""
    found: list[HistoryEvent] = []
    cursor = None
    while True:
        query = HistoryFilter(tenant_id=tenant, limit=page + 1, cursor=cursor)
        got = await history_page(store, cold, query)
        found += got[:page]
        if len(got) <= page:
            return found
        cursor = (got[page - 1].at, got[page - 1].id)


def service(store: Store, clock: FakeClock, cold: Archive) -> tuple[HistoryMaintenance, Leader]:
    leader = Leader(store, "node-a", ttl_seconds=10, clock=clock)
    leader.is_leader = True
    config = HistoryConfig(
        defaults=RetentionPolicy(7 * DAY, 7 * DAY, 7 * DAY), hot_days=30, export_batch=2
    )
    return HistoryMaintenance(store, leader, clock, config, cold), leader


async def test_export_spans_tiers_and_isolates_tenants(
    store: Store, clock: FakeClock, tmp_path: Path
) -> None:
    cold = Archive(str(tmp_path / "archive"))
    a = (await store.tenant_create("a")).id
    b = (await store.tenant_create("b")).id
    jan_tasks = await fail_tasks(store, clock, a, 3, "report")
    await fail_tasks(store, clock, b, 2, "report")
    before_a = await everything(store, cold, a)
    before_b = await everything(store, cold, b)
    assert len(before_a) == 3 * 4  # created, running, failed, attempt

    clock.set(MAR)
    await fail_tasks(store, clock, a, 1, "report")
    maintenance, _ = service(store, clock, cold)
    assert await maintenance.run_once() >= 1

    # January left the store: the hot tier alone no longer has it ...
    assert month_of(JAN) not in await store.history_months()
    hot_only = await store.history_query(HistoryFilter(tenant_id=a, until=MAR - timedelta(days=1)))
    assert hot_only == []
    manifest = await cold.manifest(month_of(JAN))
    assert manifest is not None and manifest["tenants"] == {a: 12, b: 8}

    # ... but a query over both tiers answers as before, across the boundary, page by page.
    after_a = await everything(store, cold, a)
    assert [e.id for e in after_a[-12:]] == [e.id for e in before_a]
    assert len(after_a) == 12 + 4
    assert [(e.at, e.id) for e in after_a] == sorted(((e.at, e.id) for e in after_a), reverse=True)
    assert [e.id for e in await everything(store, cold, b)] == [e.id for e in before_b]

    # The SPEC §6 query shape: failed attempts of one name in a time range, from the archive.
    week = HistoryFilter(
        tenant_id=a, name="report", kinds=("attempt",), outcomes=("failed",),
        since=JAN - timedelta(days=3), until=JAN + timedelta(days=4),
    )  # fmt: skip
    found = await history_page(store, cold, week)
    assert len(found) == 3 and all(e.error == "boom" and e.http_status == 500 for e in found)
    # Archived attempts keep the worker's logs and the answer's start.
    assert all((e.logs, e.response) == (LOGS, "upstream said no") for e in found)

    # Tenant isolation in the cold tier: another tenant's filter sees none of a's records.
    assert await history_page(store, cold, HistoryFilter(tenant_id=b, task_id=jan_tasks[0])) == []
    assert await history_page(store, cold, HistoryFilter(tenant_id="nobody")) == []

    # A January task retired by retention still answers for its attempts (from the archive).
    assert await store.task_get(a, jan_tasks[0]) is None  # failed 69 days ago, 7-day retention
    attempts = await history_attempts(store, a, jan_tasks[0], cold)
    assert [(x.number, x.outcome, x.worker) for x in attempts] == [(1, AttemptOutcome.FAILED, "w")]
    assert [(x.logs, x.response) for x in attempts] == [(LOGS, "upstream said no")]


async def test_crash_in_the_middle_of_an_export(
    store: Store, clock: FakeClock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cold = Archive(str(tmp_path / "archive"))
    tenants = [(await store.tenant_create(f"t{i}")).id for i in range(3)]
    for tenant in tenants:
        await fail_tasks(store, clock, tenant, 2, "x")
    before = {t: [e.id for e in await everything(store, cold, t)] for t in tenants}
    clock.set(MAR)
    maintenance, _ = service(store, clock, cold)

    # The node dies after the first tenant's file is in place, before the others and the
    # manifest: the month stays hot, and reads still see every record exactly once.
    real_close = archive_mod._TenantWriter.close
    closed: list[str] = []

    def dying_close(self: archive_mod._TenantWriter) -> None:
        if closed:
            raise OSError("node killed mid-export")
        real_close(self)
        closed.append(self.tenant_id)

    monkeypatch.setattr(archive_mod._TenantWriter, "close", dying_close)
    with pytest.raises(OSError):
        await maintenance.run_once()
    assert len(closed) == 1
    assert await cold.manifest(month_of(JAN)) is None
    assert month_of(JAN) in await store.history_months()
    assert {t: [e.id for e in await everything(store, cold, t)] for t in tenants} == before
    leftovers = [p.name for p in (tmp_path / "archive").rglob("*.tmp-*")]
    assert leftovers == [], "an aborted file is never left half-written in place"

    # The next round (another leader, or the same after restart) finishes the job.
    monkeypatch.setattr(archive_mod._TenantWriter, "close", real_close)
    await maintenance.run_once()
    assert month_of(JAN) not in await store.history_months()
    assert {t: [e.id for e in await everything(store, cold, t)] for t in tenants} == before


async def test_crash_between_export_and_drop(
    store: Store, clock: FakeClock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cold = Archive(str(tmp_path / "archive"))
    tenant = (await store.tenant_create("t")).id
    await fail_tasks(store, clock, tenant, 2, "x")
    before = [e.id for e in await everything(store, cold, tenant)]
    clock.set(MAR)
    maintenance, _ = service(store, clock, cold)

    real_drop = type(store).history_month_drop

    async def dying_drop(self: Store, month: object) -> bool:
        raise OSError("node killed before the drop")

    monkeypatch.setattr(type(store), "history_month_drop", dying_drop)
    with pytest.raises(OSError):
        await maintenance.run_once()
    # Sealed in the archive and still hot: the merge shows each record once.
    assert await cold.manifest(month_of(JAN)) is not None
    assert [e.id for e in await everything(store, cold, tenant)] == before

    monkeypatch.setattr(type(store), "history_month_drop", real_drop)
    written = (tmp_path / "archive").rglob("history.parquet")
    stamps = {p: p.stat().st_mtime_ns for p in written}
    await maintenance.run_once()
    assert month_of(JAN) not in await store.history_months()
    assert {p: p.stat().st_mtime_ns for p in stamps} == stamps, "a sealed month is not rewritten"
    assert [e.id for e in await everything(store, cold, tenant)] == before


async def test_partitions_are_made_ahead(store: Store, clock: FakeClock, tmp_path: Path) -> None:
    maintenance, _ = service(store, clock, Archive(str(tmp_path / "archive")))
    await maintenance.run_once()
    months = await store.history_months()
    if type(store).__name__ == "PostgresStore":
        assert months[-3:] == [month_of(JAN), month_of(JAN + timedelta(days=31)),
                               month_of(JAN + timedelta(days=59))]  # fmt: skip
    else:
        assert months == []  # SQLite: no partitions, and no records yet


async def test_retired_tasks_are_archived_before_they_leave(
    store: Store, clock: FakeClock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cold = Archive(str(tmp_path / "archive"))
    tenant = (await store.tenant_create("t")).id
    ids = await fail_tasks(store, clock, tenant, 3, "x")
    clock.advance(8 * DAY)  # past the 7-day retention, inside the hot window
    maintenance, _ = service(store, clock, cold)

    # The archive cannot be written: the sweep deletes nothing.
    def broken(self: Archive, rows: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(Archive, "tasks_write", broken)
    with pytest.raises(ArchiveFailed, match="disk full"):
        await maintenance.run_once()
    for task_id in ids:
        assert await store.task_get(tenant, task_id) is not None
    monkeypatch.undo()

    assert await maintenance.run_once() == 3
    for task_id in ids:
        assert await store.task_get(tenant, task_id) is None
    kept = await asyncio.to_thread(cold.tasks_read, tenant)
    assert sorted(kept) == sorted(ids)
    doc = kept[ids[0]]
    assert doc["status"] == "failed" and doc["name"] == "x" and doc["last_error"] == "boom"
    assert doc["finished_at"].startswith("2030-01-10")
    assert await asyncio.to_thread(cold.tasks_read, "someone-else") == {}


async def test_archive_files_without_logs_columns_read_them_as_null(tmp_path: Path) -> None:
    """A month archived in a schema without the ``logs`` and ``response`` columns still answers:
    they are null, every other column as written."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    cold = Archive(str(tmp_path / "archive"))
    narrow = pa.schema([f for f in archive_mod.SCHEMA if f.name not in ("logs", "response")])
    row = {name: None for name in narrow.names} | {
        "at": JAN, "id": 7, "tenant_id": "t", "kind": "attempt", "task_id": "task-1",
        "name": "report", "attempt": 1, "outcome": "failed", "error": "boom", "worker": "w",
        "started_at": JAN,
    }  # fmt: skip
    path = Path(cold.file_path("t", month_of(JAN)))
    path.parent.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist([row], schema=narrow), path)
    (event,) = await cold.query(HistoryFilter(tenant_id="t", task_id="task-1"))
    assert (event.error, event.worker, event.logs, event.response) == ("boom", "w", None, None)
    (attempt,) = await cold.attempts("t", "task-1")
    assert (attempt.number, attempt.error, attempt.logs) == (1, "boom", None)


async def test_the_leader_makes_partitions_ahead_without_an_archive(
    store: Store, clock: FakeClock
) -> None:
    """No cold tier (PostgreSQL without DUETIME_ARCHIVE_URL): the hot tier still gets its
    months ahead, so history does not pile up in the default partition."""
    clock.advance((MAR - JAN).total_seconds())  # months no migration has made
    leader = Leader(store, "node-a", ttl_seconds=10, clock=clock)
    assert await leader.run_once() == 1
    config = HistoryConfig(defaults=RetentionPolicy(DAY, DAY, DAY))
    await HistoryMaintenance(store, leader, clock, config, None).run_once()
    assert await store.history_partitions_ensure(months_ahead(await store.now())) == 0


@pytest.mark.parametrize("batch", [1, 2, 5, 1000])
async def test_month_rows_pages_group_every_record_once(
    store: Store, clock: FakeClock, batch: int
) -> None:
    # Two tenants, named and unnamed tasks, records sharing an instant (the FakeClock stands
    # still): pages of any size give each record once, each (tenant, name) group whole and in
    # time order (the Parquet files' order; PostgreSQL pages by keys, SQLite too).
    for tenant_name in ("a", "b"):
        tenant = (await store.tenant_create(tenant_name)).id
        for name, n in (("report", 2), (None, 2), ("backup", 1)):
            await fail_tasks(store, clock, tenant, n, name)  # type: ignore[arg-type]
    expected = sum((await store.history_month_counts(month_of(JAN))).values())
    pages = [page async for page in store.history_month_rows(month_of(JAN), batch)]
    assert all(0 < len(page) <= batch for page in pages)
    rows = [row for page in pages for row in page]
    assert len(rows) == expected == 2 * 5 * 4
    assert len({row["id"] for row in rows}) == len(rows)
    groups: list[tuple[str, str | None]] = []
    for row in rows:
        key = (row["tenant_id"], row["name"])
        if not groups or groups[-1] != key:
            assert key not in groups, f"{key} is split: {groups}"
            groups.append(key)
    assert len(groups) == 6
    tenants = [g[0] for g in groups]  # each tenant's groups together
    assert tenants == [tenants[0]] * 3 + [tenants[3]] * 3 and tenants[0] != tenants[3]
    for key in groups:
        times = [(r["at"], r["id"]) for r in rows if (r["tenant_id"], r["name"]) == key]
        assert times == sorted(times)


async def test_the_round_waits_while_the_hot_path_is_busy(
    store: Store, clock: FakeClock, tmp_path: Path
) -> None:
    a = (await store.tenant_create("a")).id
    await fail_tasks(store, clock, a, 3, "report")  # 12 records: 6 export batches of 2
    clock.set(MAR)
    leader = Leader(store, "node-a", ttl_seconds=10, clock=clock)
    leader.is_leader = True
    config = HistoryConfig(
        defaults=RetentionPolicy(700 * DAY, 700 * DAY, 700 * DAY), hot_days=30, export_batch=2,
        yield_step=0.01, yield_max=5.0,
    )  # fmt: skip
    hot = {"busy": True}
    looked = []

    def busy() -> bool:
        looked.append(hot["busy"])
        return hot["busy"]

    maintenance = HistoryMaintenance(store, leader, clock, config, Archive(str(tmp_path)), busy)
    round_ = asyncio.create_task(maintenance.run_once())
    await asyncio.sleep(0.2)
    # The round waits before its first batch: nothing read, nothing archived yet.
    assert not round_.done() and month_of(JAN) in await store.history_months()
    assert len(looked) > 5 and all(looked)
    hot["busy"] = False
    assert await round_ == 1  # the month, once the hot path left room
    assert month_of(JAN) not in await store.history_months()
    assert 0.15 < maintenance.yielded < 1.0

    # A hot path that is never idle delays each batch by yield_max at most: it still archives.
    clock.set(MAR + timedelta(days=31))
    await fail_tasks(store, clock, a, 1, "report")
    clock.set(MAR + timedelta(days=100))
    hot["busy"] = True
    never_idle = HistoryMaintenance(
        store,
        leader,
        clock,
        replace(config, yield_max=0.03, months_per_round=9),
        Archive(str(tmp_path)),
        busy,
    )
    assert await never_idle.run_once() >= 1
    assert month_of(MAR + timedelta(days=31)) not in await store.history_months()
    assert never_idle.yielded >= 0.03 * 3  # retention's batch, then each export batch
