"""Typed values the SDK sends and receives, mirroring the JSON of the HTTP API (SPEC §3).

Responses parse into frozen pydantic models; RFC 3339 times become timezone-aware datetimes and
unknown response fields are ignored (a newer server may add some). Requests are built from
:class:`TaskSpec`, which rejects unknown fields and naive datetimes before anything is sent.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any, Generic, Literal, Required, TypedDict, TypeVar

from pydantic import AwareDatetime, BaseModel, ConfigDict

from duetime.types import AttemptOutcome, TaskStatus

__all__ = [
    "AckResult",
    "ApiKeyCreated",
    "Attempt",
    "CallbackSpec",
    "DeferFields",
    "Lease",
    "LeaseCompletion",
    "LeaseExtension",
    "LeaseFailure",
    "Page",
    "Parent",
    "RetryFields",
    "RetryPolicy",
    "RetrySpec",
    "ScheduleSettings",
    "ScheduleTask",
    "SigningSecret",
    "Task",
    "TaskSpec",
    "TaskSpecFields",
    "TemplateFields",
    "Tenant",
    "TenantCreated",
    "WorkerInfo",
    "http_target",
    "worker_target",
]

T = TypeVar("T")

_PAYLOAD_ONLY = frozenset({"payload"})


class _Response(BaseModel):
    """Base of every response model: immutable, tolerant of fields it does not know."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    def to_json(self) -> dict[str, Any]:
        """The model as JSON-ready data (datetimes as RFC 3339 strings)."""
        return self.model_dump(mode="json")


class _Request(BaseModel):
    """Base of request models: immutable, and an unknown field is an error (as on the server)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    def to_json(self) -> dict[str, Any]:
        """The request body: only the fields the caller set, ``None`` meaning "server default"
        at every level (a ``retry`` with ``jitter=None`` sends no ``jitter``), except where JSON
        ``null`` is a meaningful value, such as ``payload`` (whose own contents are sent as
        they are)."""
        data = self.model_dump(mode="json", exclude_unset=True, exclude_none=True)
        for name in self._nullable_fields():
            if name in self.model_fields_set and getattr(self, name) is None:
                data[name] = None
        return data

    @classmethod
    def _nullable_fields(cls) -> frozenset[str]:
        return frozenset()


# -- requests --------------------------------------------------------------------------------


class RetrySpec(_Request):
    """Retry settings for a new task; unset fields take the server's defaults."""

    max_attempts: int | None = None
    initial_delay_seconds: float | None = None
    max_delay_seconds: float | None = None
    multiplier: float | None = None
    jitter: float | None = None


class CallbackSpec(_Request):
    """A task made when another ends (``on_success``, ``on_failure``, ``on_end``): delivered to
    ``target`` (any target type) with the outcome as its payload, on ``queue`` (default: the
    ended task's) under ``name`` (default: the callback's kind)."""

    target: dict[str, Any]
    queue: str | None = None
    name: str | None = None
    retry: RetrySpec | None = None
    timeout_seconds: float | None = None


class TaskSpec(_Request):
    """A task to create (the body of ``POST /v1/tasks``). Only ``target`` is required.

    ``run_at`` (aware datetime) or ``delay_seconds`` picks when it is due; neither means now.
    ``payload`` is any JSON value and is sent even when it is ``None`` (JSON ``null``) if set.
    """

    target: dict[str, Any]
    name: str | None = None
    queue: str | None = None
    run_at: AwareDatetime | None = None
    delay_seconds: float | None = None
    payload: Any = None
    idempotency_key: str | None = None
    priority: int | None = None
    retry: RetrySpec | None = None
    timeout_seconds: float | None = None
    depends_on: list[str] | None = None
    concurrency_key: str | None = None
    labels: dict[str, str] | None = None
    payload_ref: str | None = None
    payload_held: Any = None
    """A payload duetime holds apart from the task: each attempt reads it through a URL valid
    during that attempt only (a worker's ``Job.held_payload()``)."""
    unique: dict[str, Any] | None = None
    """The task's own uniqueness window (instead of its queue's): ``{"key": "order-42",
    "period": "PT1H"}`` (the key itself) or ``{"key_from": "payload.order", "period":
    "PT1H"}`` (an expression), optionally ``"states"``. A create within the window answers
    with the task that holds it (``Task.created`` False, ``Task.flow["unique"] ==
    "existing"``)."""
    on_parent_failure: Literal["fail", "run", "cancel"] | None = None
    """What a parent's failure means to this task: ``fail`` it (the default), ``run`` it anyway
    (``job.parents`` shows the failure), ``cancel`` it."""
    parents_in_body: bool | None = None
    """Push targets: the body is ``{"payload": ..., "parents": [...]}``."""
    on_success: CallbackSpec | None = None
    on_failure: CallbackSpec | None = None
    on_end: CallbackSpec | None = None

    @classmethod
    def _nullable_fields(cls) -> frozenset[str]:
        return _PAYLOAD_ONLY


