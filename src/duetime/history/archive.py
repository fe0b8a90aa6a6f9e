"""The cold tier: months of history as zstd Parquet files (SPEC §8 "Tiers"; needs the
``history`` extra: pyarrow, and fsspec for object stores pyarrow cannot reach itself).

Layout under ``DUETIME_ARCHIVE_URL`` (a local directory by default, or any URL pyarrow or fsspec
understands, e.g. ``s3://bucket/duetime``)::

    tenant=<tenant id, %-quoted>/month=<YYYY-MM>/history.parquet   one file per tenant and month
    tenant=<tenant id>/month=<YYYY-MM>/tasks-<uuid>.parquet        tasks retired by retention,
                                                                   by the month they finished
    _manifests/<YYYY-MM>.json                                      {"month", "rows", "tenants"}

Partition pruning: a read lists only its tenant's directory and opens only the months that
overlap its time range. Within a file, rows are grouped by task name and sorted by time inside a
name, so a query by name (SPEC §6: "failed attempts of task name X in one week") reads the one or
two row groups holding that name, and the time range prunes further by the row groups'
statistics. A file is written under a temporary name and then moved into
place, and the manifest is written last, after every file of the month: a month without a
manifest is an export that did not finish (and is simply written again); the row counts in the
manifest are the ones verified against the hot store before it drops the month.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from duetime.history.events import HistoryEvent, HistoryFilter
from duetime.history.partitions import month_label, month_of, months_between
from duetime.secrets.sealed import redact
from duetime.types import Attempt, AttemptOutcome

_TS = pa.timestamp("us", tz="UTC")
SCHEMA = pa.schema(
    [
        ("at", _TS),
        ("id", pa.int64()),
        ("tenant_id", pa.string()),
        ("kind", pa.string()),
        ("task_id", pa.string()),
        ("schedule_id", pa.string()),
        ("name", pa.string()),
        ("queue", pa.string()),
        ("labels", pa.string()),
        ("from_status", pa.string()),
        ("to_status", pa.string()),
        ("actor", pa.string()),
        ("fields", pa.string()),
        ("attempt", pa.int32()),
        ("started_at", _TS),
        ("outcome", pa.string()),
        ("error", pa.string()),
        ("http_status", pa.int32()),
        ("duration_ms", pa.float64()),
        ("worker", pa.string()),
        ("logs", pa.string()),
        ("response", pa.string()),
    ]
)
"""The columns of an archived record (the store's ``history`` table; JSON columns as text).
Files written before ``logs`` and ``response`` existed read them as null."""

COLUMNS = tuple(SCHEMA.names)

TASK_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("tenant_id", pa.string()),
        ("name", pa.string()),
        ("queue", pa.string()),
        ("status", pa.string()),
        ("schedule_id", pa.string()),
        ("finished_at", _TS),
        ("document", pa.string()),
    ]
)
"""An archived task: key columns and the whole row as JSON text (``document``)."""
ROW_GROUP_ROWS = 64 * 1024


def _filesystem(location: str) -> tuple[pafs.FileSystem, str]:
    """pyarrow's filesystem and root path for ``location``: a local path, a URL pyarrow knows
    (``s3://``, ``gs://``, ``hdfs://``), or any other fsspec URL (``memory://``, ``az://`` ...)."""
    if "://" not in location or location.startswith("file://"):
        root = Path(location.removeprefix("file://")).resolve()
        return pafs.LocalFileSystem(), root.as_posix()
    try:
        fs, root = pafs.FileSystem.from_uri(location)
        return fs, root.rstrip("/")
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError):
        import fsspec

        protocol, _, path = location.partition("://")
        handler = pafs.FSSpecHandler(fsspec.filesystem(protocol))
        return pafs.PyFileSystem(handler), path.rstrip("/")


def _json_text(value: Any) -> str | None:
    """Compact JSON text (the stores hand JSON over as text in their own spelling), a sealed
    credential in it shown as ``***`` and its fingerprint: an export holds nothing to open (a
    revision records credentials so already; older ones may hold a sealed broker URL)."""
    if value is None:
        return None
    parsed = orjson.loads(value) if isinstance(value, str | bytes) else value
    return orjson.dumps(redact(parsed)).decode()


def _task_column(name: str, value: Any) -> Any:
    """A retired task's column as archived: its document's sealed credentials shown as ``***``
    and a fingerprint (the archive outlives every key; nothing in it is to be opened)."""
    if name == "id":
        return str(value)
    if name == "document" and isinstance(value, str) and "dtenc" in value:
        return orjson.dumps(redact(orjson.loads(value))).decode()
    return value


class Archive:
    """The cold tier at ``location`` (see the module docstring). Blocking I/O runs in threads."""

    def __init__(self, location: str) -> None:
        self.location = location
        self.fs, self.root = _filesystem(location)

    # -- layout ----------------------------------------------------------------------------------

    def _tenant_dir(self, tenant_id: str) -> str:
        return f"{self.root}/tenant={quote(tenant_id, safe='')}"

    def file_path(self, tenant_id: str, month: date) -> str:
        """Where the tenant's records of ``month`` live."""
        return f"{self._tenant_dir(tenant_id)}/month={month_label(month)}/history.parquet"

    def _manifest_path(self, month: date) -> str:
        return f"{self.root}/_manifests/{month_label(month)}.json"

    # -- export ----------------------------------------------------------------------------------

    async def manifest(self, month: date) -> dict[str, Any] | None:
        """The manifest of an exported month, or None (never exported, or not to the end)."""
        return await asyncio.to_thread(self._read_manifest, month)

    def _read_manifest(self, month: date) -> dict[str, Any] | None:
        path = self._manifest_path(month)
        if self.fs.get_file_info(path).type != pafs.FileType.File:
            return None
        with self.fs.open_input_stream(path) as f:
            found: dict[str, Any] = json.loads(f.read())
        return found

    async def month_write(
        self, month: date, batches: AsyncIterator[Sequence[Mapping[str, Any]]]
    ) -> dict[str, int]:
        """Write the month's records (``batches`` of rows grouped by tenant, in the order the
        file keeps: by name, then time), one file per tenant; returns the rows written per
        tenant. No manifest yet (see :meth:`month_seal`). Writing a month again replaces its
        files."""
        counts: dict[str, int] = {}
        writer: _TenantWriter | None = None
        try:
            async for batch in batches:
                start = 0
                for i in range(1, len(batch) + 1):
                    if i < len(batch) and batch[i]["tenant_id"] == batch[start]["tenant_id"]:
                        continue
                    tenant = str(batch[start]["tenant_id"])
                    if writer is None or writer.tenant_id != tenant:
                        if writer is not None:
                            await asyncio.to_thread(writer.close)
                        writer = _TenantWriter(self, tenant, month)
                    rows = batch[start:i]
                    await asyncio.to_thread(writer.write, rows)
                    counts[tenant] = counts.get(tenant, 0) + len(rows)
                    start = i
            if writer is not None:
                await asyncio.to_thread(writer.close)
                writer = None
        finally:
            if writer is not None:
                writer.abort()
        return counts

    async def month_counts(self, month: date, tenants: Sequence[str]) -> dict[str, int]:
        """Rows in the archived files of ``month`` for each of ``tenants`` (0 when missing),
        read from the Parquet footers."""
        return await asyncio.to_thread(self._counts, month, list(tenants))

    def _counts(self, month: date, tenants: list[str]) -> dict[str, int]:
        counts: dict[str, int] = {}
        for tenant in tenants:
            path = self.file_path(tenant, month)
            if self.fs.get_file_info(path).type != pafs.FileType.File:
                counts[tenant] = 0
                continue
            with self.fs.open_input_file(path) as f:
                counts[tenant] = pq.ParquetFile(f).metadata.num_rows
        return counts

    async def month_seal(self, month: date, counts: Mapping[str, int]) -> None:
        """Write the manifest: the month is exported, with these verified row counts."""
        body = {"month": month_label(month), "rows": sum(counts.values()), "tenants": dict(counts)}
        await asyncio.to_thread(self._write_atomic, self._manifest_path(month), orjson.dumps(body))

    def _write_atomic(self, path: str, data: bytes) -> None:
        self.fs.create_dir(path.rpartition("/")[0], recursive=True)
        temp = f"{path}.tmp-{uuid.uuid4().hex}"
        with self.fs.open_output_stream(temp) as f:
            f.write(data)
        self.fs.move(temp, path)

    def tasks_write(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Keep tasks a retention sweep is deleting (a
        :data:`~duetime.history.retention.TaskArchiver`): one new file per tenant and month of
        ``finished_at``, moved into place whole. Blocking. A sweep retried after a crash may
        write a task twice; readers keep one copy per id."""
        groups: dict[tuple[str, date], list[Mapping[str, Any]]] = {}
        for row in rows:
            month = month_of(row["finished_at"])
            groups.setdefault((str(row["tenant_id"]), month), []).append(row)
        for (tenant, month), members in groups.items():
            folder = self.file_path(tenant, month).rpartition("/")[0]
            table = pa.Table.from_pylist(
                [{c: _task_column(c, r[c]) for c in TASK_SCHEMA.names} for r in members],
                schema=TASK_SCHEMA,
            )
            path = f"{folder}/tasks-{uuid.uuid4().hex}.parquet"
            self.fs.create_dir(folder, recursive=True)
            temp = f"{path}.tmp"
            pq.write_table(table, temp, filesystem=self.fs, compression="zstd")
            self.fs.move(temp, path)

    def tasks_read(self, tenant_id: str) -> dict[str, dict[str, Any]]:
        """Every archived task of the tenant: id → its document (blocking; for audits)."""
        found: dict[str, dict[str, Any]] = {}
        for month in self._months(tenant_id):
            folder = self.file_path(tenant_id, month).rpartition("/")[0]
            selector = pafs.FileSelector(folder)
            for info in self.fs.get_file_info(selector):
                if info.base_name.startswith("tasks-") and info.base_name.endswith(".parquet"):
                    table = pq.read_table(info.path, filesystem=self.fs)
                    for row in table.to_pylist():
                        found[row["id"]] = orjson.loads(row["document"])
        return found

    # -- reads -----------------------------------------------------------------------------------

    async def query(self, query: HistoryFilter) -> list[HistoryEvent]:
        """Up to ``query.limit`` archived records of the tenant matching the filter, newest
        first (see the module docstring for the pruning)."""
        return await asyncio.to_thread(self._query, query)

    def _months(self, tenant_id: str) -> list[date]:
        selector = pafs.FileSelector(self._tenant_dir(tenant_id), allow_not_found=True)
        months = []
        for info in self.fs.get_file_info(selector):
            label = info.base_name.removeprefix("month=")
            if info.type == pafs.FileType.Directory and len(label) == 7:
                months.append(date(int(label[:4]), int(label[5:]), 1))
        return months

    def _files(self, tenant_id: str, since: datetime | None, until: datetime | None) -> list[str]:
        months = months_between(since, until, self._months(tenant_id))
        paths = [self.file_path(tenant_id, m) for m in months]
        return [p for p in paths if self.fs.get_file_info(p).type == pafs.FileType.File]

    def _query(self, query: HistoryFilter) -> list[HistoryEvent]:
        files = self._files(query.tenant_id, query.since, query.until)
        if not files:
            return []
        expr = pc.field("tenant_id") == query.tenant_id
        for column, value in (
            ("task_id", query.task_id),
            ("schedule_id", query.schedule_id),
            ("name", query.name),
            ("queue", query.queue),
        ):
            if value is not None:
                expr &= pc.field(column) == value
        if query.kinds:
            expr &= pc.field("kind").isin(list(query.kinds))
        if query.outcomes:
            expr &= pc.field("outcome").isin(list(query.outcomes))
        if query.since is not None:
            expr &= pc.field("at") >= pa.scalar(query.since, _TS)
        if query.until is not None:
            expr &= pc.field("at") < pa.scalar(query.until, _TS)
        if query.cursor is not None:
            at = pa.scalar(query.cursor[0], _TS)
            expr &= (pc.field("at") < at) | (
                (pc.field("at") == at) & (pc.field("id") < query.cursor[1])
            )
        for key, value in query.labels.items():
            # Candidates by text (labels are compact JSON here), checked exactly below.
            expr &= pc.match_substring(
                pc.field("labels"), orjson.dumps({key: value}).decode()[1:-1]
            )
        table = ds.dataset(files, schema=SCHEMA, format="parquet", filesystem=self.fs).to_table(
            filter=expr
        )
        table = table.sort_by([("at", "descending"), ("id", "descending")])
        events = []
        for row in table.to_pylist():
            event = _event(row)
            if all(event.labels.get(k) == v for k, v in query.labels.items()):
                events.append(event)
                if len(events) == query.limit:
                    break
        return events

    async def attempts(self, tenant_id: str, task_id: str) -> list[Attempt]:
        """The archived attempts of one task, by number."""
        query = HistoryFilter(
            tenant_id=tenant_id, task_id=task_id, kinds=("attempt",), limit=1_000_000
        )
        events = await self.query(query)
        return sorted(
            (
                Attempt(
                    task_id=task_id,
                    number=e.attempt or 0,
                    started_at=e.started_at or e.at,
                    finished_at=e.at,
                    outcome=AttemptOutcome(e.outcome or AttemptOutcome.FAILED),
                    error=e.error,
                    http_status=e.http_status,
                    duration_ms=e.duration_ms or 0.0,
                    worker=e.worker,
                    logs=e.logs,
                    response=e.response,
                )
                for e in events
            ),
            key=lambda a: a.number,
        )


class _TenantWriter:
    """One tenant's file of one month, written under a temporary name and moved into place."""

    def __init__(self, archive: Archive, tenant_id: str, month: date) -> None:
        self.tenant_id = tenant_id
        self._fs = archive.fs
        self.path = archive.file_path(tenant_id, month)
        self._temp = f"{self.path}.tmp-{uuid.uuid4().hex}"
        self._fs.create_dir(self.path.rpartition("/")[0], recursive=True)
        self._writer = pq.ParquetWriter(self._temp, SCHEMA, filesystem=self._fs, compression="zstd")
        self._pending: list[pa.Table] = []  # row groups are whole: written once they fill
        self._pending_rows = 0

    def write(self, rows: Sequence[Mapping[str, Any]]) -> None:
        columns: dict[str, list[Any]] = {c: [] for c in COLUMNS}
        for row in rows:
            for c in COLUMNS:
                value = row.get(c)
                if c in ("labels", "fields"):
                    value = _json_text(value)
                elif c == "task_id" and value is not None:
                    value = str(value)
                columns[c].append(value)
        self._pending.append(pa.Table.from_pydict(columns, schema=SCHEMA))
        self._pending_rows += len(rows)
        if self._pending_rows >= ROW_GROUP_ROWS:
            self._flush(whole_groups=True)

    def _flush(self, whole_groups: bool = False) -> None:
        table = pa.concat_tables(self._pending)
        size = len(table) - len(table) % ROW_GROUP_ROWS if whole_groups else len(table)
        if size:
            self._writer.write_table(table.slice(0, size), row_group_size=ROW_GROUP_ROWS)
        self._pending = [table.slice(size)]
        self._pending_rows = len(table) - size

    def close(self) -> None:
        if self._pending_rows:
            self._flush()
        self._writer.close()
        self._fs.move(self._temp, self.path)

    def abort(self) -> None:
        try:
            self._writer.close()
        finally:
            self._fs.delete_file(self._temp)


def _event(row: Mapping[str, Any]) -> HistoryEvent:
    def aware(value: datetime | None) -> datetime | None:
        return None if value is None else value.astimezone(UTC)

    at = aware(row["at"])
    assert at is not None
    event = HistoryEvent(
        at=at,
        id=row["id"],
        kind=row["kind"],
        task_id=row["task_id"],
        schedule_id=row["schedule_id"],
        name=row["name"],
        queue=row["queue"],
        labels=orjson.loads(row["labels"]) if row["labels"] else {},
        from_status=row["from_status"],
        to_status=row["to_status"],
        actor=row["actor"],
        fields=orjson.loads(row["fields"]) if row["fields"] else None,
        attempt=row["attempt"],
        outcome=row["outcome"],
        error=row["error"],
        http_status=row["http_status"],
        duration_ms=row["duration_ms"],
        worker=row["worker"],
        started_at=aware(row["started_at"]),
        logs=row["logs"],
        response=row["response"],
    )
    return event
