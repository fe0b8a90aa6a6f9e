"""Request bodies of the HTTP API v1 (SPEC §3), and the response shapes its OpenAPI document shows.

Request models are strict (no type coercion: ``"5"`` is not an integer) and reject unknown fields,
so a typo is a 422 naming the field instead of a silently ignored option. Cross-field checks that
need the server's settings or clock (payload size, ``delay_seconds``) live in
:mod:`duetime.api.convert`, which turns these models into :mod:`duetime.types` values.

Responses are rendered by :mod:`duetime.api.render` straight to JSON bytes (the create call is a hot
path); the ``*Out`` models below only describe them in ``/openapi.json``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from datetime import datetime
from typing import Annotated, Any, Literal

import orjson
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationInfo,
    field_validator,
    model_serializer,
)
from pydantic_core import PydanticCustomError

from duetime.api.fields import (
    BRACKETED_HOST,
    HEADERS_DOC,
    NO_CONTROL,
    NO_CONTROL_OR_EMPTY,
    CleanText,
    JsonAny,
    Rfc3339,
    Whole,
    canonical_uuid,
    check_headers,
    patch_schema,
    rules,
    url_checker,
    url_credential,
    url_pattern,
)
from duetime.api.fields import StrictModel as StrictModel  # the base of every request body
from duetime.api.target_auth import MtlsAuth, OidcAuth, TargetAuth
from duetime.target_types import TargetType
from duetime.types import RetryPolicy, TaskStatus

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

TaskId = Annotated[
    str, Field(max_length=64, json_schema_extra={"format": "uuid"}), AfterValidator(canonical_uuid)
]
QUEUE_NAME = r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}"
"""A queue name, unanchored (the models that use it anchor it)."""
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
LabelValue = Annotated[str, Field(max_length=256, pattern=NO_CONTROL_OR_EMPTY), CleanText]
Labels = Annotated[
    dict[LabelKey, LabelValue],
    Field(
        max_length=MAX_LABELS,
        description="Up to 64 labels; keys have no `:`.",
        # patternProperties alone would let other keys through; the model refuses them.
        json_schema_extra={"propertyNames": {"pattern": f"^{LABEL_KEY}$"}},
    ),
]
Priority = Annotated[int, Field(ge=PRIORITY_MIN, le=PRIORITY_MAX), Whole]


def _url_doc(kind: TargetType) -> Any:
    """A target URL's length, and its pattern for the OpenAPI document (checked by
    :func:`~duetime.api.fields.url_checker`, which names the schemes when it refuses one)."""
    pattern = url_pattern(tuple(kind.spec.schemes))
    return Field(
        max_length=2048, json_schema_extra={"pattern": pattern, **rules(("*", BRACKETED_HOST))}
    )


class HttpTarget(StrictModel):
    """Deliver the payload as a signed webhook. Credentials in ``headers`` (the documented
    names and those listed in ``secret_headers``), in the URL's user info (sent as HTTP Basic
    auth) or in credential query parameters are sealed when stored and shown as ``***`` and a
    fingerprint; ``auth`` names a credential kept apart from the task."""

    model_config = ConfigDict(
        json_schema_extra=rules(
            ("headers", "the URL carries a user and password"),
            ("secret_headers", ""),  # each must be one of headers
            ("auth", "the URL carries a user and password"),
            ("auth", "a client certificate needs an https url"),
            ("auth", "auth sets Authorization"),
        )
    )

    type: Literal["http"]
    url: Annotated[str, _url_doc(TargetType.HTTP), url_checker(*TargetType.HTTP.spec.schemes)]
    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE"] = "POST"
    headers: Annotated[
        dict[str, Annotated[str, Field(max_length=8192)]],
        Field(max_length=MAX_HEADERS, json_schema_extra=HEADERS_DOC),
        AfterValidator(check_headers),
    ] = Field(default_factory=dict)
    secret_headers: Annotated[list[str], Field(max_length=MAX_HEADERS)] | None = Field(
        default=None,
        description="More header names whose values are credentials (sealed, never shown).",
    )
    auth: TargetAuth | None = Field(
        default=None, description="A named credential to authenticate with."
    )

    @field_validator("headers")
    @classmethod
    def _one_authorization(cls, value: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        if url_credential(info.data.get("url")) and any(
            name.lower() == "authorization" for name in value
        ):
            raise PydanticCustomError(
                "two_credentials",
                "the URL carries a user and password (sent as Basic auth): give the credential "
                "there or in an Authorization header, not both",
            )
        return value

    @field_validator("secret_headers")
    @classmethod
    def _named_headers(cls, value: list[str] | None, info: ValidationInfo) -> list[str] | None:
        given = {name.lower() for name in info.data.get("headers") or {}}
        for name in value or ():
            if name.lower() not in given:
                raise PydanticCustomError(
                    "secret_header", "{name} is not one of this target's headers", {"name": name}
                )
        return value

    @field_validator("auth")
    @classmethod
    def _one_auth(cls, value: Any, info: ValidationInfo) -> Any:
        if value is None:
            return value
        url = info.data.get("url") or ""
        if url_credential(url):
            raise PydanticCustomError(
                "two_credentials",
                "the URL carries a user and password: authenticate with the URL or with auth, "
                "not both",
            )
        if isinstance(value, MtlsAuth) and not url.lower().startswith("https://"):
            raise PydanticCustomError("mtls_https", "a client certificate needs an https url")
        if isinstance(value, OidcAuth) and any(
            name.lower() == "authorization" for name in info.data.get("headers") or {}
        ):
            raise PydanticCustomError(
                "auth_header", "auth sets Authorization: leave it out of headers"
            )
        return value

    @model_serializer(mode="wrap")
    def _without_unset(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # A target stored, answered and fingerprinted as before when it uses neither.
        data: dict[str, Any] = handler(self)
        for name in ("secret_headers", "auth"):
            if data.get(name) is None:
                data.pop(name, None)
        return data


class AmqpTarget(StrictModel):
    """Publish to RabbitMQ (``exchange`` ``""`` is the default exchange)."""

    model_config = ConfigDict(
        json_schema_extra=rules(("routing_key", "give an exchange or a routing_key"))
    )

    type: Literal["amqp"]
    url: Annotated[str, _url_doc(TargetType.AMQP), url_checker(*TargetType.AMQP.spec.schemes)]
    exchange: Annotated[str, Field(max_length=255, pattern=NO_CONTROL_OR_EMPTY), CleanText] = ""
    routing_key: Annotated[str, Field(max_length=255, pattern=NO_CONTROL_OR_EMPTY), CleanText] = (
        Field(default="", validate_default=True)
    )
    headers: Annotated[
        dict[str, Annotated[str, Field(max_length=8192)]],
        Field(max_length=MAX_HEADERS, json_schema_extra=HEADERS_DOC),
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
    url: Annotated[str, _url_doc(TargetType.NATS), url_checker(*TargetType.NATS.spec.schemes)]
    subject: Annotated[
        str,
        Field(
            min_length=1,
            max_length=255,
            pattern=r"^[^\s.*>\x00-\x1f\x7f-\x9f]+(\.[^\s.*>\x00-\x1f\x7f-\x9f]+)*$",
        ),
        CleanText,
    ]
    jetstream: bool = Field(default=True, description="false: core NATS publish + flush.")


class RedisTarget(StrictModel):
    """``XADD`` to a Redis stream."""

    type: Literal["redis"]
    url: Annotated[str, _url_doc(TargetType.REDIS), url_checker(*TargetType.REDIS.spec.schemes)]
    stream: Annotated[str, Field(min_length=1, max_length=255, pattern=NO_CONTROL), CleanText]
    maxlen: Annotated[int, Field(ge=1), Whole] | None = Field(
        default=None, description="Trim the stream to about this many entries (MAXLEN ~)."
    )


class WorkerTarget(StrictModel):
    """No push: a worker leases the task from its queue."""

    type: Literal["worker"]


Target = Annotated[
    HttpTarget | AmqpTarget | NatsTarget | RedisTarget | WorkerTarget, Field(discriminator="type")
]
"""One request model per registered target type (:data:`duetime.target_types.TARGETS`), its
``type`` literal the type's name: ``tests/unit/test_target_registry.py`` holds the two equal."""


