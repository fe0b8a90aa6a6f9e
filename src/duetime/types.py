"""What duetime's objects *are*: read-only values with no I/O.

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
from typing import Any, TypeVar, dataclass_transform

import orjson

from duetime.target_types import TargetType as TargetType  # the registry of target types

JSONValue = Any
"""Any value that round-trips through JSON."""

_V = TypeVar("_V")


@dataclass_transform(frozen_default=True, field_specifiers=(field,))
def value_type(cls: type[_V]) -> type[_V]:
    """A value type: a slotted dataclass whose fields are read-only, enforced by the type
    checker (it sees a frozen dataclass) rather than at run time, and hashed as a frozen one is.

    A frozen dataclass's ``__init__`` stores each field through ``object.__setattr__``, to get
    past its own ``__setattr__``; for the 37 fields of a :class:`Task`, built for every task a
    lease, a list or a read answers, that was nearly half of decoding its row (ADR 0014).
    Assignments to fields are type errors (``tests/static/read_only_values.py`` keeps it so).
    """
    return dataclass(slots=True, unsafe_hash=True)(cls)


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
WAITING_STATUSES = frozenset({TaskStatus.SCHEDULED, TaskStatus.READY, TaskStatus.RETRYING})
"""Statuses in which a task has a next attempt due (``Task.next_attempt_at``)."""


class AttemptOutcome(enum.StrEnum):
    """How one attempt ended."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    LEASE_EXPIRED = "lease_expired"


@value_type
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


@value_type
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
    traceparent: str | None = None
    """The W3C trace context of the task (see :mod:`duetime.observe.tracing`)."""
    request_hash: str | None = None
    """Fingerprint of the create request that made a task with an idempotency key (None for
    others): a repeat of the key with a different request is refused with it."""
    payload_ref: str | None = None
    """An opaque reference the task carries instead of a payload (SPEC §3), handed on as-is."""
    flow_key: str | None = None
    """The task's key under its queue's keyed rate limit, evaluated once at create
    (:mod:`duetime.flow`): None when the queue had no keyed rate limit then, ``""`` when the
    task has no value for the key (it follows the queue's own limits only)."""
    absorbed: int = 0
    """Creates a debounce folded into this task (its payload is the last one's)."""
    absorbed_at: datetime | None = None
    """When the last of them arrived."""

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
        return self.due_at if self.status in WAITING_STATUSES else None


@value_type
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
    traceparent: str | None = None
    request_hash: str | None = None
    """Fingerprint of the create request (with an idempotency key), kept with the task."""
    payload_ref: str | None = None
    """An opaque reference instead of a payload (≤ 2 KiB), handed to the target as-is."""
    flow_key: str | None = None
    """The key of the queue's keyed rate limit (see :attr:`Task.flow_key`)."""
    flow: FlowAsk | None = None
    """What the queue's (or the task's own) uniqueness window, debounce and throttle ask of
    this create, keys evaluated (:mod:`duetime.lifecycle.flow`); None: nothing."""
    follow: Follow | None = None
    """What follows the task's end besides its dependents (callbacks, a workflow, a parent's
    failure policy); None for a task with none, which the hot path creates."""


@value_type
class TaskCreated:
    """One create's result: the task, and whether this call made it (False = idempotent hit,
    a uniqueness window's task, or a debounce that absorbed it).

    ``flow``: what the create's flow rules did, as ``(rule, outcome)`` pairs:
    ``("unique", "created" | "existing")``, ``("debounce", "created" | "absorbed")``,
    ``("throttle", "delayed" | "on_time")``; empty when no rule applied."""

    task: Task
    created: bool
    flow: tuple[tuple[str, str], ...] = ()


@value_type
class TaskPatch:
    """Fields to change on a waiting task; ``None`` leaves a field as it is."""

    run_at: datetime | None = None
    payload_json: str | None = None
    priority: int | None = None
    labels: Mapping[str, str] | None = None