class RetryFields(TypedDict, total=False):
    """:class:`RetrySpec` as a dict (``retry={"max_attempts": 3}``), checked by type checkers."""

    max_attempts: int | None
    initial_delay_seconds: float | None
    max_delay_seconds: float | None
    multiplier: float | None
    jitter: float | None


class TaskFields(TypedDict, total=False):
    """:class:`TaskSpec`'s fields but its parents: what a workflow node (``workflows.step``) and
    a workflow's ``defaults`` may set, a node's parents being refs in the workflow."""

    target: Mapping[str, Any]
    name: str | None
    queue: str | None
    run_at: datetime | None
    delay_seconds: float | None
    payload: Any
    idempotency_key: str | None
    priority: int | None
    retry: RetrySpec | RetryFields | None
    timeout_seconds: float | None
    concurrency_key: str | None
    labels: Mapping[str, str] | None
    payload_ref: str | None
    payload_held: Any
    unique: Mapping[str, Any] | None
    on_parent_failure: Literal["fail", "run", "cancel"] | None
    parents_in_body: bool | None
    on_success: CallbackSpec | Mapping[str, Any] | None
    on_failure: CallbackSpec | Mapping[str, Any] | None
    on_end: CallbackSpec | Mapping[str, Any] | None


class TaskSpecFields(TaskFields, total=False):
    """The keyword arguments :meth:`AsyncClient.create_task` accepts, and one item of
    :meth:`AsyncClient.create_tasks` as a dict: :class:`TaskSpec`'s fields, so a type checker
    refuses ``delay_seconds="soon"``. ``target`` is required at run time (it is not marked
    ``Required`` so that ``create_task(spec)`` type-checks too)."""

    depends_on: list[str] | None


class DeferFields(TypedDict, total=False):
    """What one ``TaskHandle.defer`` may set besides the payload: every :class:`TaskSpec` field
    but ``target`` and ``name`` (the handle's) and ``payload`` (its first argument)."""

    queue: str | None
    run_at: datetime | None
    delay_seconds: float | None
    idempotency_key: str | None
    priority: int | None
    retry: RetrySpec | RetryFields | None
    timeout_seconds: float | None
    depends_on: list[str] | None
    concurrency_key: str | None
    labels: Mapping[str, str] | None
    payload_ref: str | None
    payload_held: Any
    unique: Mapping[str, Any] | None
    on_parent_failure: Literal["fail", "run", "cancel"] | None
    parents_in_body: bool | None
    on_success: CallbackSpec | Mapping[str, Any] | None
    on_failure: CallbackSpec | Mapping[str, Any] | None
    on_end: CallbackSpec | Mapping[str, Any] | None


class TemplateFields(TypedDict, total=False):
    """Fields of a schedule's task template that every occurrence gets (a worker's declared
    schedule fills in ``target``; no ``run_at``, ``idempotency_key`` or ``depends_on``: those
    belong to one task)."""

    name: str | None
    queue: str | None
    payload: Any
    priority: int | None
    retry: RetryFields | None
    timeout_seconds: float | None
    labels: Mapping[str, str] | None
    concurrency_key: str | None


class ScheduleTask(TemplateFields):
    """A schedule's whole task template (:meth:`AsyncClient.create_schedule` ``task=``)."""

    target: Required[Mapping[str, Any]]


class ScheduleSettings(TypedDict, total=False):
    """Schedule fields a worker's declared schedule (``Worker.schedule``,
    ``TaskHandle.schedule``) passes on as they are (see :meth:`AsyncClient.create_schedule`)."""

    start_at: datetime | None
    end_at: datetime | None
    jitter_seconds: int | None
    overlap: str | None
    catchup: str | None
    catchup_window_seconds: int | None
    catchup_max_runs: int | None
    dst: Mapping[str, str] | None


