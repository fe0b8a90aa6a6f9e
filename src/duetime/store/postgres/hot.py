"""The PostgreSQL store's create, claim and complete: the rules of :mod:`duetime.store.core.hot`
as one batch statement each (arrays of composites through ``unnest``), so the cost per task
falls with the batch size. Statements are in ``hot_batch.sql``, bound by name.

What stays here rather than in plans, and why (measured: ``docs/adr/0005-store-core.md``):
concurrent creates share one INSERT (:mod:`.batching`), single statements run without
BEGIN/COMMIT, claims of limited queues take one short transaction per queue, and completions
retry the batch on a deadlock.
"""

from __future__ import annotations

import functools
import logging
import math
import random
import time
from collections import Counter
from collections.abc import AsyncIterator, Hashable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import asyncpg
from asyncpg import exceptions as pgx

from duetime.errors import Conflict, ValidationError
from duetime.ids import is_uuid, new_ids
from duetime.store.core import hot as rules
from duetime.store.core import rows
from duetime.store.core.follow import Settled, settle
from duetime.store.core.outbox import dead_lettered
from duetime.store.core.plan import Wake, Woken, wake_for
from duetime.store.ended import EndedFeed
from duetime.store.postgres import driver
from duetime.store.postgres.batching import InsertBatcher
from duetime.store.postgres.driver import PgDecode as D
from duetime.store.postgres.rows import task_input_records
from duetime.store.postgres.signals import PgSignal
from duetime.store.recorded import recordable, recorded_logs, recorded_result
from duetime.store.sql import load
from duetime.types import (
    ClaimRequest,
    Completion,
    CompletionResult,
    Lease,
    LeasedEnd,
    NewTask,
    Task,
    TaskCreated,
    TaskStatus,
)

if TYPE_CHECKING:
    from asyncpg.pool import PoolConnectionProxy

    Conn = PoolConnectionProxy[asyncpg.Record]

log = logging.getLogger("duetime.store")
Q = load(__package__ or "", "postgres", "hot_batch.sql")
_STATUS = {s.value: s for s in TaskStatus}
_ENDED = frozenset(s.value for s in TaskStatus if s.terminal)
_DEADLOCK_RETRIES = 3
SOLE_SECONDS = 0.1
"""How long push claims that came back full for a single tenant skip reading who has ready work."""
LIMITED_CACHE_SECONDS = 1.0
"""How long a store trusts its list of queues with a ``max_concurrency``."""


def bind(name: str, **params: Any) -> tuple[Any, ...]:
    """``name``'s text and its arguments in the order its ``$n`` want them."""
    query = Q[name]
    return (query.text, *[params[n] for n in query.names])


class PgPromote:
    """The promoter's round on PostgreSQL: the core's plan, in a transaction that walks
    ``tasks_due_idx`` in due order (listed before the core's methods in the store's bases).

    Statistics taken before a burst (autovacuum analyzes a table after it grew, not when its
    tasks fall due) say only a few tasks are due; the planner then reads every due task with a
    bitmap scan and sorts them all to take the first ``limit``, again on every round: 20,000
    due read and sorted ~23 times for one burst (``auto_explain``: 10-16 ms a round). Without
    sorts the index walk, which stops after ``limit`` rows, is the only plan left (as for the
    push claim, ``claim_in_index_order``).
    """

    def _pinned(self) -> datetime | None:
        raise NotImplementedError

    def _transaction(self) -> AbstractAsyncContextManager[Conn]:
        raise NotImplementedError

    def _wake(self, wake: Woken | Wake) -> None:
        raise NotImplementedError

    async def task_promote_due(self, limit: int) -> int:
        if limit <= 0:
            return 0
        wake = Woken()
        async with self._transaction() as conn:
            await conn.execute(Q["claim_in_index_order"].text)
            moved = await driver.run(conn, self._pinned(), rules.task_promote_due(limit), wake)
        self._wake(wake)
        return moved


