"""Request bodies and response shapes of ``/v1/schedules`` (SPEC §3 "Schedules").

Like :mod:`duetime.api.schemas`: strict models that reject unknown fields. The expression, zone,
DST knobs and jitter are checked by :func:`duetime.schedule.parse_spec` (errors name the field:
``cron``, ``every``, ``rrule``, ``timezone``, ``dst.nonexistent`` ...); the task template reuses
the task-create field types and, in :mod:`duetime.api.schedule_ops`, the task-create checks, so
its errors read ``task.target.url``, ``task.payload``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic_core import PydanticCustomError

from duetime.api.fields import CleanText, JsonAny, Rfc3339, Whole, patch_schema, rules
from duetime.api.schemas import (
    MAX_TIMEOUT_SECONDS,
    MIN_TIMEOUT_SECONDS,
    Key,
    Labels,
    Name,
    Priority,
    QueueName,
    RetryIn,
    StrictModel,
    Target,
    TaskOut,
)
from duetime.schedule.parse import MAX_JITTER_SECONDS

MAX_CATCHUP_WINDOW_SECONDS = 366 * 86_400
MAX_CATCHUP_RUNS = 10_000
MAX_BACKFILL_RUNS = 10_000
MAX_BACKFILL_RATE = 1_000.0
MIN_BACKFILL_RATE = 0.001
"""One occurrence per 1,000 s: the slowest release (``max_runs`` spread over at most ~4 months)."""
MAX_UPCOMING = 1000

Overlap = Literal["allow", "skip", "buffer_one"]
Catchup = Literal["none", "latest", "all"]
_GRAMMAR = rules(("*", ""))  # cron, every, rrule and timezone: docs/schedules.md
Cron = Annotated[
    str, Field(min_length=1, max_length=1000, examples=["0 2 * * *"], json_schema_extra=_GRAMMAR)
]
Every = Annotated[
    str, Field(min_length=1, max_length=100, examples=["PT15M"], json_schema_extra=_GRAMMAR)
]
RRule = Annotated[
    str,
    Field(
        min_length=1,
        max_length=2000,
        examples=["FREQ=MONTHLY;BYDAY=-1FR;BYHOUR=9"],
        json_schema_extra=_GRAMMAR,
    ),
]
Zone = Annotated[
    str,
    Field(
        min_length=1,
        max_length=100,
        examples=["America/New_York"],
        description="An IANA time zone name.",
        json_schema_extra=_GRAMMAR,
    ),
]
Jitter = Annotated[
    int,
    Field(
        ge=0, le=MAX_JITTER_SECONDS, description="Seconds; each occurrence runs up to this late."
    ),
    Whole,
]
Window = Annotated[int, Field(ge=0, le=MAX_CATCHUP_WINDOW_SECONDS), Whole]
MaxRuns = Annotated[int, Field(ge=0, le=MAX_CATCHUP_RUNS), Whole]


SCHEDULE_RULES = (
    ("cron", "exactly one of cron, every or rrule"),
    ("every", "exactly one of cron, every or rrule"),
    ("rrule", "exactly one of cron, every or rrule"),
    ("start_at", ""),  # every and rrule count from it (or from the creation time)
    ("end_at", "end_at must be later than start_at"),
)
"""What a schedule must hold beyond its fields' schemas (:func:`~duetime.api.fields.rules`)."""


class DstIn(StrictModel):
    """Daylight-saving knobs for fixed local times (ignored by hourly and stepped rhythms)."""

    nonexistent: str = Field(
        default="run_after_gap",
        description="`run_after_gap` (default) or `skip`.",
        json_schema_extra={"enum": ["run_after_gap", "skip"]},
    )
    ambiguous: str = Field(
        default="first",
        description="`first` (default) or `both`.",
        json_schema_extra={"enum": ["first", "both"]},
    )


class TaskTemplateIn(StrictModel):
    """What each occurrence becomes: the fields of a task create that make sense per occurrence
    (no ``run_at``, ``idempotency_key`` or ``depends_on``)."""

    name: Name | None = None
    queue: QueueName = "default"
    target: Target
    payload: JsonAny = Field(
        default=None, description="Any JSON; at most max_payload_bytes encoded."
    )
    priority: Priority = 0
    retry: RetryIn | None = None
    timeout_seconds: Annotated[float, Field(ge=MIN_TIMEOUT_SECONDS, le=MAX_TIMEOUT_SECONDS)] = 30.0
    labels: Labels = Field(default_factory=dict)
    concurrency_key: Key | None = None


class ScheduleCreate(StrictModel):
    """A recurring schedule: exactly one of ``cron``, ``every`` (ISO 8601 duration, counted from
    ``start_at`` or the creation time) or ``rrule``, plus a task template; ``end_at`` later
    than ``start_at``."""

    model_config = ConfigDict(json_schema_extra=rules(*SCHEDULE_RULES))

    cron: Cron | None = None
    every: Every | None = None
    rrule: RRule | None = None
    timezone: Zone = "UTC"
    start_at: Rfc3339 | None = None
    end_at: Rfc3339 | None = None
    jitter_seconds: Jitter = 0
    overlap: Overlap = "allow"
    catchup: Catchup = "latest"
    catchup_window_seconds: Window = 86_400
    catchup_max_runs: MaxRuns = 100
    dst: DstIn | None = None
    task: TaskTemplateIn


