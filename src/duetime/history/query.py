"""Reads that span the hot and the cold tier (SPEC §8 "Query").

The hot tier is the store (:meth:`~duetime.store.protocols.Store.history_query`); the cold tier
is the archive of exported months (:class:`duetime.history.archive.Archive`), when there is one.
Both are read with the same filter and merged newest first by ``(at, id)``. A record can be in
both for a moment (a month exported but not yet dropped from the store, or a node that died in
between): record ids are unique in a store, so the merge keeps each id once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from duetime.errors import NotFound
from duetime.history.events import HistoryEvent, HistoryFilter, check_history_filter
from duetime.types import Attempt

if TYPE_CHECKING:
    from duetime.store.protocols import HistoryStore


class ColdTier(Protocol):
    """What the query needs of the archive."""

    async def query(self, query: HistoryFilter) -> list[HistoryEvent]:
        """Up to ``query.limit`` archived records matching the filter, newest first."""

    async def attempts(self, tenant_id: str, task_id: str) -> list[Attempt]:
        """The archived attempts of one task, by number."""


def merge_newest_first(limit: int, *tiers: list[HistoryEvent]) -> list[HistoryEvent]:
    """The first ``limit`` records of the tiers' pages by ``(at, id)`` descending, each id once."""
    seen: set[int] = set()
    merged: list[HistoryEvent] = []
    for event in sorted(
        (e for tier in tiers for e in tier), key=lambda e: (e.at, e.id), reverse=True
    ):
        if event.id in seen:
            continue
        seen.add(event.id)
        merged.append(event)
        if len(merged) == limit:
            break
    return merged


async def history_page(
    store: HistoryStore, cold: ColdTier | None, query: HistoryFilter
) -> list[HistoryEvent]:
    """One page of the tenant's history over both tiers (``query.limit`` records at most)."""
    check_history_filter(query)
    hot = await store.history_query(query)
    if cold is None:
        return hot
    return merge_newest_first(query.limit, hot, await cold.query(query))


async def history_attempts(
    store: HistoryStore, tenant_id: str, task_id: str, cold: ColdTier | None = None
) -> list[Attempt]:
    """The attempts of a task that left the hot store: its hot history records, else the
    archive's. ``NotFound`` when neither knows the task (or it is another tenant's)."""
    known = True
    try:
        found = await store.history_attempts(tenant_id, task_id)
    except NotFound:
        if cold is None:
            raise
        known, found = False, []
    if cold is not None:
        archived = await cold.attempts(tenant_id, task_id)
        if not known and not archived:
            raise NotFound(f"no task {task_id}")
        numbers = {a.number for a in found}
        found = sorted([*found, *(a for a in archived if a.number not in numbers)],
                       key=lambda a: a.number)  # fmt: skip
    return found