def http_target(
    url: str,
    *,
    method: str = "POST",
    headers: Mapping[str, str] | None = None,
    secret_headers: Sequence[str] | None = None,
    credential: str | None = None,
) -> dict[str, Any]:
    """A webhook target: the task's payload is sent, signed, as the JSON body to ``url``.

    Credentials in ``headers`` (``Authorization`` and the other documented names, and those
    named in ``secret_headers``) or in ``url`` are sealed by the server and shown as ``***``;
    ``credential`` names a credential put with ``put_credential`` instead, so the task carries
    no secret at all."""
    target: dict[str, Any] = {"type": "http", "url": url, "method": method}
    if headers:
        target["headers"] = dict(headers)
    if secret_headers:
        target["secret_headers"] = list(secret_headers)
    if credential is not None:
        target["auth"] = {"credential": credential}
    return target


def worker_target() -> dict[str, Any]:
    """A pull target: no push; an SDK worker leases the task from its queue."""
    return {"type": "worker"}


# -- responses -------------------------------------------------------------------------------


class RetryPolicy(_Response):
    """A task's effective retry policy (see :class:`duetime.types.RetryPolicy`)."""

    max_attempts: int = 5
    initial_delay_seconds: float = 1.0
    max_delay_seconds: float = 3600.0
    multiplier: float = 2.0
    jitter: float = 0.1


class Task(_Response):
    """A task as the API reports it, fields in the API's order. ``attempts`` counts every
    attempt ever started; ``next_attempt_at`` is when it will next be tried (None when running
    or finished)."""

    id: str
    name: str | None = None
    queue: str = "default"
    status: TaskStatus
    run_at: datetime
    target: dict[str, Any]
    payload: Any = None
    idempotency_key: str | None = None
    priority: int = 0
    retry: RetryPolicy = RetryPolicy()
    timeout_seconds: float | None = None
    depends_on: tuple[str, ...] = ()
    concurrency_key: str | None = None
    labels: dict[str, str] = {}
    attempts: int = 0
    schedule_id: str | None = None
    scheduled_for: datetime | None = None
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None = None
    finished_at: datetime | None = None
    last_error: str | None = None
    result: Any = None
    next_attempt_at: datetime | None = None
    cancel_requested: bool = False
    payload_ref: str | None = None
    """An opaque reference the task carries instead of a payload, as given at create."""
    flow_key: str | None = None
    """Its key under its queue's keyed rate limit, evaluated at create (None: none then)."""
    absorbed: int = 0
    """Creates a debounce folded into this task (its payload is the last one's)."""
    absorbed_at: datetime | None = None
    """When the last of them came."""
    created: bool | None = None
    """From ``create_task`` only: True when the call created the task, False when its
    ``idempotency_key``, a uniqueness window or a debounce found an existing one; None on
    every other call."""
    flow: dict[str, str] | None = None
    """From ``create_task`` only: what its flow rules did (``{"unique": "existing"}``,
    ``{"debounce": "absorbed"}``, ``{"throttle": "delayed"}``); None when none applied."""

    @property
    def terminal(self) -> bool:
        """Whether the task has finished for good (succeeded, failed or cancelled)."""
        return self.status.terminal


class Attempt(_Response):
    """One try at delivering a task."""

    task_id: str | None = None
    number: int
    started_at: datetime
    finished_at: datetime | None = None
    outcome: AttemptOutcome
    error: str | None = None
    http_status: int | None = None
    duration_ms: float | None = None
    worker: str | None = None
    logs: str | None = None
    """What the worker attached when it completed or failed the lease (at most 64 KiB)."""
    response: str | None = None
    """Webhook attempts: the first 4 KiB of the target's answer body, success or failure."""


class SigningSecret(_Response):
    """A ``whsec_`` secret that signs webhooks; ``expires_at=None`` = live until rotated."""

    id: str
    secret: str
    created_at: datetime
    expires_at: datetime | None = None


class Tenant(_Response):
    """The calling tenant and its live signing secrets (oldest first)."""

    id: str
    name: str
    signing_secrets: tuple[SigningSecret, ...] = ()
    created_at: datetime | None = None


class TenantCreated(_Response):
    """A new tenant and its first API key (``key_id`` names it for admin calls). The key is
    shown only this once."""

    id: str
    name: str
    api_key: str
    key_id: str | None = None


class TenantQuotas(_Response):
    """An operator's limits on a tenant (None: no limit); see ``PATCH /v1/admin/tenants``."""

    max_pending_tasks: int | None = None
    max_creates_per_second: float | None = None
    max_concurrency: int | None = None
    max_schedules: int | None = None
    weight: int = 1