class PgHot:
    """Create, claim and complete of :class:`~duetime.store.postgres.backend.PostgresStore` (a
    mixin: the store provides connections, the pinned time and its signals)."""

    ready_signal: PgSignal
    due_signal: PgSignal
    ended: EndedFeed
    _inserts: InsertBatcher[tuple[Any, ...], Inserted]
    # Queues with a limit, cached (class-level defaults; queue_put resets ``_limited_at``).
    _limited_at: float = -math.inf
    _limited: frozenset[tuple[str, str]] = frozenset()
    _limited_tenants: Mapping[str, int] = MappingProxyType({})
    _sole: tuple[list[rules.ReadyQueue], float] | None = None

    def _pinned(self) -> datetime | None:
        raise NotImplementedError

    def _connection(self) -> AbstractAsyncContextManager[Conn]:
        raise NotImplementedError

    def _transaction(self) -> AbstractAsyncContextManager[Conn]:
        raise NotImplementedError

    def _wake(self, wake: Woken | Wake) -> None:
        raise NotImplementedError

    async def _create_flowing(self, tasks: Sequence[NewTask]) -> list[TaskCreated]:
        raise NotImplementedError  # PgFlow

    async def _claim_flow(
        self, tx: Conn, params: dict[str, Any], limits: asyncpg.Record, take: int
    ) -> list[asyncpg.Record]:
        raise NotImplementedError  # PgFlow

    def _announce(self, statuses: Iterable[str]) -> None:
        """After a commit that left tasks in ``statuses``: wake dispatchers and promoters."""
        self._wake(wake_for(statuses))

    # -- create -----------------------------------------------------------------------------

    async def task_create_many(self, tasks: Sequence[NewTask]) -> list[TaskCreated]:
        """Create tasks all or nothing, in input order (see the protocol).

        One ``INSERT ... SELECT FROM unnest(...) ON CONFLICT DO NOTHING`` makes every new task;
        idempotent hits (earlier rows, a racing insert, or a repeat inside this batch) are read
        back afterwards and returned with ``created=False``. Input PostgreSQL cannot store (a NUL
        character) raises ``ValidationError``. A batch with flow rules (a uniqueness window, a
        debounce, a throttle) is created task by task in one transaction (:meth:`_create_flowing`).
        """
        if not tasks:
            return []
        if any(t.flow is not None for t in tasks):
            return await self._create_flowing(tasks)
        fresh, slots = rules.first_of_each_key(tasks)
        ids = new_ids(len(fresh))
        parents = [tuple(dict.fromkeys(t.depends_on)) for t in fresh]
        for parent in {p for group in parents for p in group}:
            if not is_uuid(parent):
                raise rules.unknown_parent(parent)
        with storable():
            inserted, hits, statuses = await self._insert(fresh, ids, parents)
        made = made_tasks(fresh, ids, parents, inserted, hits, statuses)
        rules.announce_created(made, self.ready_signal, self.due_signal)
        return rules.in_input_order(slots, made)

    async def task_create_claimed(
        self, tasks: Sequence[NewTask], claim: ClaimRequest
    ) -> tuple[list[TaskCreated], list[Lease]]:
        """Create ``tasks`` and claim for ``claim`` in the same transaction (see
        :class:`~duetime.store.protocols.CreateHandoff`): one commit, no wake-up between.

        A plain :meth:`task_create_many` (and no leases) when the claim would take the locked
        path (a limited queue, a tenant with a quota) or a task has parents or flow rules."""
        kind = rules.claim_kind(claim)
        limited = await self._limited_queues()
        if (
            kind != "worker"
            or (claim.tenant_id, claim.queue) in limited
            or claim.tenant_id in self._limited_tenants
            or any(t.depends_on or t.flow is not None for t in tasks)
        ):
            return await self.task_create_many(tasks), []
        fresh, slots = rules.first_of_each_key(tasks)
        ids = new_ids(len(fresh))
        parents: list[tuple[str, ...]] = [()] * len(fresh)
        with storable():
            async with self._transaction() as conn:
                inserted = await _insert_on(conn, self._pinned(), fresh, ids, parents)
                hits = await _fetch_hits(conn, fresh, ids, inserted)
                leases = await self._claim(conn, kind, claim)
        made = rules.announce_handed_over(
            made_tasks(fresh, ids, parents, inserted, hits, None),
            leases,
            self.ready_signal,
            self.due_signal,
        )
        return rules.in_input_order(slots, made), leases

    async def _insert(
        self, fresh: list[NewTask], ids: list[str], parents: list[tuple[str, ...]]
    ) -> tuple[Inserted, dict[tuple[str, str], Task], list[list[str]] | None]:
        """Insert ``fresh`` under ``ids``: what the insert said, the existing tasks behind
        idempotent hits by (tenant, key), and each task's parent statuses (None: no parents)."""
        pinned, n = self._pinned(), len(fresh)
        if not any(parents):  # one statement, which concurrent creates may share
            records = task_input_records(fresh, ids, parents, [0] * n, [False] * n)
            inserted = await self._inserts.insert(pinned, records)
            if not inserted.absent:
                return inserted, {}, None  # no idempotent hit: no connection to read them on
            async with self._connection() as conn:
                return inserted, await _fetch_hits(conn, fresh, ids, inserted), None
        async with self._transaction() as conn:
            return await insert_in(conn, pinned, fresh, ids, parents)

    async def _insert_run(self, pinned: Hashable, records: list[tuple[Any, ...]]) -> Inserted:
        """One ``task_insert`` statement (the :class:`InsertBatcher`'s runner)."""
        async with self._connection() as conn:
            return await _insert_records(conn, pinned, records)

    # -- claim ------------------------------------------------------------------------------

    async def task_claim(self, request: ClaimRequest) -> list[Lease]:
        """Claim from queues without limits (paused and limited queues skipped), then from
        limited queues on the locked path while room is left.

        Push claims are shared across tenants (SPEC §7 "Tenant fairness"): one statement finds
        the tenants with ready push work and their weights (``ready_push_tenants``), and the
        claim gives each its share (:func:`~duetime.store.core.hot.claim_shares`), taken in that
        tenant's own priority and due order. Both run in one transaction.

        How claims keep queue settings: every claim statement skips tasks whose queue row is
        ``paused`` or ``limited`` (one primary-key probe of the tiny ``queues`` table per
        candidate, in the claim's own snapshot). Limited queues are then claimed one transaction
        per queue (:meth:`_claim_limited`).
        """
        kind = rules.claim_kind(request)
        if kind is None:
            return []
        await self._limited_queues()  # refreshes the tenants with a quota too
        quota = sorted(t for t in self._limited_tenants if request.tenant_id in (None, t))
        if not quota:
            return await self._claim(None, kind, request)
        # Tenants with a max_concurrency quota: the whole claim runs under their row locks.
        async with self._transaction() as conn:
            await conn.fetch(*bind("tenant_lock", tenant_ids=quota))
            running = dict(
                (r["tenant_id"], r["n"])
                for r in await conn.fetch(*bind("tenant_running", tenant_ids=quota))
            )
            rooms = {t: self._limited_tenants[t] - running.get(t, 0) for t in quota}
            return await self._claim(conn, kind, rules.with_tenant_rooms(request, rooms))

    async def _claim(
        self, conn: Conn | None, kind: rules.ClaimKind, request: ClaimRequest
    ) -> list[Lease]:
        """The claim itself, on ``conn`` (inside its transaction) or on pooled connections."""
        held: set[tuple[str, str]] | None = None  # (tenant, queue)s with held ready work
        params = {
            "now": self._pinned(),
            "types": sorted(t.value for t in request.target_types),
            "queue": request.queue,
            "names": None if request.names is None else list(request.names),
            "limit": request.limit,
            "lease_seconds": _opt_float(request.lease_seconds),
            "grace_seconds": float(request.lease_grace_seconds),
            "worker_id": request.worker_id,
            "tenant_id": request.tenant_id,
            "exclude": request.excluded_tenants,
        }
        if kind == "push":
            ready = cached = self._sole_tenant(request)
            if ready is None:
                # Who has ready work is read before the transaction: with nothing ready (an
                # idle poll, or a wake-up for a limited queue only) no transaction is begun.
                async with self._on(conn) as c:
                    found = await c.fetch(*bind("ready_push_queues", **params))
                ready = [(r["tenant_id"], r["queue"], r["weight"]) for r in found if not r["held"]]
                held = {(r["tenant_id"], r["queue"]) for r in found if r["held"]}
            tenants, queues = rules.ready_tenants(ready)
            shares = rules.claim_shares(request.limit, tenants, request.room_of)
            found = []
            if shares:
                async with self._within(conn) as tx:
                    found = await self._claim_push(tx, request, params, tenants, queues, shares)
            if len(tenants) != 1 or len(found) < request.limit:
                self._sole = None
            elif cached is None:  # only a read of who has work starts the period, never a claim
                self._sole = (ready, time.monotonic() + SOLE_SECONDS)
        else:
            if request.tenant_id is not None:
                params["limit"] = rules.tenant_take(request, request.tenant_id, request.limit, {})
            found = []
            # A claim of one limited queue only: the statement for queues without limits would
            # skip all of it, so only the locked path below runs.
            alone = (request.tenant_id, request.queue) in self._limited
            if params["limit"] and not alone:
                async with self._on(conn) as c:
                    found = await c.fetch(*bind(_CLAIM[kind], **params))
        leases = sorted((rows.lease(r, D) for r in found), key=rules.claim_order)
        room = request.limit - len(leases)
        if room > 0:
            leases.extend(await self._claim_limited(conn, request, params, room, leases, held))
        return leases

    def _sole_tenant(self, request: ClaimRequest) -> list[rules.ReadyQueue] | None:
        """The one tenant's queues the last push claims found, while they kept coming back full
        (a burst): the claim goes to them without reading who has ready work. A tenant or queue
        arriving meanwhile is seen within :data:`SOLE_SECONDS`, or as soon as a claim comes
        back short."""
        sole = self._sole
        if sole is None or sole[1] < time.monotonic() or request.names or request.queue:
            return None
        ready = sole[0]
        tenant = ready[0][0]
        room = request.room_of(tenant)
        if request.tenant_id not in (None, tenant) or (room is not None and room < request.limit):
            return None  # another tenant may have the rest
        return ready

    @asynccontextmanager
    async def _within(self, conn: Conn | None) -> AsyncIterator[Conn]:
        """A transaction: ``conn``'s savepoint, or a pooled connection's own."""
        if conn is None:
            async with self._transaction() as fresh:
                yield fresh
        else:
            async with conn.transaction():
                yield conn

    @asynccontextmanager
    async def _on(self, conn: Conn | None) -> AsyncIterator[Conn]:
        if conn is None:
            async with self._connection() as fresh:
                yield fresh
        else:
            yield conn

    async def _claim_push(
        self,
        conn: Conn,
        request: ClaimRequest,
        params: dict[str, Any],
        tenants: list[tuple[str, int]],
        queues: Mapping[str, list[str]],
        shares: list[tuple[str, int]],
    ) -> list[asyncpg.Record]:
        """Each tenant with ready push work takes its share from its ``queues``, in rounds
        (see the rules)."""
        limit, cap = request.limit, request.room_of
        # The transaction costs ~0.4 ms per claim; keeping it for backlogs only measured slower
        # bursts (docs/adr/0002-skip-locked-batches.md).
        await conn.execute(Q["claim_in_index_order"].text)
        claimed: list[asyncpg.Record] = []
        taken: Counter[str] = Counter()
        for _ in range(rules.MAX_SHARE_ROUNDS):
            got = await conn.fetch(
                *bind(
                    "task_claim_push",
                    tenant_ids=[t for t, _ in shares for _ in queues[t]],
                    queues=[q for t, _ in shares for q in queues[t]],
                    shares=[n for t, n in shares for _ in queues[t]],
                    **params,
                )
            )
            claimed.extend(got)
            if len(tenants) == 1:
                break
            round_got = Counter(r["tenant_id"] for r in got)
            taken.update(round_got)
            shares, tenants = rules.next_shares(
                limit - len(claimed), tenants, shares, round_got, taken, cap
            )
            if not shares:
                break
        return claimed

    async def _limited_queues(self) -> frozenset[tuple[str, str]]:
        """The (tenant, queue) pairs with a limit, cached for :data:`LIMITED_CACHE_SECONDS`
        (with the tenants that have a ``max_concurrency`` quota)."""
        if time.monotonic() - self._limited_at > LIMITED_CACHE_SECONDS:
            async with self._connection() as conn:
                found = await conn.fetch(Q["queue_limited_all"].text)
                tenants = await conn.fetch(Q["tenant_limited_all"].text)
            self._limited = frozenset((r["tenant_id"], r["name"]) for r in found)
            self._limited_tenants = {r["id"]: r["max_concurrency"] for r in tenants}
            self._limited_at = time.monotonic()
        return self._limited

    async def _claim_limited(
        self,
        conn: Conn | None,
        request: ClaimRequest,
        params: dict[str, Any],
        room: int,
        claimed: list[Lease],
        held: set[tuple[str, str]] | None,
    ) -> list[Lease]:
        """Claim from limited queues, one short transaction each: ``SELECT ... FOR UPDATE`` of
        the queue's row (serializing that queue's claimers on every node), then a claim whose
        ``LIMIT`` is the room left under ``max_concurrency`` and the bucket's whole tokens, then
        the bucket's new level. Queues are visited in random order, so no tenant's limited
        queue always goes first."""
        wanted = [
            (tenant, name)
            for tenant, name in await self._limited_queues()
            if (request.tenant_id is None or tenant == request.tenant_id)
            and (request.queue is None or name == request.queue)
            and request.room_of(tenant) != 0
        ]
        if not wanted:
            return []
        kind = rules.claim_targets(request)
        # Lock only queues that have something to claim: what the push claim read already
        # (``held``), or one cheap read.
        if held is not None:
            ready = [q for q in wanted if q in held]
        else:
            tenants, queues = [t for t, _ in wanted], [n for _, n in wanted]
            async with self._on(conn) as c:
                found = await c.fetch(
                    *bind(_PROBE[kind], tenant_ids=tenants, queues=queues, **params)
                )
            ready = [(r["tenant_id"], r["name"]) for r in found]
        random.shuffle(ready)
        leases: list[Lease] = []
        by_tenant = Counter(lease.task.tenant_id for lease in claimed)
        for tenant, queue in ready:
            if room <= 0:
                break
            want = rules.tenant_take(request, tenant, room, by_tenant)
            if want <= 0:
                continue
            one = {**params, "tenant_id": tenant, "queue": queue}
            async with self._within(conn) as tx:
                limits = await tx.fetchrow(*bind("queue_lock", **one))
                if limits is None:  # resumed, unlimited or paused since the cache was filled
                    self._limited_at = -math.inf  # the next claim reads the cache again
                    continue
                rate, at, since = limits["rate_limit_per_second"], limits["at"], limits["tokens_at"]
                elapsed = 0.0 if since is None else (at - since).total_seconds()
                take, tokens = rules.limited_room(
                    want, limits["tokens"], elapsed, rate, limits["burst"]
                )
                got: list[asyncpg.Record] = []
                if take > 0 and limits["key_rate"] is not None:
                    got = await self._claim_flow(tx, {**one, "limit": take}, limits, take)
                elif take > 0:
                    per_key = limits["max_concurrency_per_key"]
                    statement = "task_claim_keyed" if per_key is not None else _LIMITED[kind]
                    if per_key is not None:
                        await tx.execute(Q["claim_keyed_plan"].text)
                    got = await tx.fetch(
                        *bind(
                            statement,
                            **{**one, "limit": take},
                            max_concurrency=limits["max_concurrency"],
                            per_key=per_key,
                        )
                    )
                if tokens is not None:
                    left = tokens - len(got)
                    await tx.execute(*bind("queue_tokens_put", tokens=left, at=at, **one))
                    if left < 1:
                        self._refill.after(rules.next_token_in(left, rate))
            leases.extend(sorted((rows.lease(r, D) for r in got), key=rules.claim_order))
            by_tenant[tenant] += len(got)
            room -= len(got)
        return leases

    @functools.cached_property
    def _refill(self) -> rules.RefillTimer:
        """Wakes this node's claimers when an empty bucket has a token again (other nodes that
        found it empty set their own)."""
        return rules.RefillTimer(self.ready_signal.wake)

    # -- complete ---------------------------------------------------------------------------

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
        ended = await self._complete(list(sent.values())) if sent else {}
        results: list[CompletionResult] = []
        for c in completions:
            # A repeat in the same batch finds the lease already used.
            status = ended.pop((c.task_id, c.lease_id), None)
            results.append(CompletionResult(c.task_id, c.lease_id, status is not None, status))
        return results

    async def _complete(self, batch: list[Completion]) -> dict[tuple[str, str], TaskStatus]:
        pinned = self._pinned()
        records = [
            (
                c.task_id,
                c.lease_id,
                str(c.outcome),
                c.started_at,
                float(c.duration_ms),
                c.result_json,
                c.error,
                c.http_status,
                None if c.retry_delay_seconds is None else float(c.retry_delay_seconds),
                c.worker,
                c.logs,
                c.response,
                c.status.value,
            )
            for c in batch
        ]
        for attempt in range(_DEADLOCK_RETRIES):
            try:
                async with self._transaction() as conn:
                    found = await conn.fetch(
                        *bind("task_complete_many", now=pinned, completions=records)
                    )
                    settled = await _settle_dependents(conn, pinned, found)
                    dead = [str(r["id"]) for r in found if r["status"] == "failed"]
                    if dead:  # durable notifications, in the transaction of the end
                        await driver.run(conn, pinned, dead_lettered(dead))
                break
            except (pgx.DeadlockDetectedError, pgx.SerializationError):
                # Two batches releasing the same children in different orders: all or nothing,
                # so running the batch again is safe.
                if attempt == _DEADLOCK_RETRIES - 1:
                    raise
        self._announce([*(r["status"] for r in found), *settled.woken])
        if self.ended.wanted:  # only while someone waits: the ids cost nothing otherwise
            self.ended.publish(
                [*(str(r["id"]) for r in found if r["status"] in _ENDED), *settled.ended]
            )
        await self._freed((r["tenant_id"], r["queue"]) for r in found)
        return {(str(r["id"]), str(r["lease_id"])): _STATUS[r["status"]] for r in found}

    async def task_complete_leased(
        self,
        tenant_id: str,
        lease_ids: Sequence[str],
        results: Sequence[str | None],
        logs: Sequence[str | None] | None = None,
    ) -> dict[str, LeasedEnd]:
        """End succeeded attempts by lease id in one statement, without reading the tasks first
        (see :class:`~duetime.store.protocols.LeaseCompleter`)."""
        wanted: dict[str, str | None] = {}
        attached: dict[str, str] = {}  # lease id -> logs, for the few completions with logs
        repeated: set[str] = set()
        for i, (lease_id, result) in enumerate(zip(lease_ids, results, strict=True)):
            if lease_id in wanted:
                repeated.add(lease_id)  # the general path answers the repeat "stale"
            elif is_uuid(lease_id):
                wanted[lease_id] = None if result is None else recorded_result(result)
                text = None if logs is None else logs[i]
                if text is not None:
                    attached[lease_id] = recorded_logs(text)
        for lease_id in repeated:
            wanted.pop(lease_id, None)
            attached.pop(lease_id, None)
        if not wanted:
            return {}
        async with self._connection() as conn:
            found = await conn.fetch(
                *bind(
                    "task_complete_leased",
                    now=self._pinned(),
                    lease_ids=list(wanted),
                    results=list(wanted.values()),
                    # None (no logs at all, the usual case): unnest pads it with NULLs.
                    logs=[attached.get(x) for x in wanted] if attached else None,
                    tenant_id=tenant_id,
                )
            )
        await self._freed((tenant_id, r["queue"]) for r in found)
        if self.ended.wanted:
            self.ended.publish(str(r["id"]) for r in found)
        return {
            str(r["lease_id"]): LeasedEnd(
                task_id=str(r["id"]),
                queue=r["queue"],
                attempt=r["attempts"],
                started_at=r["started_at"],
                traceparent=r["traceparent"],
                target_type=r["target_type"],
            )
            for r in found
        }

    async def _freed(self, queues: Iterable[tuple[str, str]]) -> None:
        """Tasks of these (tenant, queue)s stopped running: when one is limited, its next task
        may start now, so claimers on every node are woken (SPEC §7: a limited queue flows)."""
        try:
            limited = await self._limited_queues()
        except Exception as exc:  # advice only: claimers poll anyway
            log.debug("could not read the limited queues: %s", exc)
            return
        quota = self._limited_tenants
        if (limited or quota) and any(q in limited or q[0] in quota for q in queues):
            self.ready_signal.notify()


