"""The PostgreSQL store's keyed flow control: creates with flow rules, task by task in one
transaction (:func:`duetime.store.core.flow.decide`, then the ordinary insert), and the claim of
a queue with a keyed rate limit (:mod:`duetime.store.core.keyed`), inside the queue's lock.

Concurrent creates of one key wait for each other on the key's ledger row (every node), so a
uniqueness window makes exactly one task however many race for it. Creates of several keys in
different orders can deadlock; PostgreSQL then aborts one, and it runs again.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import MutableMapping, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import TYPE_CHECKING, Any

import asyncpg
from asyncpg import exceptions as pgx

from duetime.ids import is_uuid, new_ids
from duetime.store.core import flow, keyed
from duetime.store.core import hot as rules
from duetime.store.postgres import driver
from duetime.store.postgres.hot import bind, insert_in, made_tasks, storable
from duetime.store.postgres.signals import PgSignal
from duetime.types import NewTask, TaskCreated

if TYPE_CHECKING:
    from asyncpg.pool import PoolConnectionProxy

    Conn = PoolConnectionProxy[asyncpg.Record]

_DEADLOCK_RETRIES = 3


class PgFlow:
    """Keyed flow control of :class:`~duetime.store.postgres.backend.PostgresStore` (a mixin:
    the store provides connections, the pinned time, its signals and its refill timer)."""

    ready_signal: PgSignal
    due_signal: PgSignal
    _refill: rules.RefillTimer

    def _pinned(self) -> datetime | None:
        raise NotImplementedError

    def _transaction(self) -> AbstractAsyncContextManager[Conn]:
        raise NotImplementedError

    @functools.cached_property
    def _flow_cursors(self) -> MutableMapping[tuple[str, str], str]:
        """Per (tenant, queue): where this node's next keyed claim starts its list of keys."""
        return {}

    async def _create_flowing(self, tasks: Sequence[NewTask]) -> list[TaskCreated]:
        """Create ``tasks`` in input order, all or nothing, each decided by its flow rules
        before it is inserted (see the module)."""
        pinned = self._pinned()
        for attempt in range(_DEADLOCK_RETRIES):
            try:
                with storable():
                    async with self._transaction() as conn:
                        done = [await _create_one(conn, pinned, new) for new in tasks]
                break
            except (pgx.DeadlockDetectedError, pgx.SerializationError):
                if attempt == _DEADLOCK_RETRIES - 1:
                    raise
        rules.announce_created(done, self.ready_signal, self.due_signal)
        return done

    async def _claim_flow(
        self, tx: Conn, params: dict[str, Any], limits: asyncpg.Record, take: int
    ) -> list[asyncpg.Record]:
        """Claim up to ``take`` of a queue with a keyed rate limit, inside its lock (``tx``);
        ``params`` are the claim's, for this queue; ``limits`` what ``queue_lock`` read."""
        rate, burst, per_key, at = (
            limits["key_rate"], limits["key_burst"], limits["max_concurrency_per_key"],
            limits["at"],
        )  # fmt: skip
        slot = (params["tenant_id"], params["queue"])
        cap = keyed.scan_cap(take)
        await tx.execute(rules_sql("claim_in_index_order"))
        heads = await _heads(tx, params, self._flow_cursors.get(slot), cap, per_key)
        if not heads:  # said to have ready work: tasks that came without a flow key
            filled = await tx.execute(*bind("flow_keys_fill_queue", **params))
            if filled != "UPDATE 0":
                heads = await _heads(tx, params, None, cap, per_key)
        cursor = keyed.next_cursor(heads, cap)
        if cursor is None:
            self._flow_cursors.pop(slot, None)
        else:
            self._flow_cursors[slot] = cursor
        takes, waiting = keyed.plan_takes(heads, take, at, rate, burst, per_key)
        got: list[asyncpg.Record] = []
        if takes:
            many = [t for t in takes if t.take > 1]
            got = await tx.fetch(
                *bind(
                    "task_claim_flow",
                    **params,
                    max_concurrency=limits["max_concurrency"],
                    heads=[t.head for t in takes if t.take == 1],
                    keys=[t.key for t in many],
                    takes=[t.take for t in many],
                )
            )
        taken = Counter(r["flow_key"] for r in got)
        writes, emptied = keyed.bucket_writes(takes, taken, at, rate, burst)
        if writes:
            await tx.execute(
                *bind(
                    "flow_buckets_put",
                    **params,
                    keys=[k for k, _, _ in writes],
                    tokens=[t for _, t, _ in writes],
                    full_ats=[f for _, _, f in writes],
                    at=at,
                )
            )
        refill = keyed.refill_after(waiting, emptied)
        if refill is not None:
            self._refill.after(refill)
        return got


def rules_sql(name: str) -> str:
    """A parameterless statement of ``hot_batch.sql``."""
    text: str = bind(name)[0]
    return text


async def _heads(
    tx: Conn, params: dict[str, Any], cursor: str | None, cap: int, per_key: int | None
) -> list[keyed.KeyHead]:
    """Up to ``cap`` keys with ready work after ``cursor``, then from the first key on."""
    heads = await _read_heads(tx, params, cursor, None, cap, per_key)
    if len(heads) < cap and cursor is not None:
        heads += await _read_heads(tx, params, None, cursor, cap - len(heads), per_key)
    return heads


async def _read_heads(
    tx: Conn,
    params: dict[str, Any],
    after: str | None,
    upto: str | None,
    cap: int,
    per_key: int | None,
) -> list[keyed.KeyHead]:
    found = await tx.fetch(
        *bind("flow_ready_keys", **params, after=after, upto=upto, cap=cap, per_key=per_key)
    )
    return [
        keyed.KeyHead(
            r["key"],
            r["priority"],
            r["due_at"],
            r["tokens"],
            r["tokens_at"],
            r["running"],
            r["id"],
        )
        for r in found
    ]


async def _create_one(conn: Conn, pinned: datetime | None, new: NewTask) -> TaskCreated:
    """One task of a create with flow rules: decided, then inserted (or answered)."""
    rules.first_of_each_key([new])  # the target's type is checked before anything runs
    (task_id,) = new_ids(1)
    decided = flow.Decided(new, None)
    if new.flow is not None:
        decided = await driver.run(conn, pinned, flow.decide(new, task_id))
    if decided.new is None:
        assert decided.existing is not None
        return TaskCreated(decided.existing, False, decided.notes)
    parents = [tuple(dict.fromkeys(new.depends_on))]
    for parent in parents[0]:
        if not is_uuid(parent):
            raise rules.unknown_parent(parent)
    inserted, hits, statuses = await insert_in(conn, pinned, [decided.new], [task_id], parents)
    (result,) = made_tasks([decided.new], [task_id], parents, inserted, hits, statuses)
    if result.created:
        return TaskCreated(result.task, True, decided.notes)
    if decided.holds:  # a racing create stored the idempotency key first: its task answers
        await driver.run(conn, pinned, flow.repoint(new, decided.holds, result.task.id))
    return result
