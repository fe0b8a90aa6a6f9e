"""Request bodies of the HTTP API v1 (SPEC §3), and the response shapes its OpenAPI document shows.

Request models are strict (no type coercion: ``"5"`` is not an integer) and reject unknown fields,
so a typo is a 422 naming the field instead of a silently ignored option. Cross-field checks that
need the server's settings or clock (payload size, ``delay_seconds``) live in
:mod:`duetime.api.convert`, which turns these models into :mod:`duetime.types` values.

Responses are rendered by :mod:`duetime.api.render` straight to JSON bytes (the create call is a hot
path); the ``*Out`` models below only describe them in ``/openapi.json``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
)
from pydantic_core import PydanticCustomError

from duetime.api.fields import (
    NO_CONTROL,
    CleanText,
    JsonAny,
    Rfc3339,
    canonical_uuid,
    check_headers,
    url_checker,
)
from duetime.types import RetryPolicy

MAX_BATCH = 1000
MAX_LIST_LIMIT = 1000
MAX_TIMEOUT_SECONDS = 3600.0
MIN_TIMEOUT_SECONDS = 0.001
MIN_RETRY_DELAY_SECONDS = 0.001
MAX_DELAY_SECONDS = 10 * 365 * 86400.0
MAX_RETRY_DELAY_SECONDS = 30 * 86400.0
MAX_OVERLAP_SECONDS = 30 * 86400.0
MAX_DEPENDS_ON = 100
MAX_LABELS = 64
MAX_HEADERS = 64
PRIORITY_MIN, PRIORITY_MAX = -32768, 32767
_DEFAULT_RETRY = RetryPolicy()

TaskId = Annotated[str, Field(max_length=64), AfterValidator(canonical_uuid)]
QUEUE_NAME = r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}"
"""A queue name, unanchored (the model anchors it; :mod:`duetime.api.batch_body` full-matches)."""
LABEL_KEY = r"[A-Za-z0-9][A-Za-z0-9._/-]{0,62}"
"""A label key, unanchored (as :data:`QUEUE_NAME`)."""
QueueName = Annotated[
    str,
    Field(
        pattern=f"^{QUEUE_NAME}$",
        description="1-128 characters: letters, digits, `.`, `_`, `:`, `-`; starts alphanumeric.",
    ),
]
Name = Annotated[str, Field(min_length=1, max_length=200, pattern=NO_CONTROL), CleanText]
Key = Annotated[str, Field(min_length=1, max_length=255, pattern=NO_CONTROL), CleanText]
PayloadRef = Annotated[
    str,
    Field(
        min_length=1,
        max_length=2048,
        pattern=r"^[\x20-\x7e]+$",
        description="An opaque reference (≤ 2 KiB of printable ASCII: it travels in an HTTP "
        "header) handed to the target instead of a payload.",
    ),
]
LabelKey = Annotated[str, Field(pattern=f"^{LABEL_KEY}$")]
LabelValue = Annotated[str, Field(max_length=256), CleanText]
Labels = Annotated[
    dict[LabelKey, LabelValue],
    Field(max_length=MAX_LABELS, description="Up to 64 labels; keys have no `:`."),
]
Priority = Annotated[int, Field(ge=PRIORITY_MIN, le=PRIORITY_MAX)]


class StrictModel(BaseModel):
    """Base of every request body: unknown fields and type coercion are refused."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


class HttpTarget(StrictModel):
    """Deliver the payload as a signed webhook."""

    type: Literal["http"]
    url: Annotated[str, Field(max_length=2048), url_checker("http", "https")]
    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE"] = "POST"
    headers: Annotated[
        dict[str, Annotated[str, Field(max_length=8192)]],
        Field(max_length=MAX_HEADERS),
        AfterValidator(check_headers),
    ] = Field(default_factory=dict)


class AmqpTarget(StrictModel):
    """Publish to RabbitMQ (``exchange`` ``""`` is the default exchange)."""

    type: Literal["amqp"]
    url: Annotated[str, Field(max_length=2048), url_checker("amqp", "amqps")]
    exchange: Annotated[str, Field(max_length=255)] = ""
    routing_key: Annotated[str, Field(max_length=255)] = Field(default="", validate_default=True)
    headers: Annotated[
        dict[str, Annotated[str, Field(max_length=8192)]],
        Field(max_length=MAX_HEADERS),
        AfterValidator(check_headers),
    ] = Field(default_factory=dict)
    persistent: bool = Field(default=True, description="delivery_mode 2 (stored to disk).")

    @field_validator("routing_key")
    @classmethod
    def _somewhere(cls, value: str, info: ValidationInfo) -> str:
        if not value and not info.data.get("exchange"):
            raise PydanticCustomError("amqp_route", "give an exchange or a routing_key")
        return value


