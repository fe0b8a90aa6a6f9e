"""History, retention and audit on SQLite (SPEC §8): the ``history_*``, ``queue_retention_*``
and ``task_retention_sweep`` methods of :class:`~duetime.store.sqlite.backend.SqliteStore`.

The audit records are written by triggers (``migrations/0007_history.sql``) inside the
transaction of each change; the actor of an API change comes from the one-row ``audit_actor``
table, set and cleared inside that change's transaction (:func:`with_actor`). SQLite has no
partitions: the history table is one table, retired by the same API. The rules (periods,
cursors, filter checks) are in :mod:`duetime.history`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Callable, Sequence
from datetime import date
from importlib import resources
from typing import Any, TypeVar

import orjson

from duetime.errors import NotFound
from duetime.history.events import HistoryEvent, HistoryFilter, check_history_filter
from duetime.history.partitions import month_bounds, month_of, next_month
from duetime.history.retention import ArchiveFailed, RetentionPolicy, TaskArchiver
from duetime.store.sqlite.queries import parse_queries
from duetime.store.sqlite.rows import Row, attempt_from_row, dumps, from_micros, to_micros
from duetime.types import Attempt

HQ: dict[str, str] = parse_queries(
    resources.files(__package__).joinpath("history.sql").read_text(encoding="utf-8")
)
"""The named queries of ``history.sql``."""

T = TypeVar("T")


def event_from_row(r: Row) -> HistoryEvent:
    """A ``history`` row as a :class:`HistoryEvent`."""
    return HistoryEvent(
        at=from_micros(r["at"]),
        id=r["id"],
        kind=r["kind"],
        task_id=r["task_id"],
        schedule_id=r["schedule_id"],
        name=r["name"],
        queue=r["queue"],
        labels=orjson.loads(r["labels"]) if r["labels"] else {},
        from_status=r["from_status"],
        to_status=r["to_status"],
        actor=r["actor"],
        fields=_fields(r["fields"]),
        attempt=r["attempt"],
        outcome=r["outcome"],
        error=r["error"],
        http_status=r["http_status"],
        duration_ms=r["duration_ms"],
        worker=r["worker"],
        started_at=None if r["started_at"] is None else from_micros(r["started_at"]),
    )


def _fields(text: str | None) -> dict[str, Any] | None:
    if not text:
        return None
    found: dict[str, Any] = orjson.loads(text)
    # Times are microseconds here; the PostgreSQL twin records RFC 3339 text. Answer alike.
    if "run_at" in found:
        found["run_at"] = [
            None if v is None else from_micros(v).isoformat().replace("+00:00", "Z")
            for v in found["run_at"]
        ]
    return found


_TIME_COLUMNS = frozenset(
    {"scheduled_for", "run_at", "due_at", "created_at", "updated_at", "started_at",
     "finished_at", "lease_expires_at"}
)  # fmt: skip
_JSON_COLUMNS = frozenset({"target", "retry", "labels", "depends_on"})


def _task_document(r: Row) -> dict[str, Any]:
    """A task row as the archive keeps it (the PostgreSQL twin: ``to_jsonb(t)``)."""
    doc: dict[str, Any] = {}
    for key in r.keys():  # noqa: SIM118 (sqlite3.Row iterates values)
        value = r[key]
        if key in _TIME_COLUMNS and value is not None:
            value = from_micros(value).isoformat()
        elif key in _JSON_COLUMNS and isinstance(value, str):
            value = orjson.loads(value)
        doc[key] = value
    return {
        "id": r["id"],
        "tenant_id": r["tenant_id"],
        "name": r["name"],
        "queue": r["queue"],
        "status": r["status"],
        "schedule_id": r["schedule_id"],
        "finished_at": from_micros(r["finished_at"]),
        "document": orjson.dumps(doc).decode(),
    }


def _sweep(
    conn: sqlite3.Connection,
    now: int,
    defaults: RetentionPolicy,
    limit: int,
    archive: TaskArchiver | None,
) -> int:
    doomed = [
        r["id"]
        for r in conn.execute(
            HQ["task_retention_doomed"],
            {
                "now": now,
                "succeeded": defaults.succeeded,
                "failed": defaults.failed,
                "cancelled": defaults.cancelled,
                "limit": limit,
            },
        )
    ]
    if doomed and archive is not None:
        rows = conn.execute(HQ["task_retention_rows"], {"ids": dumps(doomed)}).fetchall()
        try:
            archive([_task_document(r) for r in rows])
        except Exception as exc:  # rolls the deletion back
            raise ArchiveFailed(f"{type(exc).__name__}: {exc}") from exc
    if doomed:
        conn.execute(HQ["task_retention_delete"], {"ids": dumps(doomed)})
    return len(doomed)


def _query(conn: sqlite3.Connection, query: HistoryFilter) -> list[HistoryEvent]:
    cursor_at, cursor_id = query.cursor if query.cursor else (None, None)
    params = {
        "tenant_id": query.tenant_id,
        "task_id": query.task_id,
        "schedule_id": query.schedule_id,
        "name": query.name,
        "queue": query.queue,
        "kinds": dumps(list(query.kinds)) if query.kinds else None,
        "outcomes": dumps(list(query.outcomes)) if query.outcomes else None,
        "labels": dumps(dict(query.labels)) if query.labels else None,
        "since": None if query.since is None else to_micros(query.since),
        "until": None if query.until is None else to_micros(query.until),
        "cursor_at": None if cursor_at is None else to_micros(cursor_at),
        "cursor_id": cursor_id,
        "limit": query.limit,
    }
    return [event_from_row(r) for r in conn.execute(HQ["history_query"], params)]


def _attempts(conn: sqlite3.Connection, tenant_id: str, task_id: str) -> list[Attempt]:
    where = {"task_id": task_id, "tenant_id": tenant_id}
    found = [attempt_from_row(r) for r in conn.execute(HQ["history_attempts"], where)]
    if not found and not conn.execute(HQ["history_task_known"], where).fetchone()[0]:
        raise NotFound(f"no task {task_id}")
    return found


_DELETE_BATCH = 10_000


def with_actor(
    body: Callable[[sqlite3.Connection, int], T], actor: str | None
) -> Callable[[sqlite3.Connection, int], T]:
    """``body`` run with ``actor`` as the audit triggers' actor, inside its write transaction."""
    if actor is None:
        return body

    def run(conn: sqlite3.Connection, now: int) -> T:
        conn.execute(HQ["actor_set"], {"actor": actor})
        result = body(conn, now)
        conn.execute(HQ["actor_clear"])
        return result

    return run