class SchedulePatchIn(StrictModel):
    """Fields to change. Giving one of ``cron``/``every``/``rrule`` replaces the expression;
    ``task`` replaces the whole template; ``start_at``/``end_at`` may be null (cleared); other
    fields may not be null. Occurrences not yet started are made again under the new settings."""

    cron: Cron | None = None
    every: Every | None = None
    rrule: RRule | None = None
    timezone: Zone | None = None
    start_at: Rfc3339 | None = None
    end_at: Rfc3339 | None = None
    jitter_seconds: Jitter | None = None
    overlap: Overlap | None = None
    catchup: Catchup | None = None
    catchup_window_seconds: Window | None = None
    catchup_max_runs: MaxRuns | None = None
    dst: DstIn | None = None
    task: TaskTemplateIn | None = None

    model_config = ConfigDict(json_schema_extra=patch_schema(
        "cron", "every", "rrule", "timezone", "jitter_seconds", "overlap", "catchup",
        "catchup_window_seconds", "catchup_max_runs", "dst", "task", refusals=SCHEDULE_RULES,
    ))  # fmt: skip

    @field_validator(
        "cron", "every", "rrule", "timezone", "jitter_seconds", "overlap", "catchup",
        "catchup_window_seconds", "catchup_max_runs", "dst", "task",
    )  # fmt: skip
    @classmethod
    def _not_null(cls, value: Any) -> Any:
        if value is None:
            raise PydanticCustomError("not_null", "may not be null")
        return value


class PauseIn(StrictModel):
    note: Annotated[str, Field(max_length=1000), CleanText] | None = None


class TriggerIn(StrictModel):
    """``trigger`` takes no settings: the occurrence is the template's. A body is optional, and
    one that names any field is refused (422 naming it) rather than silently ignored."""


class ResumeIn(StrictModel):
    """``catchup``: what to do with the occurrences that fell in the pause (default ``none``:
    they are recorded ``skipped_paused`` and nothing runs for them)."""

    catchup: Catchup = "none"


class BackfillIn(StrictModel):
    """Make the occurrences in ``[start, end]`` (a past range), at most ``max_runs``, released at
    ``rate_per_second`` (staggered ``run_at`` from now)."""

    model_config = ConfigDict(
        json_schema_extra=rules(
            ("end", "end must be later than start"), ("end", "end must not be in the future")
        )
    )

    start: Rfc3339
    end: Rfc3339
    max_runs: Annotated[int, Field(ge=1, le=MAX_BACKFILL_RUNS), Whole] = 1000
    rate_per_second: Annotated[float, Field(ge=MIN_BACKFILL_RATE, le=MAX_BACKFILL_RATE)] = 10.0


# -- response shapes (documentation only) ------------------------------------------------------


class DstOut(BaseModel):
    nonexistent: str
    ambiguous: str


class ScheduleOut(BaseModel):
    """A schedule: its settings, its state, the next fire time (nominal, before jitter; null
    while paused or once ended) and a description of the expression."""

    id: str
    cron: str | None
    every: str | None
    rrule: str | None
    timezone: str
    start_at: datetime | None
    end_at: datetime | None
    jitter_seconds: int
    dst: DstOut
    overlap: Overlap
    catchup: Catchup
    catchup_window_seconds: int
    catchup_max_runs: int
    task: dict[str, Any]
    paused: bool
    pause_note: str | None
    paused_at: datetime | None
    next_run_at: datetime | None
    description: str
    version: int
    created_at: datetime
    updated_at: datetime
    key: str | None = None
    """The declarative key (``PUT /v1/schedules/by-key/{key}``), null for other schedules."""


class ScheduleListOut(BaseModel):
    items: list[ScheduleOut]
    next_cursor: str | None


class ScheduleDeletedOut(BaseModel):
    id: str
    deleted: bool
    cancelled_tasks: int = Field(description="Pending occurrences cancelled by the delete.")


class UpcomingItemOut(BaseModel):
    at: str = Field(description="RFC 3339 in the schedule's zone offset.")
    note: str | None = Field(description="Why this one moved or repeats (DST), else null.")


class UpcomingOut(BaseModel):
    items: list[UpcomingItemOut]


class TickOut(BaseModel):
    at: datetime = Field(description="The nominal instant.")
    outcome: Literal[
        "fired", "skipped_overlap", "skipped_paused", "missed", "caught_up", "backfilled",
        "dst_shifted", "dst_skipped", "triggered",
    ]  # fmt: skip
    task_id: str | None
    detail: str | None
    recorded_at: datetime


class TickListOut(BaseModel):
    items: list[TickOut]
    next_cursor: str | None


class RevisionOut(BaseModel):
    id: int
    at: datetime
    actor: str | None = Field(description="The API key id that made the change.")
    action: Literal["create", "update", "pause", "resume", "delete"]
    before: dict[str, Any]
    after: dict[str, Any]


class RevisionListOut(BaseModel):
    items: list[RevisionOut]
    next_cursor: str | None


class BackfillItemOut(BaseModel):
    scheduled_for: datetime
    run_at: datetime
    task_id: str
    created: bool = Field(description="False: the occurrence had its task already.")


class BackfillOut(BaseModel):
    created: int
    existing: int
    truncated: bool = Field(description="The range holds more than max_runs occurrences.")
    items: list[BackfillItemOut]


TriggerOut = TaskOut