@value_type
class PayloadMatch:
    """A payload path equality: the value at ``payload.<keys...>`` (object keys, outermost
    first) equals the JSON scalar ``value_json`` (``42``, ``"eu"``, ``true``, ``null``),
    compared as JSON — numbers by value, strings exactly, ``true`` is not ``1``."""

    keys: tuple[str, ...]
    value_json: str


@value_type
class TaskFilter:
    """List filters. ``cursor`` is the id of the last task of the previous page (newest first).
    ``id_prefix``: only ids starting with it (hex digits, see :func:`duetime.ids.id_prefix_range`;
    the store scans that range of ids).

    ``error_contains``: only tasks whose ``last_error`` contains this text, ignoring case (of
    ASCII letters on SQLite, of every letter on PostgreSQL; ``""``: every task with an error);
    ``payload_equals``: only tasks whose payload has that value at that path. Neither is
    indexed: they narrow the rows the other filters walk, and ``limit`` bounds the answer."""

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
    id_prefix: str | None = None
    error_contains: str | None = None
    payload_equals: PayloadMatch | None = None


@value_type
class Attempt:
    """One try at delivering a task. ``logs``: the text a worker attached when it completed or
    failed the lease (at most 64 KiB); ``response``: the start of a webhook target's answer body
    (at most 4 KiB), success or failure."""

    task_id: str
    number: int
    started_at: datetime
    finished_at: datetime
    outcome: AttemptOutcome
    error: str | None
    http_status: int | None
    duration_ms: float
    worker: str | None
    logs: str | None = None
    response: str | None = None


@value_type
class ClaimRequest:
    """Ask for up to ``limit`` ready tasks.

    ``target_types`` picks push deliveries (the dispatcher) or ``worker`` tasks (the lease API).
    ``lease_seconds=None`` makes each lease last the task's own ``timeout_seconds`` plus
    ``lease_grace_seconds``. ``tenant_id``, ``queue`` and ``names`` narrow the claim (``None`` =
    any): the dispatcher claims for every tenant, the lease API for the caller's tenant only.
    ``tenant_room``: at most this many for these tenants (0: none), ``other_tenant_room`` for
    any other tenant (None: no bound) — the dispatcher's room per tenant in its delivery slots
    (SPEC §7 "Tenant fairness").
    """

    worker_id: str
    limit: int
    target_types: frozenset[TargetType]
    lease_seconds: float | None = None
    lease_grace_seconds: float = 10.0
    queue: str | None = None
    names: Sequence[str] | None = None
    tenant_id: str | None = None
    tenant_room: Mapping[str, int] = field(default_factory=dict)
    other_tenant_room: int | None = None

    @property
    def excluded_tenants(self) -> list[str]:
        """The tenants this claim must not take from, sorted."""
        return sorted(t for t, room in self.tenant_room.items() if room <= 0)

    def room_of(self, tenant_id: str) -> int | None:
        """How many this claim may take from ``tenant_id`` (None: no bound)."""
        return self.tenant_room.get(tenant_id, self.other_tenant_room)


@value_type
class Lease:
    """A claimed task: the holder may complete it only while ``lease_id`` is current."""

    task: Task
    lease_id: str
    lease_expires_at: datetime
    attempt: int

    @classmethod
    def of(cls, task: Task) -> Lease:
        """The lease a ``running`` task is held under (its attempt is the task's attempt count)."""
        assert task.lease_id is not None and task.lease_expires_at is not None
        return cls(task, task.lease_id, task.lease_expires_at, task.attempts)


