"""How an attempt ends: one rule from its outcome and the task's policy to the task's next status,
the delay before its next attempt and the reason recorded (SPEC §2).

Every ending goes through :func:`ended`, whoever reports it — the dispatcher after a push
delivery, a worker's ack through the lease API, the reaper for an expired lease — so what a
failure means is decided once. The status is decided through :mod:`duetime.states`
(:func:`~duetime.states.after_attempt`); the store applies it under the lease fence, and the only
rule left to the store is the cancel-requested override, read under that same fence.

A retry delay that cannot be worked out (whatever a stored policy holds) never loses the attempt:
the task fails with the reason appended to its error.
"""

from __future__ import annotations

import logging
from datetime import datetime

from duetime.retry import next_retry_delay
from duetime.states import after_attempt
from duetime.store.isolation import reason
from duetime.types import AttemptOutcome, Completion, Lease, Task, TaskStatus, value_type

log = logging.getLogger("duetime.lifecycle")


@value_type
class Ending:
    """What an attempt's end means for its task: the next ``status`` (``succeeded``,
    ``retrying`` or ``failed``), the delay before the next attempt (``retrying`` only) and the
    error to record (None for a success)."""

    status: TaskStatus
    retry_delay_seconds: float | None
    error: str | None


def decide(
    task: Task,
    outcome: AttemptOutcome,
    *,
    retryable: bool = True,
    retry_after_seconds: float | None = None,
    error: str | None = None,
) -> Ending:
    """The :class:`Ending` of ``task``'s attempt (``task.attempts`` counts it): a success ends
    it; a failure is retried per the task's policy (not sooner than ``retry_after_seconds``)
    unless it is not ``retryable`` or attempts are exhausted."""
    if outcome is AttemptOutcome.SUCCEEDED:
        return Ending(after_attempt(True, None), None, None)
    try:
        delay = next_retry_delay(task, retryable=retryable, retry_after_seconds=retry_after_seconds)
    except Exception as exc:  # a stored policy must not lose the attempt: no retry
        delay = None
        error = f"{error}; {reason('could not compute the retry', exc)}"
        log.error("task %s: %s", task.id, error)
    return Ending(after_attempt(False, delay), delay, error)


def ended(
    lease: Lease,
    outcome: AttemptOutcome,
    *,
    started_at: datetime,
    duration_ms: float,
    retryable: bool = True,
    retry_after_seconds: float | None = None,
    error: str | None = None,
    result_json: str | None = None,
    http_status: int | None = None,
    worker: str | None = None,
    logs: str | None = None,
    response: str | None = None,
) -> Completion:
    """The :class:`~duetime.types.Completion` that ends the attempt held under ``lease``, with
    its status decided by :func:`decide`."""
    ending = decide(
        lease.task,
        outcome,
        retryable=retryable,
        retry_after_seconds=retry_after_seconds,
        error=error,
    )
    return Completion(
        task_id=lease.task.id,
        lease_id=lease.lease_id,
        outcome=outcome,
        started_at=started_at,
        duration_ms=duration_ms,
        result_json=result_json if outcome is AttemptOutcome.SUCCEEDED else None,
        error=ending.error,
        http_status=http_status,
        retry_delay_seconds=ending.retry_delay_seconds,
        worker=worker,
        logs=logs,
        response=response,
        status=ending.status,
    )


def expired(lease: Lease, now: datetime) -> Completion:
    """The ``lease_expired`` ending of a lease the reaper found expired at ``now`` (the store's
    clock): retried like any retryable failure."""
    task = lease.task
    started = task.started_at or now
    return ended(
        lease,
        AttemptOutcome.LEASE_EXPIRED,
        started_at=started,
        duration_ms=max(0.0, (now - started).total_seconds() * 1000),
        error=f"lease expired at {lease.lease_expires_at.isoformat()}",
        worker=task.worker_id,
    )


@value_type
class Ack:
    """A worker's end of the attempt under ``lease_id``: a complete (``ok``) or a fail;
    ``logs``: the worker's text for the attempt (cut and cleaned by the store)."""

    lease_id: str
    ok: bool
    result_json: str | None = None
    error: str | None = None
    retryable: bool = True
    retry_after_seconds: float | None = None
    timed_out: bool = False
    logs: str | None = None

    @property
    def outcome(self) -> AttemptOutcome:
        if self.ok:
            return AttemptOutcome.SUCCEEDED
        return AttemptOutcome.TIMED_OUT if self.timed_out else AttemptOutcome.FAILED


def acked(ack: Ack, lease: Lease, now: datetime) -> Completion:
    """The ending a worker's ``ack`` reports under ``lease``. The attempt's duration runs from
    its start (the store's clock) to ``now`` (this node's), never below zero."""
    task = lease.task
    started = task.started_at or now
    return ended(
        lease,
        ack.outcome,
        started_at=started,
        duration_ms=max(0.0, (now - started).total_seconds() * 1000),
        retryable=ack.retryable,
        retry_after_seconds=ack.retry_after_seconds,
        error=ack.error,
        result_json=ack.result_json,
        worker=task.worker_id,
        logs=ack.logs,
    )