def _months(conn: sqlite3.Connection) -> list[date]:
    months: list[date] = []
    after = -(2**62)
    while True:
        first = conn.execute(HQ["history_first_at"], {"after": after}).fetchone()[0]
        if first is None:
            return months
        months.append(month_of(from_micros(first)))
        after = to_micros(month_bounds(next_month(months[-1]))[0])


def _bounds(month: date) -> dict[str, int]:
    lo, hi = month_bounds(month)
    return {"lo": to_micros(lo), "hi": to_micros(hi)}


def _page_reader(params: dict[str, Any]) -> Callable[[sqlite3.Connection, int], list[Row]]:
    def read(conn: sqlite3.Connection, now: int) -> list[Row]:
        return conn.execute(HQ["history_month_rows"], params).fetchall()

    return read


def _row_dict(r: Row) -> dict[str, Any]:
    row = dict(r)
    row["at"] = from_micros(row["at"])
    if row["started_at"] is not None:
        row["started_at"] = from_micros(row["started_at"])
    if row["fields"]:
        row["fields"] = orjson.dumps(_fields(row["fields"])).decode()
    return row


class HistoryOps:
    """History methods of the SQLite store (a mixin: the store provides ``_read``/``_write``)."""

    async def _read(self, body: Callable[[sqlite3.Connection, int], T]) -> T:
        raise NotImplementedError

    async def _write(
        self, body: Callable[[sqlite3.Connection, int], T], *, integrity_retries: int = 0
    ) -> T:
        raise NotImplementedError

    async def queue_retention_put(
        self, tenant_id: str, queue: str, policy: RetentionPolicy | None
    ) -> None:
        """Set the queue's retention (None or an empty policy: back to the defaults)."""
        where: dict[str, Any] = {"tenant_id": tenant_id, "queue": queue}
        if policy is None or policy == RetentionPolicy():
            await self._write(lambda conn, now: conn.execute(HQ["queue_retention_delete"], where))
            return
        values = {
            **where,
            "succeeded": policy.succeeded,
            "failed": policy.failed,
            "cancelled": policy.cancelled,
        }
        await self._write(lambda conn, now: conn.execute(HQ["queue_retention_put"], values))

    async def queue_retention_get(self, tenant_id: str, queue: str) -> RetentionPolicy:
        """The queue's own retention (fields it does not set are None)."""
        where = {"tenant_id": tenant_id, "queue": queue}
        r = await self._read(
            lambda conn, now: conn.execute(HQ["queue_retention_get"], where).fetchone()
        )
        if r is None:
            return RetentionPolicy()
        return RetentionPolicy.of_row(r)

    async def queue_retention_list(self, tenant_id: str) -> dict[str, RetentionPolicy]:
        """Every queue of the tenant with its own retention, by name."""
        where = {"tenant_id": tenant_id}
        found = await self._read(
            lambda conn, now: conn.execute(HQ["queue_retention_list"], where).fetchall()
        )
        return {r["queue"]: RetentionPolicy.of_row(r) for r in found}

    async def task_retention_sweep(
        self, defaults: RetentionPolicy, limit: int, *, archive: TaskArchiver | None = None
    ) -> int:
        """Delete up to ``limit`` finished tasks past their retention (handed to ``archive``
        before the deletion commits); returns how many."""
        return await self._write(lambda conn, now: _sweep(conn, now, defaults, limit, archive))

    async def history_query(self, query: HistoryFilter) -> list[HistoryEvent]:
        """Up to ``query.limit`` records matching every filter, newest first."""
        check_history_filter(query)
        return await self._read(lambda conn, now: _query(conn, query))

    async def history_attempts(self, tenant_id: str, task_id: str) -> list[Attempt]:
        """The attempts of a task from its history records, by number (also after the task
        left the hot store). ``NotFound`` when the tenant has no record of it."""
        return await self._read(lambda conn, now: _attempts(conn, tenant_id, task_id))

    # -- months and export (SQLite has no partitions: a month is a time range) -----------------

    async def history_partitions_ensure(self, months: Sequence[date]) -> int:
        """Nothing to make on SQLite (no partitions); returns 0."""
        return 0

    async def history_months(self) -> list[date]:
        """The months (first days, UTC) that hold hot records."""
        return await self._read(lambda conn, now: _months(conn))

    async def history_month_counts(self, month: date) -> dict[str, int]:
        """Hot records of ``month`` per tenant."""
        where = _bounds(month)
        found = await self._read(
            lambda conn, now: conn.execute(HQ["history_month_counts"], where).fetchall()
        )
        return {r["tenant_id"]: r["n"] for r in found}

    async def history_month_rows(
        self, month: date, batch: int
    ) -> AsyncIterator[list[dict[str, Any]]]:
        """Every hot record of ``month`` as column → value (JSON columns as text), grouped by
        tenant, then name, each name's by time, in lists of up to ``batch``."""
        where: dict[str, Any] = {**_bounds(month), "limit": batch}
        where.update(tenant_id="", name="", at=-(2**62), id=-1)
        while True:
            found = await self._read(_page_reader(dict(where)))
            if not found:
                return
            yield [_row_dict(r) for r in found]
            last = found[-1]
            where.update(
                tenant_id=last["tenant_id"], name=last["name"] or "", at=last["at"], id=last["id"]
            )

    async def history_month_drop(self, month: date) -> bool:
        """Delete the month's records, in batches of 10,000 (one write transaction each, so the
        hot path waits for one batch at most). False when it held none."""
        where: dict[str, Any] = {**_bounds(month), "limit": _DELETE_BATCH}
        deleted_any = False
        while True:
            gone = await self._write(
                lambda conn, now: conn.execute(HQ["history_month_delete"], where).rowcount
            )
            deleted_any = deleted_any or gone > 0
            if gone < _DELETE_BATCH:
                return deleted_any
