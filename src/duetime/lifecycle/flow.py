"""What keyed flow control means for a create (SPEC §7 "Keyed flow control"): the queue's
rules, read once a second per node, are applied to each task being created, and every key is
evaluated here, once (:mod:`duetime.flow.keys`), so the store never evaluates an expression.

For a task of a queue with a key rule (``key_limit``):

- a task that gives no ``concurrency_key`` gets the key's value as its concurrency key when the
  queue limits ``max_concurrency_per_key``;
- with a keyed rate limit, its ``flow_key`` is its concurrency key, given or evaluated (``""``
  when it has none: it then follows the queue's own limits only).

A uniqueness window (the task's own ``unique``, else the queue's), a debounce and a throttle
whose key has a value become the task's :class:`~duetime.types.FlowAsk`, which the store
applies in the create's transaction (:func:`duetime.store.core.flow.decide`). A rule whose key
has no value for the task does not apply to it.

Rules are cached per (tenant, queue) for :data:`RULES_SECONDS`: a change on this node applies
at once (:meth:`FlowGate.forget`), on other nodes within that time. Schedule occurrences (the
materializer's, a trigger's, a backfill's) come through here for their keys only
(``asks=False``): a keyed limit holds for them as for any create, while no uniqueness, debounce
or throttle applies to them (a schedule makes one task an occurrence); so do the tasks of the
graph create (a workflow's nodes, spawned children: :mod:`duetime.lifecycle.workflow`), whose
transaction keeps no flow ledger. The SQL API evaluates the same expressions to the same keys
and keeps uniqueness windows, debounces and throttles in the same ledger (migration
``0032_sql_api_flow_rules.sql``, docs/flow-control.md). A task made without a flow
key (before its queue had a keyed rate limit) gets ``""`` from the leader's flow sweep
(:func:`duetime.store.core.flow.flow_sweep`).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence

from duetime.flow.keys import KeySource, evaluate
from duetime.store.protocols import QueueStore
from duetime.types import FlowAsk, FlowRules, NewTask

RULES_SECONDS = 1.0
"""How long a node trusts what it read of a queue's rules."""

Rules = tuple[FlowRules, int | None]
"""A queue's flow rules and its ``max_concurrency_per_key``."""

_NONE: Rules = (FlowRules(), None)


class FlowGate:
    """Applies the queues' flow rules to tasks being created (see the module)."""

    def __init__(self, clock: Callable[[], float] | None = None) -> None:
        self._cache: dict[tuple[str, str], tuple[float, Rules]] = {}
        self._clock = clock or time.monotonic

    def forget(self, tenant_id: str, queue: str) -> None:
        """The queue's rules changed on this node: read them again on the next create."""
        self._cache.pop((tenant_id, queue), None)

    async def rules(self, store: QueueStore, tenant_id: str, queue: str) -> Rules:
        """The queue's rules, as read at most :data:`RULES_SECONDS` ago."""
        now = self._clock()
        found = self._cache.get((tenant_id, queue))
        if found is not None and now - found[0] < RULES_SECONDS:
            return found[1]
        return await self._read(store, tenant_id, queue, now)

    async def _read(self, store: QueueStore, tenant_id: str, queue: str, now: float) -> Rules:
        key = (tenant_id, queue)
        stored = await store.queue_get(tenant_id, queue)
        rules = _NONE
        if stored is not None:
            rules = (stored.settings.flow, stored.settings.max_concurrency_per_key)
        if len(self._cache) > 10_000:  # many tenants' queues: keep the cache bounded
            self._cache.clear()
        self._cache[key] = (now, rules)
        return rules

    async def apply(
        self, store: QueueStore, tenant_id: str, tasks: Sequence[NewTask], *, asks: bool = True
    ) -> Sequence[NewTask]:
        """``tasks`` under their queues' rules (the same objects when no rule applies); with
        ``asks`` False, their keys only (no :class:`~duetime.types.FlowAsk`). The creates' hot
        path: the cache is read without a coroutine per task or queue."""
        now = self._clock()
        found: dict[str, Rules] = {}
        for task in tasks:
            queue = task.queue
            if queue in found:
                continue
            hit = self._cache.get((tenant_id, queue))
            if hit is not None and now - hit[0] < RULES_SECONDS:
                found[queue] = hit[1]
            else:
                found[queue] = await self._read(store, tenant_id, queue, now)
        if not any(rules for rules, _ in found.values()) and all(t.flow is None for t in tasks):
            return tasks
        return [keyed(t, *found[t.queue], asks=asks) for t in tasks]


def keyed(new: NewTask, rules: FlowRules, per_key: int | None, *, asks: bool = True) -> NewTask:
    """``new`` with its keys evaluated under its queue's ``rules`` (see the module); with
    ``asks`` False, without its uniqueness, debounce and throttle."""
    if not rules and new.flow is None:
        return new
    changes: dict[str, object] = {}
    concurrency_key = new.concurrency_key
    source = KeySource(new.name, new.labels, new.payload_json, concurrency_key)
    if rules.key:
        value = concurrency_key if concurrency_key is not None else evaluate(rules.key, source)
        if per_key is not None and concurrency_key is None and value is not None:
            changes["concurrency_key"] = source.concurrency_key = value
        if rules.key_rate is not None:
            changes["flow_key"] = value or ""
    if not asks:
        changes["flow"] = None
        return dataclasses.replace(new, **changes)  # type: ignore[arg-type]
    own = new.flow.unique if new.flow is not None else None
    unique = own
    if unique is None and rules.unique is not None:
        key = evaluate(rules.unique.key, source)
        unique = None if key is None else (key, rules.unique)
    debounce = throttle = None
    if rules.debounce is not None:
        key = evaluate(rules.debounce.key, source)
        debounce = None if key is None else (key, rules.debounce)
    if rules.throttle is not None:
        key = evaluate(rules.throttle.key, source)
        throttle = None if key is None else (key, rules.throttle)
    ask = FlowAsk(unique, debounce, throttle)
    changes["flow"] = ask if (unique or debounce or throttle) else None
    return dataclasses.replace(new, **changes)  # type: ignore[arg-type]