@dataclass(frozen=True, slots=True)
class Inserted:
    """What one ``task_insert`` said: the clock it stamped the tasks with (None when it inserted
    none), and the ids it was sent but did not insert (their idempotency key exists)."""

    now: datetime | None
    absent: frozenset[str]


def made_tasks(
    fresh: Sequence[NewTask],
    ids: Sequence[str],
    parents: Sequence[tuple[str, ...]],
    inserted: Inserted,
    hits: Mapping[tuple[str, str], Task],
    statuses: Sequence[Sequence[str]] | None,
) -> list[TaskCreated]:
    """What a create made of each new task: the task as its row now reads (the status by the
    rule ``task_insert`` applied, on the clock it returned; ``statuses`` are the parents'),
    or the existing task behind an idempotent hit."""
    now, absent = inserted.now, inserted.absent
    made: list[TaskCreated] = []
    for i, (new, task_id, group) in enumerate(zip(fresh, ids, parents, strict=True)):
        if task_id not in absent:
            assert now is not None  # the insert stamped at least this task
            run_at = None if new.run_at is None else _utc(new.run_at)
            mine = statuses[i] if statuses else ()
            task, _ = rules.created(new, task_id, mine, group, run_at, now)
            made.append(TaskCreated(task=task, created=True))
            continue
        hit = hits.get((new.tenant_id, new.idempotency_key or ""))
        if hit is None:  # cannot happen: a conflict means a committed row
            raise Conflict(f"task with idempotency key {new.idempotency_key!r} vanished")
        made.append(TaskCreated(task=hit, created=False))
    return made


