"""What a parent's end does to its dependents (``depends_on``): the rule is
:func:`duetime.store.core.follow.settle`, which every ending runs. A child waits ``blocked`` with
``pending_parents`` = parents not yet ended as it needs; this module names the reason a child
failed or was cancelled for a parent.
"""

from __future__ import annotations

DEPENDENCY_FAILED = "a task it depends on failed or was cancelled"
"""``last_error`` of a task failed (or cancelled) because a task it depends on failed or was
cancelled."""
