"""The one place an ended attempt is observed, whoever ended it (a push delivery, the reaper, a
worker's ack): failure classes and retry / dead-letter counts, the log line of each failed
attempt and dead letter, and the harm listeners (notifications) — so the three paths cannot
disagree on what they report.

Failure classes (``duetime_attempt_failures_total{failure_class}``), from the attempt:

=================  =================================================================
``timeout``        the attempt ran out of time (``timed_out``)
``lease_expired``  the holder never answered before its lease ran out
``5xx``/``4xx``    the receiver answered with that status (3xx counts as ``4xx``:
                   redirects are not followed, the task fails)
``connect``        an ``http`` target (a pushed type that is not a broker) failed
                   without a status: refused, unresolvable, reset, or a forbidden address
``broker_nack``    a broker target (``amqp``, ``nats``, ``redis``: ``BROKER_TYPES`` of
                   :mod:`duetime.target_types`) refused or failed
``worker_error``   a pull worker (a pulled type: ``worker``) reported the failure
=================  =================================================================
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from duetime import metrics
from duetime.observe import tracing
from duetime.target_types import BROKER_TYPES, PULL_TYPES
from duetime.types import (
    AttemptOutcome,
    Completion,
    CompletionResult,
    Lease,
    LeasedEnd,
    Task,
    TaskStatus,
)

log = logging.getLogger("duetime.attempts")

HarmListener = Callable[[Lease, Completion], None]
"""Told of each dead-lettered task (in the process that recorded it); must not block."""

_listeners: list[HarmListener] = []


def add_dead_letter_listener(listener: HarmListener) -> None:
    """Call ``listener`` for every task this process dead-letters from now on."""
    _listeners.append(listener)


def remove_dead_letter_listener(listener: HarmListener) -> None:
    """Stop calling ``listener`` (no error when it was not added)."""
    if listener in _listeners:
        _listeners.remove(listener)


def failure_class(target_type: str, completion: Completion) -> str | None:
    """The failure class of an ended attempt (see the module); None for a success."""
    outcome = completion.outcome
    if outcome is AttemptOutcome.SUCCEEDED:
        return None
    if outcome is AttemptOutcome.LEASE_EXPIRED:
        return "lease_expired"
    if outcome is AttemptOutcome.TIMED_OUT:
        return "timeout"
    status = completion.http_status
    if status is not None:
        return "5xx" if status >= 500 else "4xx"
    if target_type in PULL_TYPES:
        return "worker_error"
    if target_type in BROKER_TYPES:
        return "broker_nack"
    return "connect"


def log_fields(lease: Lease, **more: Any) -> dict[str, Any]:
    """The ``extra`` of a log record about ``lease``'s task: what the JSON log format carries
    (see :mod:`duetime.observe.logs`)."""
    task = lease.task
    return {
        "task_id": task.id,
        "tenant": task.tenant_id,
        "attempt": lease.attempt,
        "queue": task.queue,
        **more,
    }


def attempts_ended(ended: Iterable[tuple[Lease, Completion, CompletionResult]]) -> None:
    """Observe attempts the store has just recorded (results not accepted — fenced — are
    skipped: another holder's ending is the one that counts). ``duetime_attempts_total`` is
    counted by the callers, who also count attempts a fenced completion ended."""
    for lease, completion, result in ended:
        if not result.accepted:
            continue
        task = lease.task
        # child() caps the tenant label (also for updates forwarded by dispatcher processes).
        metrics.child(metrics.TENANT_ATTEMPTS, task.tenant_id, completion.outcome.value).inc()
        kind = failure_class(task.target["type"], completion)
        if tracing.ENABLED:
            _trace_ending(lease, completion, result, kind)
        if kind is None:
            continue
        metrics.child(metrics.ATTEMPT_FAILURES, task.queue, kind).inc()
        dead = result.status is TaskStatus.FAILED
        if result.status is TaskStatus.RETRYING:
            metrics.child(metrics.RETRIES, task.queue).inc()
        fields = log_fields(
            lease,
            event="attempt_failed",
            outcome=completion.outcome.value,
            failure_class=kind,
            error=completion.error,
            status=str(result.status),
        )
        log.warning(
            "task %s attempt %d %s (%s): %s; %s",
            task.id,
            lease.attempt,
            completion.outcome.value,
            kind,
            completion.error or "no error text",
            "dead-lettered" if dead else f"task now {result.status}",
            extra=fields,
        )
        if dead:
            metrics.child(metrics.DEAD_LETTERS, task.queue).inc()
            log.error(
                "task %s dead-lettered after %d attempts (tenant %s, queue %s): %s",
                task.id,
                lease.attempt,
                task.tenant_id,
                task.queue,
                completion.error or "no error text",
                extra={**fields, "event": "task_dead_lettered"},
            )
            for listener in list(_listeners):
                try:
                    listener(lease, completion)
                except Exception:  # a listener's bug must not lose the other observations
                    log.exception("dead-letter listener failed")


def tracing_attributes(task: Task, attempt: int) -> dict[str, Any]:
    """The attributes every span of one task's attempt carries."""
    return {
        "duetime.task_id": task.id,
        "duetime.tenant": task.tenant_id,
        "duetime.queue": task.queue,
        "duetime.attempt": attempt,
        "duetime.target_type": str(task.target.get("type")),
    }


def trace_succeeded(tenant_id: str, end: LeasedEnd) -> None:
    """The ``duetime.task.complete`` span of a succeeded attempt a store ended by its lease id
    alone (the lease API's acks): the same span :func:`attempts_ended` records."""
    attributes: dict[str, Any] = {
        "duetime.task_id": end.task_id,
        "duetime.tenant": tenant_id,
        "duetime.queue": end.queue,
        "duetime.attempt": end.attempt,
        "duetime.target_type": end.target_type,
        "duetime.outcome": AttemptOutcome.SUCCEEDED.value,
        "duetime.status": TaskStatus.SUCCEEDED.value,
    }
    tracing.record(
        "duetime.task.complete", end.traceparent, end.started_at, None, attributes, error=None
    )


def _trace_ending(
    lease: Lease, completion: Completion, result: CompletionResult, kind: str | None
) -> None:
    attributes = tracing_attributes(lease.task, lease.attempt)
    attributes["duetime.outcome"] = completion.outcome.value
    attributes["duetime.status"] = str(result.status)
    if kind is not None:
        attributes["duetime.failure_class"] = kind
    dead = result.status is TaskStatus.FAILED
    tracing.record(
        "duetime.task.complete",
        lease.task.traceparent,
        completion.started_at,
        None,
        attributes,
        error=(completion.error or "dead-lettered") if dead else None,
    )


def trace_lease(lease: Lease) -> None:
    """The ``duetime.task.ready`` (due time to claim) and ``duetime.task.lease`` spans of a
    task leased to a pull worker."""
    task = lease.task
    attributes = tracing_attributes(task, lease.attempt)
    tracing.record("duetime.task.ready", task.traceparent, task.due_at, task.started_at, attributes)
    attributes["duetime.lease_id"] = lease.lease_id
    tracing.record("duetime.task.lease", task.traceparent, task.started_at, None, attributes)