@value_type
class Completion:
    """The end of one attempt, reported under its lease (the fencing token).

    ``status`` is where the task goes, decided by :mod:`duetime.lifecycle.finish` (``succeeded``,
    ``retrying`` or ``failed``); a store applies it under the lease fence and overrides it only
    for a task whose cancel was requested (:func:`duetime.states.after_cancel_request`).
    ``retry_delay_seconds`` is ``None`` unless the status is ``retrying``: the next attempt is
    then due that many seconds after the store's now. ``started_at`` is when the attempt began;
    the store's now is when it finished. ``logs`` (a worker's) and ``response`` (a webhook
    answer's start) are kept on the attempt row only.
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
    logs: str | None = None
    response: str | None = None
    status: TaskStatus = field(kw_only=True)


@value_type
class LeasedEnd:
    """A succeeded attempt a store ended by its lease id alone
    (:class:`~duetime.store.protocols.LeaseCompleter`): what the caller observes of it."""

    task_id: str
    queue: str
    attempt: int
    started_at: datetime | None
    traceparent: str | None
    target_type: str


@value_type
class CompletionResult:
    """What became of one :class:`Completion`. ``accepted=False``: the lease was stale (fenced)."""

    task_id: str
    lease_id: str
    accepted: bool
    status: TaskStatus | None


@value_type
class Tenant:
    id: str
    name: str
    created_at: datetime
    quotas: TenantQuotas = field(default_factory=lambda: TenantQuotas())


@value_type
class TenantQuotas:
    """An operator's limits on one tenant (SPEC §7 "Tenant quotas"); None means no limit.

    ``max_pending_tasks`` bounds tasks not yet ended (scheduled, blocked, ready, retrying,
    running); ``max_creates_per_second`` is a token bucket of task creates (burst: one second's
    worth); ``max_schedules`` bounds live schedules. ``max_concurrency`` and ``weight`` are the
    tenant's share of running work and of claims."""

    max_pending_tasks: int | None = None
    max_creates_per_second: float | None = None
    max_concurrency: int | None = None
    max_schedules: int | None = None
    weight: int = 1


@value_type
class Release:
    """One lease to hand back unstarted (:mod:`duetime.lifecycle.release`): the task waits
    again, due ``delay_seconds`` from the store's now, in ``status`` (``ready`` or
    ``scheduled``, decided by :func:`duetime.states.after_release`)."""

    lease_id: str
    delay_seconds: float
    status: TaskStatus


@value_type
class Released:
    """A task handed back unstarted (``task_release``): its id, queue and status now
    (``ready`` or ``scheduled``)."""

    task_id: str
    queue: str
    status: TaskStatus


@value_type
class TargetCircuit:
    """A circuit breaker's last known state for one (tenant, target origin), as stored
    (:mod:`duetime.delivery.circuit`)."""

    tenant_id: str
    origin: str
    state: str
    """``closed``, ``open`` or ``half_open``."""
    failures: int
    cooldown_seconds: float
    open_until: datetime | None
    changed_at: datetime
    opened: int = 0
    """Times it opened (its ``PUT``s into ``open`` ever)."""


@value_type
class TenantUsage:
    """What counts against a tenant's quotas now."""

    pending_tasks: int
    schedules: int


@value_type
class ApiKey:
    """An API key as stored: only its SHA-256 hash, never the key itself."""

    id: str
    tenant_id: str
    key_hash: str
    created_at: datetime


@value_type
class SigningSecret:
    """A ``whsec_`` secret that signs webhooks. ``expires_at=None`` means live until rotated."""

    id: str
    tenant_id: str
    secret: str
    created_at: datetime
    expires_at: datetime | None


@value_type
class StatusCount:
    """How many of a tenant's tasks of one queue are in one status (from the maintained
    counters, see :mod:`duetime.store.counters`)."""

    queue: str
    status: TaskStatus
    count: int
    tenant_id: str


@value_type
class QueueSettings:
    """How a queue's tasks may be claimed. ``None`` = no limit.

    ``paused``: nothing of the queue is claimed (dispatched or leased) until it is resumed.
    ``max_concurrency``: at most this many of the queue's tasks run at once.
    ``rate_limit_per_second`` with ``burst``: a token bucket of ``burst`` tokens (default one
    second's worth, at least 1) refilled at that rate; each claimed task takes one.
    ``max_concurrency_per_key``: at most this many tasks of one ``concurrency_key`` run at once
    (tasks without a key are not bound by it); with 1, a key's tasks run one at a time in
    priority, due, creation order. Every limit holds across nodes: the store arbitrates.
    """

    rate_limit_per_second: float | None = None
    burst: int | None = None
    max_concurrency: int | None = None
    max_concurrency_per_key: int | None = None
    paused: bool = False
    flow: FlowRules = field(default_factory=lambda: FlowRules())