KeyExpression = Annotated[
    Any,
    Field(
        description="A key expression: `name`, `concurrency_key`, `labels.<key>`, `payload` or "
        "`payload.<path>`, or a list of up to 4 of them (docs/flow-control.md); checked by "
        "duetime.flow.keys, which names the term at fault.",
        json_schema_extra={
            **rules(("*", "")),
            "anyOf": [
                {"type": "string", "minLength": 1, "maxLength": 300},
                {
                    "type": "array",
                    "items": {"type": "string", "minLength": 1, "maxLength": 300},
                    "minItems": 1,
                    "maxItems": 4,
                },
            ],
        },
    ),
]
Duration = Annotated[
    str,
    Field(
        max_length=64,
        description="An ISO 8601 duration of elapsed time: `PT0.5S`, `PT5M`, `P1D`, within the "
        "field's range.",
        json_schema_extra=rules(("*", "")),
    ),
]
StatusName = Annotated[
    str, Field(max_length=32, json_schema_extra={"enum": [s.value for s in TaskStatus]})
]


class TaskUniqueIn(StrictModel):
    """A task's own uniqueness window (instead of its queue's): a create within ``period`` of
    a task made with the same key, while that task is in one of ``states`` (default: every
    status but failed and cancelled), makes nothing and answers 200 with that task
    (``Duetime-Unique: existing``). ``key`` is the key itself; ``key_from`` a key expression
    evaluated on the task. Give one."""

    key: Annotated[str, Field(min_length=1, max_length=255)] | None = None
    key_from: KeyExpression | None = None
    period: Duration
    states: Annotated[list[StatusName], Field(min_length=1, max_length=8)] | None = None