def _utc(at: datetime) -> datetime:
    """``at`` as the database gives a ``timestamptz`` back: in UTC (naive counts as UTC)."""
    if at.tzinfo is UTC:
        return at
    if at.tzinfo is None:
        return at.replace(tzinfo=UTC)
    return at.astimezone(UTC)


def _opt_float(value: float | None) -> float | None:
    return None if value is None else float(value)


_CLAIM = {"worker": "task_claim_worker", "any": "task_claim_any"}
_PROBE = {
    "worker": "queue_limited_ready_worker",
    "push": "queue_limited_ready_push",
    "any": "queue_limited_ready",
}
_LIMITED = {
    "worker": "task_claim_limited_worker",
    "push": "task_claim_limited_push",
    "any": "task_claim_limited_any",
}


@contextmanager
def storable() -> Iterator[None]:
    """Input PostgreSQL cannot store (a NUL character) is the caller's error, not the store's."""
    try:
        yield
    except pgx.DataError as exc:
        raise ValidationError(f"a task cannot be stored: {exc}") from exc


async def insert_in(
    conn: Conn,
    pinned: datetime | None,
    fresh: list[NewTask],
    ids: list[str],
    parents: list[tuple[str, ...]],
) -> tuple[Inserted, dict[tuple[str, str], Task], list[list[str]] | None]:
    """Insert ``fresh`` under ``ids`` on ``conn``, inside the caller's transaction: what the
    insert said, the existing tasks behind idempotent hits by (tenant, key), and each task's
    parent statuses (None: no parents)."""
    if not any(parents):
        inserted = await _insert_on(conn, pinned, fresh, ids, parents)
        return inserted, await _fetch_hits(conn, fresh, ids, inserted), None
    # Locked parents: their completion waits for our task_deps rows, or we read its end.
    wanted = sorted({p for group in parents for p in group})
    found = {str(r["id"]): r for r in await conn.fetch(*bind("task_parents_lock", ids=wanted))}
    statuses = rules.parent_statuses(
        fresh, {k: (r["tenant_id"], r["status"]) for k, r in found.items()}
    )
    # The clock's part of the rule ("ready or scheduled") is task_insert's (see the ADR).
    starts = [rules.starting_status(mine, None, None) for mine in statuses]
    pending = [waiting for _, waiting in starts]
    dep_failed = [status is TaskStatus.FAILED for status, _ in starts]
    unmarked = [p for p in wanted if not found[p]["has_dependents"]]
    if unmarked:
        await conn.execute(*bind("task_parents_mark", ids=unmarked))
    inserted = await _insert_on(conn, pinned, fresh, ids, parents, pending, dep_failed)
    # Only a blocked child ever needs its parents to find it.
    blocked = [
        i
        for i, task_id in enumerate(ids)
        if task_id not in inserted.absent and pending[i] and not dep_failed[i]
    ]
    if blocked:
        await conn.execute(
            *bind(
                "task_deps_insert",
                parent_ids=[p for i in blocked for p in parents[i]],
                child_ids=[ids[i] for i in blocked for _ in parents[i]],
            )
        )
    return inserted, await _fetch_hits(conn, fresh, ids, inserted), statuses


