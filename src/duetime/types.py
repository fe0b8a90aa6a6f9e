"""What duetime's objects *are*: frozen values with no I/O.

A :class:`Task` is one unit of work that is due at some instant and is delivered to a target
(a webhook, a broker, or a pull worker). Each delivery try is an :class:`Attempt`. Tasks belong to
a :class:`Tenant`, who authenticates with an :class:`ApiKey` and signs webhooks with
:class:`SigningSecret` values.

Stores build these values; the API, engine and SDK only read them.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import orjson

JSONValue = Any
"""Any value that round-trips through JSON."""


class TaskStatus(enum.StrEnum):
    """Where a task is in its life cycle (see :mod:`duetime.states`)."""

    SCHEDULED = "scheduled"
    BLOCKED = "blocked"
    READY = "ready"
    RUNNING = "running"
    RETRYING = "retrying"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def terminal(self) -> bool:
        return self in TERMINAL_STATUSES


TERMINAL_STATUSES = frozenset({TaskStatus.SUCCEEDED, TaskStatus.FAILED, TaskStatus.CANCELLED})
PATCHABLE_STATUSES = frozenset(
    {TaskStatus.SCHEDULED, TaskStatus.BLOCKED, TaskStatus.READY, TaskStatus.RETRYING}
)


class AttemptOutcome(enum.StrEnum):
    """How one attempt ended."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    LEASE_EXPIRED = "lease_expired"


