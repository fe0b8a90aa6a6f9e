"""Handing a lease back without spending its attempt (SPEC §3 "release", §7 circuits).

A worker that stops with prefetched leases it never started, a dispatcher holding a task whose
target's circuit is open, and a lease poll that went away after a create handed it a task all
give the task back: it waits again, ``ready`` now or ``scheduled`` until its new due time
(:func:`duetime.states.after_release`), and the attempt the claim counted is not spent. The store
fences each release on the lease like every lease call, and never releases a task whose cancel
was requested (its holder ends it, and it ends ``cancelled``).
"""

from __future__ import annotations

from collections.abc import Sequence

from duetime.states import after_release
from duetime.store.protocols import CompletionStore
from duetime.types import Release, Released

MAX_RELEASE_DELAY_SECONDS = 30 * 24 * 3600.0
"""The longest a released task may wait before it is due again."""


def handing_back(
    lease_ids: Sequence[str], delay_seconds: float | Sequence[float] = 0.0
) -> list[Release]:
    """The :class:`~duetime.types.Release` of each of ``lease_ids``, due again
    ``delay_seconds`` from now (one delay for all, or one per lease), the delay held within
    ``[0, MAX_RELEASE_DELAY_SECONDS]``."""
    delays = (
        [float(delay_seconds)] * len(lease_ids)
        if isinstance(delay_seconds, int | float)
        else [float(d) for d in delay_seconds]
    )
    if len(delays) != len(lease_ids):
        raise ValueError("a release needs one delay per lease id")
    out: list[Release] = []
    for lease_id, delay in zip(lease_ids, delays, strict=True):
        held = min(max(0.0, delay), MAX_RELEASE_DELAY_SECONDS)
        out.append(Release(lease_id, held, after_release(held)))
    return out


async def release(
    store: CompletionStore,
    lease_ids: Sequence[str],
    delay_seconds: float | Sequence[float] = 0.0,
    tenant_id: str | None = None,
) -> dict[str, Released]:
    """Hand back the tasks running under ``lease_ids`` (of ``tenant_id``, when given). Returns
    lease id → what became of the task; stale leases and tasks whose cancel was requested are
    left out and unchanged."""
    if not lease_ids:
        return {}
    return await store.task_release(handing_back(lease_ids, delay_seconds), tenant_id)