class TenantUsage(_Response):
    pending_tasks: int = 0
    schedules: int = 0


class TenantAdmin(_Response):
    """A tenant as the admin sees it: its quotas and what counts against them."""

    id: str
    name: str
    created_at: datetime | None = None
    quotas: TenantQuotas = TenantQuotas()
    usage: TenantUsage = TenantUsage()


class TargetCircuit(_Response):
    """A webhook origin's circuit breaker (``GET /v1/targets``)."""

    origin: str
    state: str
    failures: int = 0
    cooldown_seconds: float = 0.0
    open_until: datetime | None = None
    opened: int = 0
    changed_at: datetime | None = None


class ApiKeyCreated(_Response):
    """A new API key of a tenant. ``api_key`` is shown only this once; ``id`` names it for
    :meth:`AsyncClient.delete_api_key`."""

    id: str
    tenant_id: str | None = None
    api_key: str
    created_at: datetime | None = None


class Page(_Response, Generic[T]):
    """What every SDK listing returns, in the shape the API and the CLI print
    (``{"items": [...], "next_cursor": ...}``): ``items`` in the listing's order, and
    ``next_cursor``, None on the last page (always None for listings the server answers whole:
    attempts, queues, workers, targets, tenants, credentials, upcoming times); otherwise pass it as
    ``cursor`` to get the next one. A page is also a sequence of its items: ``for x in page``,
    ``len(page)``, ``page[0]``."""

    items: tuple[T, ...]
    next_cursor: str | None = None

    def __iter__(self) -> Iterator[T]:  # type: ignore[override]
        # The items, not pydantic's (field, value) pairs: a page reads as the list it holds.
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, index: int) -> T:
        return self.items[index]


# -- leases (pull workers, SPEC §3 "Queues and pull workers") ---------------------------------


class LeaseCompletion(_Request):
    """One item of :meth:`AsyncClient.complete_leases`: the attempt under ``lease_id``
    succeeded with ``result`` (any JSON value; sent even when ``None``). ``logs``: text kept
    with the attempt (the server keeps the first 64 KiB of UTF-8)."""

    lease_id: str
    result: Any = None
    logs: str | None = None

    def to_json(self) -> dict[str, Any]:
        body = {"lease_id": self.lease_id, "result": self.result}
        if self.logs is not None:
            body["logs"] = self.logs
        return body


class LeaseFailure(_Request):
    """One item of :meth:`AsyncClient.fail_leases`: the attempt under ``lease_id`` failed.

    ``retryable=False`` ends the task ``failed`` at once; otherwise it is retried per its retry
    policy, not sooner than ``retry_after_seconds`` when given (the longer of that and the
    policy's backoff, as for webhooks' ``Retry-After``). ``timed_out=True`` records the attempt's
    outcome as ``timed_out`` rather than ``failed``. ``logs``: text kept with the attempt (the
    server keeps the first 64 KiB of UTF-8).
    """

    lease_id: str
    error: str
    retryable: bool = True
    retry_after_seconds: float | None = None
    timed_out: bool = False
    logs: str | None = None

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "lease_id": self.lease_id,
            "error": self.error,
            "retryable": self.retryable,
            "retry_after_seconds": self.retry_after_seconds,
            "timed_out": self.timed_out,
        }
        if self.logs is not None:
            body["logs"] = self.logs
        return body


class Parent(_Response):
    """A parent of a task (``depends_on``) as its child sees it: its ``ref`` in the workflow
    (None outside one), its status, and its ``result`` — or, for a result over 64 KiB (or past
    1 MiB for all of a task's parents), ``result_ref``, the path to read it from — or its
    ``error``."""

    id: str
    ref: str | None = None
    name: str | None = None
    status: TaskStatus
    result: Any = None
    result_ref: str | None = None
    error: str | None = None
    finished_at: datetime | None = None


class Lease(_Response):
    """A task leased to a worker: only the holder of the current ``lease_id`` may heartbeat,
    complete or fail it, and only until ``lease_expires_at`` (unless extended). ``attempt`` is
    the number of the attempt this lease runs (1 for the first). ``parents``: the outcomes of
    the task's parents, for a task with ``depends_on``."""

    lease_id: str
    lease_expires_at: datetime
    attempt: int
    task: Task
    traceparent: str | None = None
    """The task's W3C trace context (``traceparent`` given at create), if it has one."""
    payload_url: str | None = None
    """For a task whose payload duetime holds (``payload_held``): the URL that reads it during
    this attempt only (the Worker's ``Job.held_payload()`` uses it)."""
    parents: tuple[Parent, ...] = ()