class NatsTarget(StrictModel):
    """Publish to NATS (JetStream when the subject belongs to a stream)."""

    type: Literal["nats"]
    url: Annotated[str, Field(max_length=2048), url_checker("nats", "tls")]
    subject: Annotated[
        str, Field(min_length=1, max_length=255, pattern=r"^[^\s.*>]+(\.[^\s.*>]+)*$")
    ]
    jetstream: bool = Field(default=True, description="false: core NATS publish + flush.")


class RedisTarget(StrictModel):
    """``XADD`` to a Redis stream."""

    type: Literal["redis"]
    url: Annotated[str, Field(max_length=2048), url_checker("redis", "rediss")]
    stream: Annotated[str, Field(min_length=1, max_length=255)]
    maxlen: Annotated[int, Field(ge=1)] | None = Field(
        default=None, description="Trim the stream to about this many entries (MAXLEN ~)."
    )


class WorkerTarget(StrictModel):
    """No push: a worker leases the task from its queue."""

    type: Literal["worker"]


Target = Annotated[
    HttpTarget | AmqpTarget | NatsTarget | RedisTarget | WorkerTarget, Field(discriminator="type")
]
TARGET_TYPES = frozenset({"http", "amqp", "nats", "redis", "worker"})


class RetryIn(StrictModel):
    """Backoff for failed attempts; omitted fields take the defaults."""

    max_attempts: Annotated[int, Field(ge=1, le=1000)] = _DEFAULT_RETRY.max_attempts
    initial_delay_seconds: Annotated[
        float, Field(ge=MIN_RETRY_DELAY_SECONDS, le=MAX_RETRY_DELAY_SECONDS)
    ] = _DEFAULT_RETRY.initial_delay_seconds
    max_delay_seconds: Annotated[
        float, Field(ge=MIN_RETRY_DELAY_SECONDS, le=MAX_RETRY_DELAY_SECONDS)
    ] = Field(default=_DEFAULT_RETRY.max_delay_seconds, validate_default=True)
    multiplier: Annotated[float, Field(ge=1, le=100)] = _DEFAULT_RETRY.multiplier
    jitter: Annotated[float, Field(ge=0, le=1)] = _DEFAULT_RETRY.jitter

    @field_validator("max_delay_seconds")
    @classmethod
    def _not_below_initial(cls, value: float, info: ValidationInfo) -> float:
        initial = info.data.get("initial_delay_seconds")
        if initial is not None and value < initial:
            raise PydanticCustomError("retry_max", "must be >= initial_delay_seconds")
        return value

    def to_policy(self) -> RetryPolicy:
        return RetryPolicy(
            max_attempts=self.max_attempts,
            initial_delay_seconds=self.initial_delay_seconds,
            max_delay_seconds=self.max_delay_seconds,
            multiplier=self.multiplier,
            jitter=self.jitter,
        )