class RetryIn(StrictModel):
    """Backoff for failed attempts; omitted fields take the defaults."""

    model_config = ConfigDict(
        json_schema_extra=rules(("max_delay_seconds", "must be >= initial_delay_seconds"))
    )

    max_attempts: Annotated[int, Field(ge=1, le=1000), Whole] = _DEFAULT_RETRY.max_attempts
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


class CallbackIn(StrictModel):
    """A task made when this one ends (in the transaction of that end), delivered to ``target``
    (any target type) with the outcome as its payload: signed, retried and recorded like any
    task (docs/api.md "Callbacks")."""

    target: Target
    queue: Annotated[QueueName | None, Field(description="Default: the ended task's queue.")] = None
    name: Annotated[Name | None, Field(description="Default: the kind, e.g. on_failure.")] = None
    retry: RetryIn | None = None
    timeout_seconds: (
        Annotated[float, Field(ge=MIN_TIMEOUT_SECONDS, le=MAX_TIMEOUT_SECONDS)] | None
    ) = None

    def target_fields(self) -> dict[str, Any]:
        return self.target.model_dump()

    def retry_policy(self) -> RetryPolicy | None:
        return None if self.retry is None else self.retry.to_policy()


ParentFailurePolicy = Literal["fail", "run", "cancel"]
_FOLLOW_DEFAULTS: dict[str, Any] = {
    "payload_held": None,
    "unique": None,
    "on_parent_failure": "fail",
    "parents_in_body": False,
    "on_success": None,
    "on_failure": None,
    "on_end": None,
}
"""Fields added to a create after fingerprints were first kept (what follows a task's end, a held
payload, a uniqueness window), at their defaults: left out of a create's fingerprint then, so a
repeat keeps matching a task made before they existed."""


TASK_RULES = (
    ("payload_ref", "give payload or payload_ref, not both"),
    ("payload_ref", "references starting with duetime: are duetime's own"),
    ("payload_held", "give payload_held alone"),
    ("delay_seconds", "give run_at or delay_seconds, not both"),
    ("unique", "give key (the key itself) or key_from"),
    ("depends_on", "depends_on: no task with id"),  # each parent must be the tenant's task
)
"""What a task create must hold beyond its fields' schemas (:func:`~duetime.api.fields.rules`)."""