@value_type
class UniqueRule:
    """A uniqueness window (SPEC §7 "Keyed flow control"): a create whose key names a task made
    within ``period_seconds`` that is in one of ``states`` makes nothing and answers with that
    task. ``key`` is a key expression's terms (:mod:`duetime.flow.keys`) or, on a task's own
    rule, ``literal`` holds the key itself."""

    key: tuple[str, ...]
    period_seconds: float
    states: tuple[TaskStatus, ...]
    literal: str | None = None


@value_type
class DebounceRule:
    """Run once after the last of a burst: a create whose key has a task still waiting from an
    earlier create within ``period_seconds`` updates that task (the latest payload, due
    ``period_seconds`` from now) instead of making one, never past ``max_wait_seconds`` from
    the burst's first create."""

    key: tuple[str, ...]
    period_seconds: float
    max_wait_seconds: float


@value_type
class ThrottleRule:
    """Delay, not drop: creates of one key are scheduled at most ``rate`` per second (a burst
    of ``burst`` at once), each at its key's next free slot."""

    key: tuple[str, ...]
    rate: float
    burst: int = 1


@value_type
class FlowRules:
    """A queue's keyed flow control (SPEC §7), all optional.

    ``key``: the key expression of its keyed limits — a task that gives no ``concurrency_key``
    gets the key's value as one when the queue has ``max_concurrency_per_key``, and
    ``key_rate`` (with ``key_burst``) is a token bucket per key value. ``unique``,
    ``debounce`` and ``throttle`` apply when a task is created."""

    key: tuple[str, ...] = ()
    key_rate: float | None = None
    key_burst: int | None = None
    unique: UniqueRule | None = None
    debounce: DebounceRule | None = None
    throttle: ThrottleRule | None = None

    def __bool__(self) -> bool:
        return bool(self.key or self.unique or self.debounce or self.throttle)


@value_type
class FlowAsk:
    """What one create's flow rules ask, keys evaluated (None: the rule does not apply)."""

    unique: tuple[str, UniqueRule] | None = None
    debounce: tuple[str, DebounceRule] | None = None
    throttle: tuple[str, ThrottleRule] | None = None


@value_type
class KeyFigure:
    """One key of a queue's keyed limits as the store sees it now: its ready and running tasks
    (``ready`` counted among at most the first 10,000 ready tasks read), and its rate limit's
    bucket (``tokens`` None: full, or no keyed rate limit) with when its next start is allowed
    (None: now)."""

    key: str
    ready: int
    running: int
    tokens: float | None = None
    next_start_at: datetime | None = None


@value_type
class Queue:
    """A tenant's configured queue. A queue needs no configuration to exist: tasks name it, and
    an unconfigured queue behaves as ``QueueSettings()``."""

    tenant_id: str
    name: str
    settings: QueueSettings
    updated_at: datetime
    tokens: float | None = None
    """The rate limit's bucket when last taken from (None: full), at ``tokens_at``."""
    tokens_at: datetime | None = None


@value_type
class QueueStats:
    """Live figures of one queue: task counts by status (statuses with none are absent) and how
    late its most overdue ``ready`` task is (``None`` when none is ready)."""

    tenant_id: str
    name: str
    counts: Mapping[TaskStatus, int]
    oldest_due_lag_seconds: float | None

    @property
    def running(self) -> int:
        return self.counts.get(TaskStatus.RUNNING, 0)


@value_type
class WorkerInfo:
    """A pull worker as the lease API has seen it: the queues it polled, when it was first and
    last seen (lease polls and heartbeats), and how many leases it holds (its running tasks)."""

    tenant_id: str
    worker_id: str
    queues: tuple[str, ...]
    first_seen_at: datetime
    last_seen_at: datetime
    leases: int


# -- recurring schedules (SPEC §3 "Schedules") -----------------------------------------------


class OverlapPolicy(enum.StrEnum):
    """What an occurrence does while the previous one's task has not finished."""

    ALLOW = "allow"
    SKIP = "skip"
    BUFFER_ONE = "buffer_one"


