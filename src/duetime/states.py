"""The task life cycle: the one source of truth for which transitions exist and who makes them.

Every store implements each transition as one conditional write on (current state, version or
lease); the table below is what the conformance and property tests check stores against, and what
``docs/state-machine.md`` draws.

=============  ===========  ==========================================================
from           to           made by
=============  ===========  ==========================================================
(new)          scheduled    create, ``run_at`` in the future
(new)          ready        create, due now
(new)          blocked      create, with an unfinished ``depends_on`` parent
(new)          failed       create, with a parent that already failed or was cancelled
blocked        scheduled    a parent succeeded, every parent now succeeded, not yet due
blocked        ready        the same, already due
blocked        failed       a parent failed or was cancelled
scheduled      ready        promoter, ``due_at`` reached
retrying       ready        promoter, backoff elapsed
ready          scheduled    patch ``run_at`` into the future
retrying       scheduled    patch ``run_at``
scheduled      ready        patch ``run_at`` to now or the past
ready          running      claim (dispatcher or lease API)
running        succeeded    completion, outcome ``succeeded``
running        retrying     completion (or reaper), retryable and attempts left
running        failed       completion (or reaper), non-retryable or attempts exhausted
running        cancelled    completion (or reaper) of a task whose cancel was requested
scheduled      cancelled    cancel
blocked        cancelled    cancel
ready          cancelled    cancel
retrying       cancelled    cancel
failed         ready        retry (dead-letter replay), a new attempt series
cancelled      ready        retry
=============  ===========  ==========================================================

Cancelling a ``running`` task records the request; the task becomes ``cancelled`` when its attempt
ends — unless that attempt succeeded, in which case the work was done and it is ``succeeded``.
"""

from __future__ import annotations

from duetime.types import TaskStatus

S = TaskStatus

TRANSITIONS: dict[tuple[TaskStatus | None, TaskStatus], str] = {
    (None, S.SCHEDULED): "create",
    (None, S.READY): "create",
    (None, S.BLOCKED): "create",
    (None, S.FAILED): "create",
    (S.BLOCKED, S.SCHEDULED): "dependencies",
    (S.BLOCKED, S.READY): "dependencies",
    (S.BLOCKED, S.FAILED): "dependencies",
    (S.SCHEDULED, S.READY): "promoter",
    (S.RETRYING, S.READY): "promoter",
    (S.READY, S.SCHEDULED): "patch",
    (S.RETRYING, S.SCHEDULED): "patch",
    (S.READY, S.RUNNING): "claim",
    (S.RUNNING, S.SUCCEEDED): "complete",
    (S.RUNNING, S.RETRYING): "complete",
    (S.RUNNING, S.FAILED): "complete",
    (S.RUNNING, S.CANCELLED): "complete",
    (S.SCHEDULED, S.CANCELLED): "cancel",
    (S.BLOCKED, S.CANCELLED): "cancel",
    (S.READY, S.CANCELLED): "cancel",
    (S.RETRYING, S.CANCELLED): "cancel",
    (S.FAILED, S.READY): "retry",
    (S.CANCELLED, S.READY): "retry",
}
"""Every legal edge, keyed (from, to); ``None`` is "not yet created". The value names the action."""


def is_legal(before: TaskStatus | None, after: TaskStatus) -> bool:
    """Whether a task may move from ``before`` to ``after`` (a no-op is always legal)."""
    return before == after or (before, after) in TRANSITIONS