async def _insert_on(
    conn: Conn,
    pinned: datetime | None,
    fresh: list[NewTask],
    ids: list[str],
    parents: list[tuple[str, ...]],
    pending: list[int] | None = None,
    dep_failed: list[bool] | None = None,
) -> Inserted:
    """One ``task_insert`` of ``fresh`` under ``ids`` on ``conn`` (inside the caller's
    transaction). Without ``pending``/``dep_failed``: no task waits on a parent."""
    n = len(fresh)
    records = task_input_records(fresh, ids, parents, pending or [0] * n, dep_failed or [False] * n)
    return await _insert_records(conn, pinned, records)


async def _insert_records(conn: Conn, pinned: Hashable, records: list[tuple[Any, ...]]) -> Inserted:
    """``task_insert`` of ``records``, and, when it inserted fewer, which it left out."""
    now: datetime | None
    if len(records) == 1:  # a single create's shape: cheaper as a one-row statement
        row = await conn.fetchrow(*bind("task_insert_one", now=pinned, tasks=records))
        now, inserted = (None, 0) if row is None else (row["created_at"], 1)
    else:
        row = await conn.fetchrow(*bind("task_insert", now=pinned, tasks=records))
        assert row is not None  # an aggregate answers one row
        now, inserted = row["now"], row["inserted"]
    absent: frozenset[str] = frozenset()
    if inserted < len(records):
        sent = [r[0] for r in records]
        found = await conn.fetch(*bind("task_ids_present", ids=sent))
        present = {r["id"] for r in found}
        absent = frozenset(i for i in sent if i not in present)
    return Inserted(now, absent)