class CatchupPolicy(enum.StrEnum):
    """What happens to occurrences missed while no materializer ran (or while paused, when the
    resume call asks for it)."""

    NONE = "none"
    LATEST = "latest"
    ALL = "all"


class TickOutcome(enum.StrEnum):
    """What became of one nominal instant of a schedule (its tick ledger row)."""

    FIRED = "fired"
    SKIPPED_OVERLAP = "skipped_overlap"
    SKIPPED_PAUSED = "skipped_paused"
    MISSED = "missed"
    CAUGHT_UP = "caught_up"
    BACKFILLED = "backfilled"
    DST_SHIFTED = "dst_shifted"
    DST_SKIPPED = "dst_skipped"
    TRIGGERED = "triggered"


TASK_TICK_OUTCOMES = frozenset(
    {
        TickOutcome.FIRED,
        TickOutcome.CAUGHT_UP,
        TickOutcome.BACKFILLED,
        TickOutcome.DST_SHIFTED,
        TickOutcome.TRIGGERED,
    }
)
"""Outcomes whose tick made a task (the others record an instant that made none)."""


@value_type
class ScheduleTiming:
    """When a schedule fires: the one declaration of its timing fields, shared by what a user
    sets (:class:`ScheduleConfig`) and what the fire-time functions read
    (:class:`duetime.schedule.ScheduleSpec`).

    Exactly one of ``cron``, ``every`` or ``rrule`` is set; ``timezone`` is an IANA name;
    ``start_at``/``end_at`` bound the occurrences (aware UTC); ``jitter_seconds`` delays each one
    by a deterministic amount up to it; ``dst_nonexistent``/``dst_ambiguous`` say what a wall time
    that a DST change skips or doubles means.
    """

    cron: str | None = None
    every: str | None = None
    rrule: str | None = None
    timezone: str = "UTC"
    start_at: datetime | None = None
    end_at: datetime | None = None
    jitter_seconds: int = 0
    dst_nonexistent: str = "run_after_gap"
    dst_ambiguous: str = "first"


@value_type
class ScheduleConfig(ScheduleTiming):
    """Everything a user sets on a schedule: the timing (:class:`ScheduleTiming`'s fields, first),
    the policies and the task template.

    ``task`` is the validated template (``name``, ``queue``, ``target``, ``payload`` as a JSON
    value, ``priority``, ``retry`` as a JSON object, ``timeout_seconds``, ``labels``,
    ``concurrency_key``).
    """

    overlap: OverlapPolicy = OverlapPolicy.ALLOW
    catchup: CatchupPolicy = CatchupPolicy.LATEST
    catchup_window_seconds: int = 86_400
    catchup_max_runs: int = 100
    task: Mapping[str, Any] = field(default_factory=dict)


@value_type
class Schedule:
    """A recurring schedule as the store holds it.

    ``materialized_until`` is the durable horizon cursor: every occurrence at or before it has
    been handled (made into a task or recorded in the tick ledger). ``next_run_at`` is the
    materializer's index key: no unhandled occurrence comes before it (None: the schedule has
    ended). ``anchor_at`` is what an ``every`` (or an ``rrule`` without ``start_at``) counts
    from: the creation time, to the second. ``buffered_at`` is the nominal instant of an
    occurrence waiting for the previous run to end (``overlap = buffer_one``);
    ``last_task_id`` is the task of the latest occurrence the materializer made (overlap checks).
    ``resumed_at``: occurrences in ``(materialized_until, resumed_at]`` fell in a pause and are
    handled by ``resume_catchup`` (None = none) when the materializer next runs.
    """

    id: str
    tenant_id: str
    config: ScheduleConfig
    anchor_at: datetime
    paused: bool
    pause_note: str | None
    paused_at: datetime | None
    resumed_at: datetime | None
    resume_catchup: CatchupPolicy | None
    next_run_at: datetime | None
    materialized_until: datetime
    buffered_at: datetime | None
    last_task_id: str | None
    version: int
    created_at: datetime
    updated_at: datetime
    deleted: bool = False
    key: str | None = None
    """The tenant-unique declarative key (``PUT /v1/schedules/by-key/{key}``), or None."""


