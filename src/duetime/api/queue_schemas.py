"""Request bodies and response shapes of queues, pull workers and leases (SPEC §3 "Queues and
pull workers"). Strict like :mod:`duetime.api.schemas`: unknown fields and type coercion are
refused. Responses are rendered by hand (:mod:`duetime.api.routes.leases` and
:mod:`duetime.api.routes.queues`); the ``*Out`` models only document them.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from duetime.api.fields import CleanText, JsonAny, Whole, rules
from duetime.api.schemas import (
    MAX_BATCH,
    Duration,
    KeyExpression,
    Name,
    StatusName,
    StrictModel,
    TaskOut,
)
from duetime.api.workflow_schemas import ParentOut
from duetime.retry import MAX_RETRY_AFTER_SECONDS
from duetime.store.recorded import LOGS_LIMIT_BYTES
from duetime.text import clean

MAX_LEASE_TASKS = 1000
DEFAULT_LEASE_TASKS = 10
MIN_LEASE_SECONDS = 0.1
MAX_LEASE_SECONDS = 12 * 3600.0
DEFAULT_LEASE_SECONDS = 30.0
MAX_WAIT_SECONDS = 60.0
DEFAULT_WAIT_SECONDS = 20.0
MAX_LEASE_NAMES = 100
MAX_CONCURRENCY = 1_000_000
MAX_RATE_PER_SECOND = 1_000_000.0
MAX_ERROR_CHARS = 4096
"""A failure's ``error`` is kept to this many characters (a longer one is cut, not refused: a
worker reporting a long traceback must not have its failure refused)."""
MAX_ERROR_BYTES = 4 * MAX_ERROR_CHARS
MAX_LOGS_CHARS = 1_000_000
"""Logs longer than this are refused (422); shorter ones over the 64 KiB kept are cut."""


def _recordable(text: str) -> str:
    # An error is recorded text (duetime.text): a NUL or lone surrogate in a worker's traceback
    # is replaced, not refused, so the failure is still recorded.
    return clean(text, MAX_ERROR_BYTES)


def _logs(text: str) -> str:
    # Logs are recorded text too, cut to their limit here (not refused) so a long log never
    # costs a failed ack; the store cleans and cuts again, alike on both stores.
    return clean(text, LOGS_LIMIT_BYTES)


Logs = Annotated[
    str,
    Field(
        max_length=MAX_LOGS_CHARS,
        description="Text to keep with the attempt (what the handler printed, a summary): "
        f"its first {LOGS_LIMIT_BYTES // 1024} KiB of UTF-8 are kept, the rest is cut; control "
        "characters but tab and newlines are replaced. Shown by `GET /v1/tasks/{id}/attempts` "
        "and the history.",
    ),
    AfterValidator(_logs),
]


WorkerId = Annotated[
    str,
    Field(
        min_length=1,
        max_length=200,
        pattern=r"^[^\x00-\x1f\x7f-\x9f]+$",
        description="Names the worker in `GET /v1/workers` and in attempt histories.",
    ),
    CleanText,
]
LeaseSeconds = Annotated[float, Field(ge=MIN_LEASE_SECONDS, le=MAX_LEASE_SECONDS)]
LeaseId = Annotated[str, Field(min_length=1, max_length=64)]
Limit = Annotated[int, Field(ge=1, le=MAX_CONCURRENCY), Whole]


Rate = Annotated[
    str | float | int,
    Field(
        description='Per second: `"10/s"`, `"600/m"`, `"3600/h"`, or a number, within the '
        "field's range.",
        json_schema_extra=rules(("*", "")),
    ),
]


class KeyLimitIn(StrictModel):
    """Limits per key: ``key`` is evaluated on each task when it is created; ``rate`` (with
    ``burst``, default one second's worth) is a token bucket per key value, ``max_concurrency``
    the most tasks of one key value that run at once (the queue's
    ``max_concurrency_per_key``, applied to the key). Tasks with no value for the key follow
    the queue's own limits."""

    key: KeyExpression
    rate: Rate | None = None
    burst: Limit | None = None
    max_concurrency: Limit | None = None


class UniqueIn(StrictModel):
    """A uniqueness window: a create within ``period`` of a task made with the same key, while
    that task is in one of ``states`` (default: every status but failed and cancelled), makes
    nothing and answers 200 with that task (``Duetime-Unique: existing``)."""

    key: KeyExpression
    period: Duration
    states: Annotated[list[StatusName], Field(min_length=1, max_length=8)] | None = None


class DebounceIn(StrictModel):
    """Run once after the last of a burst: a create whose key has a task waiting from an
    earlier create updates that task (its payload, due ``period`` from now) instead of making
    one (``Duetime-Debounce: absorbed``), never past ``max_wait`` (default ten times ``period``)
    from the burst's first create."""

    key: KeyExpression
    period: Duration
    max_wait: Duration | None = None


class ThrottleIn(StrictModel):
    """Delay, not drop: the creates of one key run at most ``rate`` per second (``burst`` at
    once, default 1), each scheduled at its key's next free slot
    (``Duetime-Throttle: delayed``)."""

    key: KeyExpression
    rate: Rate
    burst: Limit | None = None


class QueuePutIn(StrictModel):
    """A queue's settings, replaced as a whole (a field left out takes its default).

    ``paused`` stops every claim of the queue's tasks (dispatch and lease) until set back to
    false; ``max_concurrency`` caps how many of its tasks run at once;
    ``rate_limit_per_second`` bounds how many start per second, as a token bucket of ``burst``
    tokens (default one second's worth, at least 1); ``max_concurrency_per_key`` caps how many
    tasks of one ``concurrency_key`` run at once (1: a key's tasks run one at a time, in
    priority, due, creation order). Limits hold across nodes (SPEC §7). ``key_limit``,
    ``unique``, ``debounce`` and ``throttle`` are keyed flow control (docs/flow-control.md).
    """

    model_config = ConfigDict(
        json_schema_extra=rules(
            ("burst", "burst needs rate_limit_per_second"),
            ("unique", "give key (the key itself) or key_from"),
            *((status, f"retention.{status}") for status in ("succeeded", "failed", "cancelled")),
        )
    )

    rate_limit_per_second: Annotated[float, Field(gt=0, le=MAX_RATE_PER_SECOND)] | None = None
    burst: Limit | None = None
    max_concurrency: Limit | None = None
    max_concurrency_per_key: Limit | None = None
    paused: bool = False
    key_limit: KeyLimitIn | None = None
    unique: UniqueIn | None = None
    debounce: DebounceIn | None = None
    throttle: ThrottleIn | None = None
    retention: dict[str, Annotated[str, Field(max_length=64)]] | None = Field(
        default=None,
        json_schema_extra={"propertyNames": {"enum": ["succeeded", "failed", "cancelled"]}},
        description="How long finished tasks stay, per final status, as ISO 8601 durations: "
        '`{"succeeded": "P7D", "failed": "P30D", "cancelled": "P7D"}`; a status left out '
        "keeps the server default (docs/history.md).",
    )


class LeaseIn(StrictModel):
    """Lease up to ``max_tasks`` due ``worker`` tasks of the queue, waiting up to
    ``wait_seconds`` for one to become due (a long poll). ``names`` narrows to tasks with those
    names. Each lease lasts ``lease_seconds`` unless extended by a heartbeat."""

    max_tasks: Annotated[int, Field(ge=1, le=MAX_LEASE_TASKS), Whole] = DEFAULT_LEASE_TASKS
    lease_seconds: LeaseSeconds = DEFAULT_LEASE_SECONDS
    wait_seconds: Annotated[float, Field(ge=0, le=MAX_WAIT_SECONDS)] = DEFAULT_WAIT_SECONDS
    worker_id: WorkerId
    names: Annotated[list[Name], Field(min_length=1, max_length=MAX_LEASE_NAMES)] | None = None


class HeartbeatIn(StrictModel):
    """Extend the lease to ``extend_seconds`` from now (the body may be empty)."""

    extend_seconds: LeaseSeconds = DEFAULT_LEASE_SECONDS


class CompleteIn(StrictModel):
    """The attempt succeeded; ``result`` (any JSON, at most max_payload_bytes encoded) is kept as
    the task's result, ``logs`` (up to 64 KiB) with the attempt."""

    result: JsonAny = None
    logs: Logs | None = None


class FailIn(StrictModel):
    """The attempt failed. ``retryable=false`` fails the task for good; otherwise it is retried
    per its retry policy, not sooner than ``retry_after_seconds`` when given. ``logs`` (up to
    64 KiB) are kept with the attempt."""

    error: Annotated[str, Field(max_length=1_000_000), AfterValidator(_recordable)]
    retryable: bool = True
    retry_after_seconds: Annotated[float, Field(ge=0, le=MAX_RETRY_AFTER_SECONDS)] | None = None
    logs: Logs | None = None
    timed_out: bool = False
    """The handler ran out of the task's ``timeout_seconds``: the attempt's outcome is
    ``timed_out`` instead of ``failed`` (retried alike)."""


class CompleteItem(CompleteIn):
    lease_id: LeaseId


class FailItem(FailIn):
    lease_id: LeaseId


ReleaseDelay = Annotated[float, Field(ge=0, le=30 * 24 * 3600)]


class ReleaseIn(StrictModel):
    """Hand the task back without spending its attempt: it is due again ``delay_seconds`` from
    now (the body may be empty)."""

    delay_seconds: ReleaseDelay = 0.0


class ReleaseBatchIn(StrictModel):
    """Hand back up to 1,000 leases in one call."""

    lease_ids: Annotated[list[LeaseId], Field(min_length=1, max_length=MAX_BATCH)]
    delay_seconds: ReleaseDelay = 0.0


class CompleteBatchIn(StrictModel):
    """Complete up to 1,000 leases in one call."""

    items: Annotated[list[CompleteItem], Field(min_length=1, max_length=MAX_BATCH)]


class FailBatchIn(StrictModel):
    """Fail up to 1,000 leases in one call."""

    items: Annotated[list[FailItem], Field(min_length=1, max_length=MAX_BATCH)]


# -- response shapes (documentation only) ------------------------------------------------------


class QueueOut(BaseModel):
    """A queue's settings (defaults when it was never configured) and live figures."""

    name: str
    configured: bool = Field(description="False for a queue that exists only through its tasks.")
    paused: bool
    max_concurrency: int | None
    rate_limit_per_second: float | None
    burst: int | None
    max_concurrency_per_key: int | None
    updated_at: datetime | None = Field(description="When the settings last changed.")
    counts: dict[str, int] = Field(description="Tasks by status (every status, zeros included).")
    running: int
    oldest_due_lag_seconds: float | None = Field(
        description="How late the most overdue ready task is; null when none is ready."
    )
    tokens: float | None = Field(
        description="Whole starts the rate limit allows now (the token bucket's level); null "
        "without a rate limit."
    )
    held_by: list[str] = Field(
        description="What keeps ready tasks waiting now: `paused`, `max_concurrency`, "
        "`rate_limit_per_second`, `max_concurrency_per_key` (their keys are busy); empty when "
        "nothing waits or nothing holds it back."
    )
    retention: dict[str, str] | None = Field(
        default=None,
        description="The queue's own retention periods (statuses absent keep the server defaults).",
    )
    key_limit: dict[str, Any] | None = Field(
        default=None, description="Limits per key (`key`, `rate`, `burst`, `max_concurrency`)."
    )
    unique: dict[str, Any] | None = Field(default=None, description="The uniqueness window.")
    debounce: dict[str, Any] | None = Field(default=None, description="The debounce.")
    throttle: dict[str, Any] | None = Field(default=None, description="The throttle.")
    keys: list[KeyOut] | None = Field(
        default=None,
        description="One queue's answer (`GET` and `PUT /v1/queues/{name}`), for a queue with "
        "limits per key: its busiest keys, and what holds each one's ready tasks.",
    )


class KeyOut(BaseModel):
    """One key of a queue's keyed limits, now."""

    key: str
    ready: int = Field(description="Ready tasks of the key (among the first 10,000 ready).")
    running: int
    tokens: float | None = Field(
        description="Whole starts its rate limit allows now; null: a full bucket, or no rate."
    )
    next_start_at: datetime | None = Field(
        description="When its rate limit next allows a start; null: now."
    )
    held_by: list[str] = Field(
        description="What keeps its ready tasks waiting: `rate`, `max_concurrency`."
    )
    waiting: str | None = Field(
        description='Why its ready tasks wait, in words ("rate limit of key X: next start at '
        '..."); null when nothing holds them.'
    )


QueueOut.model_rebuild()


class QueueListOut(BaseModel):
    items: list[QueueOut]


class LeaseOut(BaseModel):
    lease_id: str
    lease_expires_at: datetime
    attempt: int = Field(description="The attempt this lease runs (1 for the first).")
    traceparent: str | None = Field(
        None, description="The task's W3C trace context (given at create), for the handler."
    )
    payload_url: str | None = Field(
        None,
        description="Only for a task whose payload duetime holds (`payload_held`): GET it for "
        "the payload, during this attempt only.",
    )
    task: TaskOut
    parents: list[ParentOut] | None = Field(
        None,
        description="For a task with depends_on: its parents' outcomes, in order (a result over "
        "64 KiB as result_ref).",
    )


class LeasesOut(BaseModel):
    leases: list[LeaseOut]


class LeaseExtendedOut(BaseModel):
    """The lease's new expiry. ``cancel_requested``: the task was cancelled while running; the
    worker should stop working on it and fail the lease (the task then ends ``cancelled``)."""

    lease_id: str
    lease_expires_at: datetime
    cancel_requested: bool = False


class AckOut(BaseModel):
    """What became of one complete or fail: ``ok``, or ``stale`` when the lease was no longer
    current (expired and reaped, already ended, unknown, or another tenant's): nothing changed."""

    lease_id: str
    status: Literal["ok", "stale"]
    task_id: str | None
    task_status: Literal["succeeded", "failed", "retrying", "cancelled"] | None = Field(
        description="The task's status afterwards; null when stale."
    )


class AckListOut(BaseModel):
    items: list[AckOut]


class ReleaseOut(BaseModel):
    """What became of one hand-back: ``ok``, or ``stale`` when the lease was no longer current
    (or the task's cancel was requested: end it with fail instead): nothing changed."""

    lease_id: str
    status: Literal["ok", "stale"]
    task_id: str | None
    task_status: Literal["ready", "scheduled"] | None


class ReleaseListOut(BaseModel):
    items: list[ReleaseOut]


class WorkerOut(BaseModel):
    worker_id: str
    queues: list[str] = Field(description="Queues it has polled.")
    first_seen_at: datetime
    last_seen_at: datetime = Field(description="Its last lease poll or heartbeat.")
    leases: int = Field(description="Leases it holds now (its running tasks).")


class WorkerListOut(BaseModel):
    items: list[WorkerOut]