async def _fetch_hits(
    conn: Conn, fresh: list[NewTask], ids: list[str], inserted: Inserted
) -> dict[tuple[str, str], Task]:
    """The existing tasks behind idempotent hits, by (tenant, key)."""
    missing = [t for t, task_id in zip(fresh, ids, strict=True) if task_id in inserted.absent]
    if not missing:
        return {}
    found = await conn.fetch(
        *bind(
            "task_select_by_idempotency_key",
            tenant_ids=[t.tenant_id for t in missing],
            keys=[t.idempotency_key for t in missing],
        )
    )
    wanted = {(t.tenant_id, t.idempotency_key) for t in missing}
    return {
        (r["tenant_id"], r["idempotency_key"]): rows.task(r, D)
        for r in found
        if (r["tenant_id"], r["idempotency_key"]) in wanted
    }


async def _settle_dependents(
    conn: Conn, pinned: datetime | None, ended: Sequence[asyncpg.Record]
) -> Settled:
    """What follows the end of the tasks with dependents or callbacks among ``ended``
    (:func:`duetime.store.core.follow.settle`, the rule every ending shares)."""
    followed = [(str(r["id"]), r["status"]) for r in ended if r["has_dependents"]]
    if not followed:
        return Settled()
    return await driver.run(conn, pinned, settle(followed))
