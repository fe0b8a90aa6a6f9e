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
(new)          cancelled    the same, the task's ``on_parent_failure`` being ``cancel``
(new)          running      handoff: a create due now, claimed for a waiting lease poll in
                            the create's transaction
blocked        scheduled    a parent succeeded, every parent now succeeded, not yet due
blocked        ready        the same, already due
blocked        failed       a parent failed or was cancelled (``on_parent_failure`` ``fail``)
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
running        ready        release: the holder hands the task back unstarted, due now
running        scheduled    release, due again after a delay
scheduled      cancelled    cancel
blocked        cancelled    cancel; or a parent failed (``on_parent_failure`` ``cancel``)
ready          cancelled    cancel
retrying       cancelled    cancel
failed         ready        retry (dead-letter replay), a new attempt series
cancelled      ready        retry
failed         blocked      replay of a workflow's failed nodes, a parent not succeeded
cancelled      blocked      the same
=============  ===========  ==========================================================

Cancelling a ``running`` task records the request; the task becomes ``cancelled`` when its attempt
ends — unless that attempt succeeded, in which case the work was done and it is ``succeeded``.
A release hands a task back without spending its attempt; a task whose cancel was requested is
never released (its holder ends it, and it ends ``cancelled``).

The statuses an ending and a release lead to are decided here (:func:`after_attempt`,
:func:`after_release`), by :mod:`duetime.lifecycle`; the stores apply them under the lease fence
and keep only the cancel-requested override (:func:`after_cancel_request`) and the clock's
arithmetic in SQL.
"""

from __future__ import annotations

from duetime.types import TaskStatus

S = TaskStatus

TRANSITIONS: dict[tuple[TaskStatus | None, TaskStatus], str] = {
    (None, S.SCHEDULED): "create",
    (None, S.READY): "create",
    (None, S.BLOCKED): "create",
    (None, S.FAILED): "create",
    (None, S.CANCELLED): "create",
    (None, S.RUNNING): "handoff",
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
    (S.RUNNING, S.READY): "release",
    (S.RUNNING, S.SCHEDULED): "release",
    (S.SCHEDULED, S.CANCELLED): "cancel",
    (S.BLOCKED, S.CANCELLED): "cancel",
    (S.READY, S.CANCELLED): "cancel",
    (S.RETRYING, S.CANCELLED): "cancel",
    (S.FAILED, S.READY): "retry",
    (S.CANCELLED, S.READY): "retry",
    (S.FAILED, S.BLOCKED): "replay",
    (S.CANCELLED, S.BLOCKED): "replay",
}
"""Every legal edge, keyed (from, to); ``None`` is "not yet created". The value names the action."""


def is_legal(before: TaskStatus | None, after: TaskStatus) -> bool:
    """Whether a task may move from ``before`` to ``after`` (a no-op is always legal)."""
    return before == after or (before, after) in TRANSITIONS


ENDINGS = frozenset({S.SUCCEEDED, S.RETRYING, S.FAILED})
"""The statuses :func:`after_attempt` decides (the store's override may make one ``cancelled``)."""


def after_attempt(succeeded: bool, retry_delay_seconds: float | None) -> TaskStatus:
    """Where a ``running`` task goes when its attempt ends: ``succeeded``; else ``retrying`` when
    a retry is due after a delay; else ``failed`` (the dead-letter set). A store then applies
    :func:`after_cancel_request`."""
    if succeeded:
        return S.SUCCEEDED
    return S.FAILED if retry_delay_seconds is None else S.RETRYING


def after_cancel_request(decided: TaskStatus) -> TaskStatus:
    """What an ending decided as ``decided`` becomes when the task's cancel was requested while
    it ran: ``cancelled``, unless the attempt succeeded (the work was done). Stores apply this
    in SQL, where the request is read under the lease fence."""
    return decided if decided is S.SUCCEEDED else S.CANCELLED


def after_release(delay_seconds: float) -> TaskStatus:
    """Where a released task goes: ``ready`` when due now, else ``scheduled``."""
    return S.SCHEDULED if delay_seconds > 0 else S.READY