class TaskCreate(StrictModel):
    """A one-time task. Only ``target`` is required; ``run_at`` and ``delay_seconds`` exclude each
    other and neither means now."""

    name: Name | None = None
    queue: QueueName = "default"
    run_at: Rfc3339 | None = None
    delay_seconds: Annotated[float, Field(ge=0, le=MAX_DELAY_SECONDS)] | None = None
    target: Target
    payload: JsonAny = Field(
        default=None, description="Any JSON; at most max_payload_bytes encoded."
    )
    idempotency_key: Key | None = None
    priority: Priority = 0
    retry: RetryIn | None = None
    timeout_seconds: Annotated[float, Field(ge=MIN_TIMEOUT_SECONDS, le=MAX_TIMEOUT_SECONDS)] = 30.0
    depends_on: Annotated[list[TaskId], Field(max_length=MAX_DEPENDS_ON)] = Field(
        default_factory=list
    )
    concurrency_key: Key | None = None
    labels: Labels = Field(default_factory=dict)
    payload_ref: PayloadRef | None = None

    @field_validator("payload_ref")
    @classmethod
    def _not_with_payload(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None and info.data.get("payload") is not None:
            raise PydanticCustomError(
                "payload_and_ref",
                "give payload or payload_ref, not both (the reference is handed "
                "on instead of a payload)",
            )
        return value

    @field_validator("delay_seconds")
    @classmethod
    def _not_with_run_at(cls, value: float | None, info: ValidationInfo) -> float | None:
        if value is not None and info.data.get("run_at") is not None:
            raise PydanticCustomError("run_at_and_delay", "give run_at or delay_seconds, not both")
        return value


class TaskBatchCreate(StrictModel):
    """Up to 1,000 tasks created all or nothing."""

    tasks: Annotated[list[TaskCreate], Field(min_length=1, max_length=MAX_BATCH)]


class TaskPatchIn(StrictModel):
    """Fields to change on a waiting task. A field left out is kept; ``labels`` replaces the whole
    set; ``payload: null`` sets the payload to JSON null; the other fields may not be null."""

    run_at: Rfc3339 | None = None
    payload: JsonAny = None
    priority: Priority | None = None
    labels: Labels | None = None

    @field_validator("run_at", "priority", "labels")
    @classmethod
    def _not_null(cls, value: Any) -> Any:
        if value is None:
            raise PydanticCustomError("not_null", "may not be null")
        return value


class RotateIn(StrictModel):
    """How long the current signing secrets stay live next to the new one."""

    overlap_seconds: Annotated[float, Field(ge=0, le=MAX_OVERLAP_SECONDS)] = 86400.0


class TenantCreateIn(StrictModel):
    name: Name


class TenantQuotasIn(StrictModel):
    """``PATCH /v1/admin/tenants/{id}``: the quotas to change (SPEC §7). A field left out keeps
    its value; ``null`` removes the limit (``weight``: back to 1)."""

    max_pending_tasks: int | None = Field(None, ge=0, le=10**12)
    max_creates_per_second: float | None = Field(None, gt=0, le=1_000_000)
    max_concurrency: int | None = Field(None, ge=0, le=1_000_000)
    max_schedules: int | None = Field(None, ge=0, le=1_000_000)
    weight: int | None = Field(None, ge=1, le=1000)


# -- response shapes (documentation only) ------------------------------------------------------


class TaskOut(BaseModel):
    """A task as the API returns it: every create field plus its state."""

    id: str
    name: str | None
    queue: str
    status: Literal[
        "scheduled", "blocked", "ready", "running", "retrying", "succeeded", "failed", "cancelled"
    ]
    run_at: datetime
    target: dict[str, Any]
    payload: Any
    idempotency_key: str | None
    priority: int
    retry: dict[str, float]
    timeout_seconds: float
    depends_on: list[str]
    concurrency_key: str | None
    labels: dict[str, str]
    attempts: int
    schedule_id: str | None
    scheduled_for: datetime | None
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    last_error: str | None
    result: Any
    next_attempt_at: datetime | None
    cancel_requested: bool
    payload_ref: str | None = None


class TaskListOut(BaseModel):
    items: list[TaskOut]
    next_cursor: str | None = Field(
        description="Pass as `cursor` for the next page; null on the last page."
    )


class TaskItemsOut(BaseModel):
    items: list[TaskOut]


class AttemptOut(BaseModel):
    task_id: str
    number: int
    started_at: datetime
    finished_at: datetime
    outcome: Literal["succeeded", "failed", "timed_out", "lease_expired"]
    error: str | None
    http_status: int | None
    duration_ms: float
    worker: str | None
    logs: str | None = Field(
        description="What the worker attached when it completed or failed the lease (at most "
        "64 KiB of UTF-8)."
    )
    response: str | None = Field(
        description="Webhook attempts: the first 4 KiB of the target's answer body, success or "
        "failure (null: no body, or no answer)."
    )


class AttemptListOut(BaseModel):
    items: list[AttemptOut]


class SigningSecretOut(BaseModel):
    id: str
    secret: str
    created_at: datetime
    expires_at: datetime | None


class TenantOut(BaseModel):
    id: str
    name: str
    created_at: datetime
    signing_secrets: list[SigningSecretOut]


class TenantCreatedOut(BaseModel):
    id: str
    name: str
    api_key: str = Field(description="Shown once; only its hash is stored.")
    key_id: str


class TenantQuotasOut(BaseModel):
    max_pending_tasks: int | None
    max_creates_per_second: float | None
    max_concurrency: int | None
    max_schedules: int | None
    weight: int


class TenantUsageOut(BaseModel):
    pending_tasks: int = Field(description="Tasks not ended (scheduled to running).")
    schedules: int


class TenantAdminOut(BaseModel):
    id: str
    name: str
    created_at: datetime
    quotas: TenantQuotasOut
    usage: TenantUsageOut


class TenantAdminListOut(BaseModel):
    items: list[TenantAdminOut]


class ApiKeyOut(BaseModel):
    id: str
    tenant_id: str
    created_at: datetime
    api_key: str = Field(description="Shown once; only its hash is stored.")


class FieldErrorOut(BaseModel):
    field: str
    detail: str


class ProblemOut(BaseModel):
    """RFC 9457 problem details (``application/problem+json``)."""

    type: str
    title: str
    status: int
    detail: str
    instance: str
    field: str | None = None
    errors: list[FieldErrorOut] | None = None
    limit: str | None = None