@value_type
class NewSchedule:
    """What the API asks a store to create. ``materialized_until`` is the instant the schedule
    starts counting from (the store's now when the request was validated); nothing at or before
    it is made. ``actor`` (the API key id) is written in the first revision, whose ``after`` is
    ``revision``."""

    tenant_id: str
    config: ScheduleConfig
    anchor_at: datetime
    materialized_until: datetime
    actor: str | None = None
    revision: Mapping[str, Any] = field(default_factory=dict)
    next_run_at: datetime | None = None
    """The first occurrence after ``materialized_until`` when the caller computed it; None
    stores the cursor instead (the next materializer round computes the real one)."""
    key: str | None = None
    """A tenant-unique declarative key; a live schedule holding it already → ``Conflict``."""


@value_type
class ScheduleChange:
    """One user change to a schedule, applied only while its ``version`` is ``expected_version``.

    ``config`` replaces the settings; ``paused``/``pause_note`` pause or resume. ``rewind_to``
    forgets occurrences not yet started after that instant (their unstarted tasks and ledger
    rows are deleted, the cursor moves back to it) so the materializer makes them again under
    the new settings. ``resume_at`` marks ``(cursor, resume_at]`` as paused time, handled with
    ``resume_catchup``. ``action`` (``update``, ``pause``, ``resume``), ``actor``, ``before``
    and ``after`` make the revision row.
    """

    expected_version: int
    action: str
    actor: str | None
    before: Mapping[str, Any]
    after: Mapping[str, Any]
    config: ScheduleConfig | None = None
    paused: bool | None = None
    pause_note: str | None = None
    rewind_to: datetime | None = None
    resume_at: datetime | None = None
    resume_catchup: CatchupPolicy | None = None


@value_type
class ScheduleFilter:
    """Schedule list filters; ``queue``/``name`` match the task template. ``cursor`` is the id of
    the last schedule of the previous page (newest first)."""

    tenant_id: str
    paused: bool | None = None
    queue: str | None = None
    name: str | None = None
    limit: int = 100
    cursor: str | None = None


@value_type
class ScheduleDue:
    """A schedule the materializer must look at, with the status of its ``last_task_id``.
    ``waiting``: it is here only for its buffered occurrence (no occurrence is due)."""

    schedule: Schedule
    last_task_status: TaskStatus | None
    waiting: bool = False


@value_type
class NewTick:
    """A tick ledger row to write. ``with_task``: link the task whose ``scheduled_for`` is
    ``nominal`` (made in the same call, or there already)."""

    nominal: datetime
    outcome: TickOutcome
    detail: str | None = None
    with_task: bool = False


@value_type
class ScheduleAdvance:
    """One schedule's share of a materializer round, applied all or nothing and only while the
    schedule still has ``expected_version``, ``expected_cursor`` and ``expected_buffered_at`` and
    is neither paused nor deleted (else nothing of it is written)."""

    schedule_id: str
    expected_version: int
    expected_cursor: datetime
    expected_buffered_at: datetime | None
    materialized_until: datetime
    next_run_at: datetime | None
    buffered_at: datetime | None
    tasks: Sequence[NewTask] = ()
    ticks: Sequence[NewTick] = ()
    last_task_for: datetime | None = None
    """The nominal instant whose task becomes ``last_task_id`` (None: unchanged)."""
    clear_resume: bool = False


@value_type
class Tick:
    """One tick ledger row: a nominal instant of a schedule and what became of it."""

    schedule_id: str
    nominal: datetime
    outcome: TickOutcome
    task_id: str | None
    detail: str | None
    recorded_at: datetime


@value_type
class TickFilter:
    """Ledger listing, newest nominal first; ``cursor`` is ``(nominal, outcome)`` of the last row
    of the previous page."""

    tenant_id: str
    schedule_id: str
    outcomes: Sequence[TickOutcome] = ()
    limit: int = 100
    cursor: tuple[datetime, str] | None = None


