"""What a parent's end does to its dependents (``depends_on``), once for both backends.

A child waits ``blocked`` with ``pending_parents`` = parents not yet succeeded. Each parent that
succeeds releases it by one; at zero it becomes ``ready`` (or ``scheduled`` if its ``run_at`` is
ahead). A parent that fails or is cancelled fails every blocked descendant, transitively.
"""

from __future__ import annotations

from collections.abc import Collection

from duetime.store.core.plan import Plan, count

DEPENDENCY_FAILED = "a task it depends on failed or was cancelled"
"""``last_error`` of a task failed because a task it depends on failed or was cancelled."""


def fail_dependents(parent_ids: Collection[str]) -> Plan[int]:
    """``parent_ids`` failed or were cancelled: every blocked descendant fails. Returns how many
    (call it only for parents with ``has_dependents``; it costs a statement)."""
    if not parent_ids:
        return 0
    ids = list(parent_ids)
    failed: int = yield count("task_deps_fail", parent_ids=ids, error=DEPENDENCY_FAILED)
    return failed
