"""The PostgreSQL store's hot path: create, promote, claim, complete, heartbeat, reap.

Each call is one batch statement (an array of composites through ``unnest``), so its cost per
task falls with the batch size. Dependencies cost nothing unless a task has some: parents are
only read when a batch names them, and dependents only when a finished task has
``has_dependents``.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import TYPE_CHECKING, Any

import asyncpg
from asyncpg import exceptions as pgx

from duetime.errors import Conflict, ValidationError
from duetime.ids import is_uuid, new_id
from duetime.store.isolation import readable
from duetime.store.postgres import rows
from duetime.store.postgres.batching import InsertBatcher
from duetime.store.postgres.signals import PgSignal
from duetime.store.postgres.sql import QUERIES as Q
from duetime.store.recorded import recordable, recorded_result
from duetime.types import (
    ClaimRequest,
    Completion,
    CompletionResult,
    Lease,
    NewTask,
    TargetType,
    Task,
    TaskCreated,
    TaskStatus,
)

if TYPE_CHECKING:
    from asyncpg.pool import PoolConnectionProxy

    Conn = PoolConnectionProxy[asyncpg.Record]

_STATUS = {s.value: s for s in TaskStatus}
_DEADLOCK_RETRIES = 3


class TaskOps:
    """Task methods of :class:`~duetime.store.postgres.backend.PostgresStore` (a mixin: the
    store provides connections, the pinned time, its signals and its notify token)."""

    ready_signal: PgSignal
    due_signal: PgSignal
    _inserts: InsertBatcher[asyncpg.Record]

    def _pinned(self) -> datetime | None:
        raise NotImplementedError

    def _connection(self) -> AbstractAsyncContextManager[Conn]:
        raise NotImplementedError

    def _transaction(self) -> AbstractAsyncContextManager[Conn]:
        raise NotImplementedError

    def _announce(self, statuses: Iterable[str]) -> None:
        """After a commit that left tasks in ``statuses``: wake every node's dispatchers for
        ready ones and promoters for ones due at a new time (scheduled or retrying)."""
        seen = set(statuses)
        if TaskStatus.READY in seen:
            self.ready_signal.notify()
        if TaskStatus.SCHEDULED in seen or TaskStatus.RETRYING in seen:
            self.due_signal.notify()

    # -- create -------------------------------------------------------------------------------

    async def task_create_many(self, tasks: Sequence[NewTask]) -> list[TaskCreated]:
        """Create tasks all or nothing, in input order (see the protocol).

        One ``INSERT ... SELECT FROM unnest(...) ON CONFLICT DO NOTHING`` makes every new task;
        idempotent hits (earlier rows, a racing insert, or a repeat inside this batch) are read
        back afterwards and returned with ``created=False``. Input PostgreSQL cannot store (a NUL
        character) raises ``ValidationError``.
        """
        if not tasks:
            return []
        # A repeat of (tenant, key) inside the batch resolves to the first occurrence.
        first: dict[tuple[str, str], int] = {}
        repeat_of: dict[int, int] = {}
        fresh: list[NewTask] = []
        slot_of: dict[int, int] = {}  # input index -> index into fresh
        for i, task in enumerate(tasks):
            if task.idempotency_key is not None:
                key = (task.tenant_id, task.idempotency_key)
                if key in first:
                    repeat_of[i] = first[key]
                    continue
                first[key] = i
            slot_of[i] = len(fresh)
            fresh.append(task)
        ids = [new_id() for _ in fresh]
        parents = [tuple(dict.fromkeys(t.depends_on)) for t in fresh]
        for group in parents:
            for parent in group:
                if not is_uuid(parent):
                    raise ValidationError(f"no task {parent!r} to depend on", field="depends_on")

        try:
            inserted, hits = await self._insert(fresh, ids, parents)
        except pgx.DataError as exc:  # e.g. a NUL character, which PostgreSQL cannot store
            raise ValidationError(f"a task cannot be stored: {exc}") from exc
        self._announce(r["status"] for r in inserted.values())

        made: list[TaskCreated] = []
        for i in range(len(tasks)):
            if i in repeat_of:
                made.append(TaskCreated(task=made[repeat_of[i]].task, created=False))
                continue
            slot = slot_of[i]
            task = fresh[slot]
            row = inserted.get(ids[slot])
            if row is not None:
                made.append(
                    TaskCreated(
                        task=rows.new_task_from_row(task, ids[slot], parents[slot], row),
                        created=True,
                    )
                )
                continue
            hit = hits.get((task.tenant_id, task.idempotency_key or ""))
            if hit is None:  # cannot happen: a conflict means a committed row
                raise Conflict(f"task with idempotency key {task.idempotency_key!r} vanished")
            made.append(TaskCreated(task=hit, created=False))
        return made

    async def _insert(
        self, fresh: list[NewTask], ids: list[str], parents: list[tuple[str, ...]]
    ) -> tuple[dict[str, asyncpg.Record], dict[tuple[str, str], Task]]:
        """Insert ``fresh`` under ``ids``: the rows inserted by id, and the existing tasks behind
        idempotent hits by (tenant, key)."""
        pinned = self._pinned()
        if any(parents):
            async with self._transaction() as conn:
                inserted = await self._insert_with_parents(conn, pinned, fresh, ids, parents)
                return inserted, await self._fetch_hits(conn, fresh, ids, inserted)
        zeros = [0] * len(fresh)
        falses = [False] * len(fresh)
        records = rows.task_input_records(fresh, ids, parents, zeros, falses)
        # Without parents a create is one statement: concurrent calls may share it.
        found = await self._inserts.insert(pinned, records)
        inserted = {str(r["id"]): r for r in found}
        if len(inserted) == len(fresh):
            return inserted, {}
        async with self._connection() as conn:
            return inserted, await self._fetch_hits(conn, fresh, ids, inserted)

    async def _insert_run(
        self, pinned: Hashable, records: list[tuple[Any, ...]]
    ) -> list[asyncpg.Record]:
        """One ``task_insert`` statement (the :class:`InsertBatcher`'s runner)."""
        async with self._connection() as conn:
            found: list[asyncpg.Record] = await conn.fetch(Q["task_insert"], pinned, records)
        return found

    async def _insert_with_parents(
        self,
        conn: Conn,
        pinned: datetime | None,
        fresh: list[NewTask],
        ids: list[str],
        parents: list[tuple[str, ...]],
    ) -> dict[str, asyncpg.Record]:
        """Lock the parents, check them, insert the tasks and their ``task_deps`` rows."""
        wanted = sorted({p for group in parents for p in group})
        found = {str(r["id"]): r for r in await conn.fetch(Q["task_parents_lock"], wanted)}
        pending: list[int] = []
        dep_failed: list[bool] = []
        for task, group in zip(fresh, parents, strict=True):
            waiting = 0
            failed = False
            for parent in group:
                row = found.get(parent)
                if row is None or row["tenant_id"] != task.tenant_id:
                    raise ValidationError(f"no task {parent} to depend on", field="depends_on")
                status = row["status"]
                if status in ("failed", "cancelled"):
                    failed = True
                elif status != "succeeded":
                    waiting += 1
            pending.append(waiting)
            dep_failed.append(failed)
        unmarked = [p for p in wanted if not found[p]["has_dependents"]]
        if unmarked:
            await conn.execute(Q["task_parents_mark"], unmarked)
        records = rows.task_input_records(fresh, ids, parents, pending, dep_failed)
        result = await conn.fetch(Q["task_insert"], pinned, records)
        inserted = {str(r["id"]): r for r in result}
        # Only a blocked child ever needs its parents to find it.
        edge_parents: list[str] = []
        edge_children: list[str] = []
        for task_id, group in zip(ids, parents, strict=True):
            row = inserted.get(task_id)
            if row is not None and row["status"] == "blocked":
                edge_parents.extend(group)
                edge_children.extend([task_id] * len(group))
        if edge_parents:
            await conn.execute(Q["task_deps_insert"], edge_parents, edge_children)
        return inserted

    async def _fetch_hits(
        self,
        conn: Conn,
        fresh: list[NewTask],
        ids: list[str],
        inserted: dict[str, asyncpg.Record],
    ) -> dict[tuple[str, str], Task]:
        """The existing tasks behind idempotent hits, by (tenant, key)."""
        missing = [t for t, task_id in zip(fresh, ids, strict=True) if task_id not in inserted]
        if not missing:
            return {}
        found = await conn.fetch(
            Q["task_select_by_idempotency_key"],
            [t.tenant_id for t in missing],
            [t.idempotency_key for t in missing],
        )
        wanted = {(t.tenant_id, t.idempotency_key) for t in missing}
        return {
            (r["tenant_id"], r["idempotency_key"]): rows.task_from_row(r)
            for r in found
            if (r["tenant_id"], r["idempotency_key"]) in wanted
        }

    # -- the engine's side ----------------------------------------------------------------------

    async def task_promote_due(self, limit: int) -> int:
        """Make up to ``limit`` due scheduled/retrying tasks ready, earliest first."""
        if limit <= 0:
            return 0
        async with self._connection() as conn:
            moved: int = await conn.fetchval(Q["task_promote_due"], self._pinned(), limit)
        if moved:
            self.ready_signal.notify()
        return moved

    async def task_due_ids(self, limit: int) -> list[str]:
        """The ids :meth:`task_promote_due` would move, earliest due first (read only)."""
        if limit <= 0:
            return []
        async with self._connection() as conn:
            found = await conn.fetch(Q["task_due_ids"], self._pinned(), limit)
        return [str(r["id"]) for r in found]

    async def task_promote(self, task_ids: Sequence[str]) -> int:
        """Make the tasks among ``task_ids`` that are still due scheduled/retrying ones ready."""
        wanted = [i for i in task_ids if is_uuid(i)]
        if not wanted:
            return 0
        async with self._connection() as conn:
            moved: int = await conn.fetchval(Q["task_promote"], self._pinned(), wanted)
        if moved:
            self.ready_signal.notify()
        return moved

    async def task_next_due_at(self) -> datetime | None:
        async with self._connection() as conn:
            value: datetime | None = await conn.fetchval(Q["task_next_due_at"])
        return value

    async def task_claim(self, request: ClaimRequest) -> list[Lease]:
        """Claim ready tasks with ``FOR UPDATE SKIP LOCKED``; priority first, then due_at."""
        if request.limit <= 0 or not request.target_types:
            return []
        types = sorted(t.value for t in request.target_types)
        # Separate statements so each can use its own partial index even under a generic plan.
        # The push claim walks its index in order only when sorting is off (see
        # claim_in_index_order); the worker claim reaches its index by (tenant, queue), in order.
        # The transaction costs ~0.4 ms per claim; keeping it for backlogs only measured slower
        # bursts (docs/benchmarks.md, third session).
        push = False
        if (
            request.target_types == {TargetType.WORKER}
            and request.queue is not None
            and request.tenant_id is not None
        ):
            query = Q["task_claim_worker"]
        elif TargetType.WORKER not in request.target_types:
            query, push = Q["task_claim_push"], True
        else:
            query = Q["task_claim_any"]
        names = None if request.names is None else list(request.names)
        lease_seconds = None if request.lease_seconds is None else float(request.lease_seconds)
        args = (
            self._pinned(),
            types,
            request.queue,
            names,
            request.limit,
            lease_seconds,
            float(request.lease_grace_seconds),
            request.worker_id,
            request.tenant_id,
        )
        if push:
            async with self._transaction() as conn:
                await conn.execute(Q["claim_in_index_order"])
                found = await conn.fetch(query, *args)
        else:
            async with self._connection() as conn:
                found = await conn.fetch(query, *args)
        leases = [rows.lease_from_row(r) for r in found]
        # RETURNING has no order; hand out the most urgent first.
        leases.sort(key=lambda lease: (-lease.task.priority, lease.task.due_at))
        return leases

    async def task_complete_many(self, completions: Sequence[Completion]) -> list[CompletionResult]:
        """End attempts, fenced on (id, lease, running); release or fail dependents.

        One statement ends every attempt and writes its attempt row; only when a finished task
        has dependents do more statements run, in the same transaction. What is recorded is
        first made storable (:func:`~duetime.store.recorded.recordable`).
        """
        sent: dict[tuple[str, str], Completion] = {}
        for c in completions:
            if is_uuid(c.task_id) and is_uuid(c.lease_id) and (c.task_id, c.lease_id) not in sent:
                sent[c.task_id, c.lease_id] = recordable(c)
        ended: dict[tuple[str, str], TaskStatus] = {}
        if sent:
            ended = await self._complete(list(sent.values()))
        answered: set[tuple[str, str]] = set()
        results: list[CompletionResult] = []
        for c in completions:
            key = (c.task_id, c.lease_id)
            status = ended.get(key) if key not in answered else None
            answered.add(key)  # a repeat in the same batch finds the lease already used
            results.append(
                CompletionResult(
                    task_id=c.task_id,
                    lease_id=c.lease_id,
                    accepted=status is not None,
                    status=status,
                )
            )
        return results

    async def task_complete_leased(
        self, tenant_id: str, lease_ids: Sequence[str], results: Sequence[str | None]
    ) -> dict[str, tuple[str, str]]:
        """End succeeded attempts by lease id in one statement, without reading the tasks first
        (see :class:`~duetime.store.protocols.LeaseCompleter`)."""
        wanted: dict[str, str | None] = {}
        repeated: set[str] = set()
        for lease_id, result in zip(lease_ids, results, strict=True):
            if lease_id in wanted:
                repeated.add(lease_id)  # the general path answers the repeat "stale"
            elif is_uuid(lease_id):
                wanted[lease_id] = None if result is None else recorded_result(result)
        for lease_id in repeated:
            wanted.pop(lease_id, None)
        if not wanted:
            return {}
        async with self._connection() as conn:
            found = await conn.fetch(
                Q["task_complete_leased"],
                self._pinned(),
                list(wanted),
                list(wanted.values()),
                tenant_id,
            )
        # Succeeded tasks with no dependents wake nobody: no signal to fire.
        return {str(r["lease_id"]): (str(r["id"]), r["queue"]) for r in found}

    async def _complete(self, batch: list[Completion]) -> dict[tuple[str, str], TaskStatus]:
        pinned = self._pinned()
        records = rows.completion_records(batch)
        for attempt in range(_DEADLOCK_RETRIES):
            try:
                async with self._transaction() as conn:
                    found = await conn.fetch(Q["task_complete_many"], pinned, records)
                    woken = await self._settle_dependents(conn, pinned, found)
                break
            except (pgx.DeadlockDetectedError, pgx.SerializationError):
                # Two batches releasing the same children in different orders: all or nothing,
                # so running the batch again is safe.
                if attempt == _DEADLOCK_RETRIES - 1:
                    raise
        statuses = [r["status"] for r in found]
        self._announce([*statuses, *woken])
        return {(str(r["id"]), str(r["lease_id"])): _STATUS[r["status"]] for r in found}

    async def _settle_dependents(
        self, conn: Conn, pinned: datetime | None, ended: Sequence[asyncpg.Record]
    ) -> list[str]:
        """Release children of succeeded parents and fail those of failed/cancelled ones.
        Returns the statuses released children moved to."""
        succeeded: list[str] = []
        doomed: list[str] = []
        for r in ended:
            if not r["has_dependents"]:
                continue
            if r["status"] == "succeeded":
                succeeded.append(str(r["id"]))
            elif r["status"] in ("failed", "cancelled"):
                doomed.append(str(r["id"]))
        woken: list[str] = []
        if succeeded:
            found = await conn.fetch(Q["task_deps_release"], pinned, succeeded)
            woken = [r["status"] for r in found]
        if doomed:
            await conn.execute(Q["task_deps_fail"], pinned, doomed)
        return woken

    async def task_heartbeat(
        self, lease_ids: Sequence[str], extend_seconds: float
    ) -> dict[str, datetime]:
        """Extend live leases to now + ``extend_seconds``; stale or expired ones are absent."""
        wanted = [lid for lid in lease_ids if is_uuid(lid)]
        if not wanted:
            return {}
        async with self._connection() as conn:
            found = await conn.fetch(
                Q["task_heartbeat"], self._pinned(), wanted, float(extend_seconds)
            )
        return {str(r["lease_id"]): r["lease_expires_at"] for r in found}

    async def task_expired_leases(self, limit: int) -> list[Lease]:
        """Running tasks whose lease expired by now, oldest expiry first (read only)."""
        if limit <= 0:
            return []
        async with self._connection() as conn:
            found = await conn.fetch(Q["task_expired_leases"], self._pinned(), limit)
        return readable(found, rows.lease_from_row, "task")