@value_type
class ScheduleRevision:
    """One change to a schedule: when, by whom (API key id), and the fields before and after."""

    id: int
    schedule_id: str
    at: datetime
    actor: str | None
    action: str
    before: Mapping[str, Any]
    after: Mapping[str, Any]


@value_type
class NotificationSettings:
    """Where a tenant's harm events go (``PUT /v1/tenant/notifications``): the event types it
    wants and the ``http`` target (as a task target) they are delivered to."""

    tenant_id: str
    events: tuple[str, ...]
    target: Mapping[str, Any]
    updated_at: datetime


@value_type
class SigningKey:
    """A key that signs the OIDC ID tokens duetime presents to targets
    (:mod:`duetime.delivery.identity`). Published from ``created_at``, it signs from
    ``signs_from`` until a later generation does; ``private_key`` is PEM, sealed."""

    kid: str
    generation: int
    algorithm: str
    public_jwk: Mapping[str, Any]
    private_key: str
    created_at: datetime
    signs_from: datetime


@value_type
class ClientCertificate:
    """A tenant's TLS client certificate, presented by webhooks whose target says
    ``"auth": {"mtls": name}``. ``certificate`` is the PEM chain (leaf first);
    ``private_key`` is PEM, sealed, and never leaves the service."""

    tenant_id: str
    name: str
    certificate: str
    private_key: str
    fingerprint: str
    subject: str
    not_after: datetime
    created_at: datetime
    updated_at: datetime


@value_type
class Credential:
    """A tenant's named credential (``PUT /v1/credentials/{name}``), as stored: its ``kind``
    (``header`` or ``basic``, :mod:`duetime.delivery.credentials`) and ``secret``, the sealed
    JSON of its values. Never shown: answers give the name, the kind and the fingerprint."""

    tenant_id: str
    name: str
    kind: str
    secret: str
    created_at: datetime
    updated_at: datetime


@value_type
class HeldPayload:
    """A payload duetime holds for a task (``payload_held``), read only with a token scoped to
    the task's current attempt."""

    id: str
    tenant_id: str
    task_id: str | None
    payload_json: str
    created_at: datetime


@value_type
class UiSession:
    """A dashboard login: a tenant key's (``tenant_id`` and ``key_id``) or the admin's (both
    None). The cookie holds a random id; the store only its hash."""

    tenant_id: str | None
    key_id: str | None
    created_at: datetime
    last_seen: datetime
    expires_at: datetime

    @property
    def admin(self) -> bool:
        return self.tenant_id is None


@value_type
class SealedRow:
    """A stored row that may hold sealed values, as ``duetime secrets rotate`` reads it:
    ``table`` (one of ``tasks``, ``schedules``, ``notifications``, ``credentials``,
    ``signing_keys``, ``client_certificates``), the row's ``key`` within its tenant (a task or
    schedule id, the tenant id, a credential's or certificate's name, a signing key's id; the
    tenant id of a signing key is empty), and ``raw``, the stored text that holds them (a JSON
    document, or a sealed value)."""

    table: str
    key: str
    tenant_id: str
    raw: str


# -- what follows a task's end (workflows, callbacks, spawned children) ------------------------


class ParentFailure(enum.StrEnum):
    """What a parent's failure (or cancel) means to a child waiting on it
    (``on_parent_failure``): the child fails (``fail``, the default), runs once its other
    parents have ended, seeing the failure (``run``), or is cancelled (``cancel``)."""

    FAIL = "fail"
    RUN = "run"
    CANCEL = "cancel"


class CallbackKind(enum.StrEnum):
    """When a callback task is made: on a ``succeeded`` end, a ``failed`` end, or any end
    (``succeeded``, ``failed`` or ``cancelled``)."""

    ON_SUCCESS = "on_success"
    ON_FAILURE = "on_failure"
    ON_END = "on_end"

    def fires_on(self, status: TaskStatus) -> bool:
        """Whether a task ending ``status`` makes this callback."""
        if self is CallbackKind.ON_SUCCESS:
            return status is TaskStatus.SUCCEEDED
        if self is CallbackKind.ON_FAILURE:
            return status is TaskStatus.FAILED
        return status.terminal