class TaskCreate(StrictModel):
    """A one-time task. Only ``target`` is required; ``run_at`` and ``delay_seconds`` exclude each
    other and neither means now."""

    model_config = ConfigDict(json_schema_extra=rules(*TASK_RULES))

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
    payload_held: JsonAny = Field(
        default=None,
        description="A payload duetime holds apart from the task (at most "
        "max_held_payload_bytes encoded): each attempt gets a URL that reads it, valid during "
        "that attempt only (`duetime-payload-url`, a lease's `payload_url`).",
    )
    unique: TaskUniqueIn | None = None
    on_parent_failure: ParentFailurePolicy = Field(
        default="fail",
        description="What a parent's failure (or cancel) means: fail this task, run it anyway "
        "(it sees the failure), or cancel it.",
    )
    parents_in_body: bool = Field(
        default=False,
        description="Push targets: send the parents' outcomes with the payload, as "
        '{"payload": ..., "parents": [...]} (header duetime-body: parents).',
    )
    on_success: CallbackIn | None = None
    on_failure: CallbackIn | None = None
    on_end: CallbackIn | None = None

    @field_validator("payload_ref")
    @classmethod
    def _not_with_payload(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None and info.data.get("payload") is not None:
            raise PydanticCustomError(
                "payload_and_ref",
                "give payload or payload_ref, not both (the reference is handed "
                "on instead of a payload)",
            )
        if value is not None and value.startswith("duetime:"):
            raise PydanticCustomError(
                "payload_ref_reserved", "references starting with duetime: are duetime's own"
            )
        return value

    @field_validator("payload_held")
    @classmethod
    def _held_alone(cls, value: Any, info: ValidationInfo) -> Any:
        if value is not None and (
            info.data.get("payload") is not None or info.data.get("payload_ref") is not None
        ):
            raise PydanticCustomError(
                "payload_held_and_payload",
                "give payload_held alone, without payload or payload_ref",
            )
        return value

    @field_validator("delay_seconds")
    @classmethod
    def _not_with_run_at(cls, value: float | None, info: ValidationInfo) -> float | None:
        if value is not None and info.data.get("run_at") is not None:
            raise PydanticCustomError("run_at_and_delay", "give run_at or delay_seconds, not both")
        return value

    def target_fields(self) -> dict[str, Any]:
        """The target as a JSON object (:class:`duetime.lifecycle.create.TaskSpec`)."""
        return self.target.model_dump()

    def retry_policy(self) -> RetryPolicy | None:
        """The retry policy asked for; None: the default."""
        return None if self.retry is None else self.retry.to_policy()

    def unique_fields(self) -> dict[str, Any] | None:
        """The task's own uniqueness window as JSON (None: its queue's, if any)."""
        return None if self.unique is None else self.unique.model_dump(exclude_none=True)

    def fingerprint(self, target: Mapping[str, Any] | None = None) -> str | None:
        """The fingerprint of this request with an idempotency key (None without one): fields
        compared as validated, so a default left out equals the default given
        (``{"priority": 0}`` repeats ``{}``). ``target``: fingerprint this in place of the
        target given (a target with credentials, as answers show it)."""
        if self.idempotency_key is None:
            return None
        fields = self.model_dump(mode="json")
        if target is not None:
            fields["target"] = target
        for name, default in _FOLLOW_DEFAULTS.items():
            if fields.get(name) == default:
                del fields[name]
        canonical = orjson.dumps(fields, option=orjson.OPT_SORT_KEYS)
        return hashlib.sha256(canonical).hexdigest()[:32]

    def callbacks(self) -> dict[str, CallbackIn]:
        """The callbacks asked for, by kind (:class:`duetime.lifecycle.create.TaskSpec`)."""
        if self.on_success is None and self.on_failure is None and self.on_end is None:
            return {}
        found = {"on_success": self.on_success, "on_failure": self.on_failure}
        found["on_end"] = self.on_end
        return {kind: cb for kind, cb in found.items() if cb is not None}


class TaskBatchCreate(StrictModel):
    """Up to 1,000 tasks created all or nothing (none with ``payload_held``: a held payload is
    sent one task at a time)."""

    model_config = ConfigDict(
        json_schema_extra=rules(("tasks.payload_held", "hold payloads one task at a time"))
    )

    tasks: Annotated[list[TaskCreate], Field(min_length=1, max_length=MAX_BATCH)]


class TaskPatchIn(StrictModel):
    """Fields to change on a waiting task. A field left out is kept; ``labels`` replaces the whole
    set; ``payload: null`` sets the payload to JSON null; the other fields may not be null."""

    run_at: Rfc3339 | None = None
    payload: JsonAny = None
    priority: Priority | None = None
    labels: Labels | None = None

    model_config = ConfigDict(json_schema_extra=patch_schema("run_at", "priority", "labels"))

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

    max_pending_tasks: Annotated[int, Field(ge=0, le=10**12), Whole] | None = None
    max_creates_per_second: float | None = Field(None, gt=0, le=1_000_000)
    max_concurrency: Annotated[int, Field(ge=0, le=1_000_000), Whole] | None = None
    max_schedules: Annotated[int, Field(ge=0, le=1_000_000), Whole] | None = None
    weight: Annotated[int, Field(ge=1, le=1000), Whole] | None = None


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
    flow_key: str | None = Field(
        default=None,
        description="The task's key under its queue's keyed rate limit, evaluated when it was "
        'created (null: the queue had none then; "": the task has no value for the key).',
    )
    absorbed: int = Field(
        default=0,
        description="Creates a debounce folded into this task (its payload is the last's).",
    )
    absorbed_at: datetime | None = Field(default=None, description="When the last one came.")


class UniqueHeldOut(BaseModel):
    """A create's uniqueness window holds its key, and the window's task has left the hot
    store since (retention): nothing was created (``Duetime-Unique: existing``)."""

    id: str = Field(description="The task that holds the window.")
    retired: Literal[True]
    unique_until: datetime = Field(description="When the window ends.")


class TaskListOut(BaseModel):
    items: list[TaskOut]
    next_cursor: str | None = Field(
        description="Pass as `cursor` for the next page; null on the last page."
    )


class TaskItemsOut(BaseModel):
    items: list[TaskOut]


class TaskIdOut(BaseModel):
    id: str
    created: bool = Field(description="false: the idempotency_key named an existing task.")


class TaskIdItemsOut(BaseModel):
    """A batch create's answer under ``Prefer: return=minimal``: ids in input order."""

    items: list[TaskIdOut]


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