class LeaseExtension(_Response):
    """A heartbeat's answer: the lease now lasts until ``lease_expires_at``.
    ``cancel_requested``: the task was cancelled while running; stop and fail the lease."""

    lease_id: str
    lease_expires_at: datetime
    cancel_requested: bool = False


class AckResult(_Response):
    """What became of one item of a batch complete or fail: ``status`` is ``"ok"`` when the
    server applied it and ``"stale"`` when the lease was no longer current (nothing changed).
    ``task_status`` is the task's status afterwards, when the server says."""

    lease_id: str
    status: str
    task_id: str | None = None
    task_status: TaskStatus | None = None
    detail: str | None = None

    @property
    def ok(self) -> bool:
        """Whether the server applied this item."""
        return self.status == "ok"


class WorkerInfo(_Response):
    """A worker the server has seen lease or heartbeat recently (``GET /v1/workers``): the
    queues it polled, when it was first and last seen, and how many leases it holds now."""

    worker_id: str
    queues: tuple[str, ...] = ()
    first_seen_at: datetime | None = None
    last_seen_at: datetime | None = None
    leases: int = 0


# -- recurring schedules (SPEC §3 "Schedules") ------------------------------------------------

__all__ += [
    "BackfillItem",
    "BackfillResult",
    "Schedule",
    "ScheduleDeleted",
    "ScheduleDst",
    "ScheduleRevision",
    "ScheduleTick",
    "UpcomingTime",
]


class ScheduleDst(_Response):
    """Daylight-saving knobs: ``nonexistent`` (``run_after_gap`` or ``skip``) and ``ambiguous``
    (``first`` or ``both``)."""

    nonexistent: str = "run_after_gap"
    ambiguous: str = "first"


class Schedule(_Response):
    """A recurring schedule. ``next_run_at`` is the next nominal fire time (None while paused or
    once ended); ``description`` says the expression in words; ``task`` is the template every
    occurrence becomes."""

    id: str
    cron: str | None = None
    every: str | None = None
    rrule: str | None = None
    timezone: str = "UTC"
    start_at: datetime | None = None
    end_at: datetime | None = None
    jitter_seconds: int = 0
    dst: ScheduleDst = ScheduleDst()
    overlap: str = "allow"
    catchup: str = "latest"
    catchup_window_seconds: int = 86_400
    catchup_max_runs: int = 100
    task: dict[str, Any] = {}
    paused: bool = False
    pause_note: str | None = None
    paused_at: datetime | None = None
    next_run_at: datetime | None = None
    description: str = ""
    version: int = 1
    created_at: datetime
    updated_at: datetime
    key: str | None = None
    """The declarative key (:meth:`~duetime.AsyncClient.ensure_schedule`), or None."""
    created: bool | None = None
    """From ``ensure_schedule`` only: True when the call created the schedule, False when one
    with the key existed (and was changed to match, or already matched); None elsewhere."""


class ScheduleDeleted(_Response):
    """A delete's answer: how many pending occurrences it cancelled."""

    id: str
    deleted: bool = True
    cancelled_tasks: int = 0


class UpcomingTime(_Response):
    """A coming fire time, with the offset of the schedule's zone; ``note`` says why it moved or
    repeats (a DST gap or fold)."""

    at: datetime
    note: str | None = None


class ScheduleTick(_Response):
    """One tick ledger row: a nominal instant (``at``) and what became of it (``outcome``:
    ``fired``, ``skipped_overlap``, ``skipped_paused``, ``missed``, ``caught_up``,
    ``backfilled``, ``dst_shifted``, ``dst_skipped`` or ``triggered``)."""

    at: datetime
    outcome: str
    task_id: str | None = None
    detail: str | None = None
    recorded_at: datetime | None = None


class ScheduleRevision(_Response):
    """One change to a schedule: when, by which API key (``actor``), and the fields before and
    after."""

    id: int
    at: datetime
    actor: str | None = None
    action: str
    before: dict[str, Any] = {}
    after: dict[str, Any] = {}


class BackfillItem(_Response):
    scheduled_for: datetime
    run_at: datetime
    task_id: str
    created: bool


class BackfillResult(_Response):
    """What a backfill made: ``created`` new tasks, ``existing`` occurrences that had theirs
    already, and whether the range held more than ``max_runs`` (``truncated``)."""

    created: int
    existing: int
    truncated: bool = False
    items: tuple[BackfillItem, ...] = ()