class TargetType(enum.StrEnum):
    """Where a task is delivered. ``worker`` tasks are pulled, every other type is pushed."""

    HTTP = "http"
    AMQP = "amqp"
    NATS = "nats"
    REDIS = "redis"
    WORKER = "worker"


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Exponential backoff: attempt *n* (1-based) that failed waits
    ``min(max_delay, initial_delay * multiplier ** (n - 1))`` seconds, spread by ``±jitter``."""

    max_attempts: int = 5
    initial_delay_seconds: float = 1.0
    max_delay_seconds: float = 3600.0
    multiplier: float = 2.0
    jitter: float = 0.1

    def to_json(self) -> dict[str, Any]:
        return {
            "max_attempts": self.max_attempts,
            "initial_delay_seconds": self.initial_delay_seconds,
            "max_delay_seconds": self.max_delay_seconds,
            "multiplier": self.multiplier,
            "jitter": self.jitter,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RetryPolicy:
        return cls(**data)


@dataclass(frozen=True, slots=True)
class Task:
    """One unit of work, as the store holds it.

    ``due_at`` is when the next attempt may start (the promoter's key); ``run_at`` is the time the
    user asked for. ``attempts`` counts every attempt ever started; ``series_start`` is the value of
    ``attempts`` when the current retry series began (a dead-letter replay starts a new series), so
    the attempts left are ``retry.max_attempts - (attempts - series_start)``.
    """

    id: str
    tenant_id: str
    name: str | None
    queue: str
    status: TaskStatus
    version: int
    target: Mapping[str, Any]
    payload_json: str
    idempotency_key: str | None
    priority: int
    retry: RetryPolicy
    timeout_seconds: float
    depends_on: tuple[str, ...]
    concurrency_key: str | None
    labels: Mapping[str, str]
    attempts: int
    series_start: int
    schedule_id: str | None
    scheduled_for: datetime | None
    run_at: datetime
    due_at: datetime
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None = None
    finished_at: datetime | None = None
    last_error: str | None = None
    result: JSONValue = None
    lease_id: str | None = None
    lease_expires_at: datetime | None = None
    worker_id: str | None = None
    cancel_requested: bool = False

    @property
    def payload(self) -> JSONValue:
        return orjson.loads(self.payload_json)

    @property
    def target_type(self) -> TargetType:
        return TargetType(self.target["type"])

    @property
    def attempts_in_series(self) -> int:
        return self.attempts - self.series_start

    @property
    def next_attempt_at(self) -> datetime | None:
        waiting = (TaskStatus.SCHEDULED, TaskStatus.READY, TaskStatus.RETRYING)
        return self.due_at if self.status in waiting else None


@dataclass(frozen=True, slots=True)
class NewTask:
    """What a caller asks a store to create. ``run_at=None`` means "now" by the store's clock."""

    tenant_id: str
    target: Mapping[str, Any]
    payload_json: str = "null"
    name: str | None = None
    queue: str = "default"
    run_at: datetime | None = None
    idempotency_key: str | None = None
    priority: int = 0
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    timeout_seconds: float = 30.0
    depends_on: tuple[str, ...] = ()
    concurrency_key: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    schedule_id: str | None = None
    scheduled_for: datetime | None = None


@dataclass(frozen=True, slots=True)
class TaskCreated:
    """The result of one create: the task, and whether this call made it (False = idempotent hit)."""

    task: Task
    created: bool


@dataclass(frozen=True, slots=True)
class TaskPatch:
    """Fields to change on a waiting task; ``None`` leaves a field as it is."""

    run_at: datetime | None = None
    payload_json: str | None = None
    priority: int | None = None
    labels: Mapping[str, str] | None = None


@dataclass(frozen=True, slots=True)
class TaskFilter:
    """List filters. ``cursor`` is the id of the last task of the previous page (newest first)."""

    tenant_id: str
    statuses: Sequence[TaskStatus] = ()
    queue: str | None = None
    name: str | None = None
    schedule_id: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    run_after: datetime | None = None
    run_before: datetime | None = None
    limit: int = 100
    cursor: str | None = None


@dataclass(frozen=True, slots=True)
class Attempt:
    """One try at delivering a task."""

    task_id: str
    number: int
    started_at: datetime
    finished_at: datetime
    outcome: AttemptOutcome
    error: str | None
    http_status: int | None
    duration_ms: float
    worker: str | None


@dataclass(frozen=True, slots=True)
class ClaimRequest:
    """Ask for up to ``limit`` ready tasks.

    ``target_types`` picks push deliveries (the dispatcher) or ``worker`` tasks (the lease API).
    ``lease_seconds=None`` makes each lease last the task's own ``timeout_seconds`` plus
    ``lease_grace_seconds``. ``queue`` and ``names`` narrow the claim (``None`` = any).
    """

    worker_id: str
    limit: int
    target_types: frozenset[TargetType]
    lease_seconds: float | None = None
    lease_grace_seconds: float = 10.0
    queue: str | None = None
    names: Sequence[str] | None = None


@dataclass(frozen=True, slots=True)
class Lease:
    """A claimed task: the holder may complete it only while ``lease_id`` is current."""

    task: Task
    lease_id: str
    lease_expires_at: datetime
    attempt: int


@dataclass(frozen=True, slots=True)
class Completion:
    """The end of one attempt, reported under its lease (the fencing token).

    ``retry_delay_seconds`` is ``None`` when the task must not be retried (success, a
    non-retryable failure, or no attempts left); otherwise the next attempt is due that many
    seconds after the store's now. ``started_at`` is when the attempt began; the store's now is
    when it finished.
    """

    task_id: str
    lease_id: str
    outcome: AttemptOutcome
    started_at: datetime
    duration_ms: float
    result_json: str | None = None
    error: str | None = None
    http_status: int | None = None
    retry_delay_seconds: float | None = None
    worker: str | None = None


@dataclass(frozen=True, slots=True)
class CompletionResult:
    """What became of one :class:`Completion`. ``accepted=False``: the lease was stale (fenced)."""

    task_id: str
    lease_id: str
    accepted: bool
    status: TaskStatus | None


@dataclass(frozen=True, slots=True)
class Tenant:
    id: str
    name: str
    created_at: datetime


@dataclass(frozen=True, slots=True)
class ApiKey:
    """An API key as stored: only its SHA-256 hash, never the key itself."""

    id: str
    tenant_id: str
    key_hash: str
    created_at: datetime


@dataclass(frozen=True, slots=True)
class SigningSecret:
    """A ``whsec_`` secret that signs webhooks. ``expires_at=None`` means live until rotated."""

    id: str
    tenant_id: str
    secret: str
    created_at: datetime
    expires_at: datetime | None


@dataclass(frozen=True, slots=True)
class StatusCount:
    queue: str
    status: TaskStatus
    count: int