@value_type
class Callback:
    """A task the store makes when another task ends, in the transaction of that end: it is
    delivered to ``target`` (any target type) on ``queue`` (None: the ended task's) under
    ``name`` (None: the callback's kind, ``on_success``...), carrying the outcome, and retried
    per ``retry``."""

    target: Mapping[str, Any]
    queue: str | None = None
    name: str | None = None
    retry: RetryPolicy | None = None
    timeout_seconds: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "target": dict(self.target),
            "queue": self.queue,
            "name": self.name,
            "retry": None if self.retry is None else self.retry.to_json(),
            "timeout_seconds": self.timeout_seconds,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Callback:
        retry = data.get("retry")
        timeout = data.get("timeout_seconds")
        return cls(
            target=data["target"],
            queue=data.get("queue"),
            name=data.get("name"),
            retry=None if retry is None else RetryPolicy.from_json(retry),
            timeout_seconds=None if timeout is None else float(timeout),
        )


@value_type
class Follow:
    """What follows a task's end besides its plain dependents (one ``task_follow`` row).

    ``on_parent_failure``: what a failed parent means to this task; ``parents_in_body``: a push
    delivery of this task sends its parents' outcomes with the payload (the envelope of
    ``duetime.delivery.parents``); ``callbacks``: tasks made when it ends; ``workflow_id`` and
    ``ref``: the workflow it is a node of, and its name there; ``spawned_by``: the task whose
    handler spawned it."""

    on_parent_failure: ParentFailure = ParentFailure.FAIL
    parents_in_body: bool = False
    callbacks: Mapping[CallbackKind, Callback] = field(default_factory=dict)
    workflow_id: str | None = None
    ref: str | None = None
    spawned_by: str | None = None


@value_type
class ParentOutcome:
    """A parent as its child sees it: its ``ref`` in the child's workflow (None outside one),
    its status, and its result (JSON text; None when it has none, or when it is larger than
    the reader asked to inline: ``result_bytes`` says how large, and the child fetches it by
    reference) or its last error."""

    id: str
    ref: str | None
    name: str | None
    status: TaskStatus
    result_json: str | None
    result_bytes: int
    error: str | None
    finished_at: datetime | None


@value_type
class ParentsOf:
    """A task's parents as its delivery carries them (``depends_on`` order), and whether a push
    delivery sends them in the body."""

    task_id: str
    parents_in_body: bool
    parents: tuple[ParentOutcome, ...]


@value_type
class NewWorkflow:
    """A workflow to create with its nodes (see :mod:`duetime.lifecycle.workflow`)."""

    id: str
    tenant_id: str
    name: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    idempotency_key: str | None = None
    request_hash: str | None = None


@value_type
class Workflow:
    """A DAG of tasks created in one call; its nodes are tasks, its status theirs."""

    id: str
    tenant_id: str
    name: str | None
    labels: Mapping[str, str]
    node_count: int
    created_at: datetime
    idempotency_key: str | None = None
    request_hash: str | None = None


@value_type
class WorkflowNode:
    """One node of a workflow: its ``ref``, its task, and the refs of its parents."""

    ref: str
    task: Task
    parents: tuple[str, ...]


@value_type
class WorkflowView:
    """A workflow and every node, in creation order."""

    workflow: Workflow
    nodes: tuple[WorkflowNode, ...]


@value_type
class NotificationEvent:
    """One harm event waiting in the store to be sent (:mod:`duetime.store.core.outbox`): its
    stable ``id``, the item it adds to a notification's body, when it happened."""

    id: str
    item: Mapping[str, Any]
    at: datetime


@value_type
class SqlWorkflowRequest:
    """A workflow requested through the SQL API (``create_workflow_v1``), taken by a node to
    make: its id (the workflow's, once made), the tenant and login role that asked, the body of
    ``POST /v1/workflows`` as JSON text, and the fingerprint SQL gave it (``sql:`` and an md5)."""

    id: str
    tenant_id: str
    role_name: str
    body: str
    fingerprint: str
