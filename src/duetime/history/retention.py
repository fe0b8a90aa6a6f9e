"""Retention of finished tasks (SPEC §8 "Retention of tasks").

A finished task leaves the hot store once ``finished_at`` is older than the period of its final
status: ``{"succeeded": "P7D", "failed": "P30D", "cancelled": "P7D"}`` by default
(``DUETIME_RETENTION_SUCCEEDED`` / ``_FAILED`` / ``_CANCELLED``), overridden per queue
(``retention`` in ``PUT /v1/queues/{name}``; a status the queue does not name keeps the default).
Periods are ISO 8601 durations; a year counts 365.2425 days and a month 30.436875 (their average:
retention needs no calendar precision). Its attempts and audit events stay in the history tiers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from duetime.errors import ValidationError
from duetime.schedule.every_expr import parse_every

RETAINED_STATUSES = ("succeeded", "failed", "cancelled")
"""The final statuses a retention period applies to."""

MIN_RETENTION_SECONDS = 60.0
MAX_RETENTION_SECONDS = 100 * 365.2425 * 86400.0
DEFAULT_RETENTION = {"succeeded": "P7D", "failed": "P30D", "cancelled": "P7D"}


class ArchiveFailed(Exception):
    """The archive could not keep the tasks a retention sweep was deleting: nothing was deleted.
    (Not an ``OSError``, so no store mistakes it for losing its database.)"""


TaskArchiver = Callable[[Sequence[Mapping[str, Any]]], None]
"""Keeps the tasks a retention sweep is about to delete (``id``, ``tenant_id``, ``name``,
``queue``, ``status``, ``schedule_id``, ``finished_at`` and ``document``: the whole row as JSON
text); called before the deletion commits, so a task is never gone unarchived. Blocking; raising
keeps the tasks."""


def duration_seconds(text: str, field: str) -> float:
    """Seconds of an ISO 8601 duration (``P7D``, ``PT12H``, ``P1Y``), between one minute and a
    century. ``ValidationError`` naming ``field`` otherwise."""
    try:
        seconds = parse_every(text).approx().total_seconds()
    except ValidationError as exc:
        raise ValidationError(exc.detail.replace("every", field, 1), field=field) from None
    if not MIN_RETENTION_SECONDS <= seconds <= MAX_RETENTION_SECONDS:
        raise ValidationError(f"{field} must be between PT1M and P100Y", field=field)
    return seconds


@dataclass(frozen=True, slots=True)
class RetentionPolicy:
    """Seconds a finished task is kept, per final status; ``None`` = not set here (the queue
    falls back to the defaults)."""

    succeeded: float | None = None
    failed: float | None = None
    cancelled: float | None = None

    @classmethod
    def of_row(cls, row: Any) -> RetentionPolicy:
        """The policy of a ``queue_retention`` row (either store's)."""
        return cls(row["succeeded_seconds"], row["failed_seconds"], row["cancelled_seconds"])

    def seconds(self, status: str) -> float | None:
        """The period of ``status`` (one of :data:`RETAINED_STATUSES`)."""
        value: float | None = getattr(self, status)
        return value

    def over(self, defaults: RetentionPolicy) -> RetentionPolicy:
        """This policy with ``defaults`` filling what it leaves unset."""
        return RetentionPolicy(
            *(
                self.seconds(s) if self.seconds(s) is not None else defaults.seconds(s)
                for s in RETAINED_STATUSES
            )
        )

    def to_json(self) -> dict[str, str]:
        """``{"succeeded": "P7D", ...}`` for the statuses that are set."""
        return {s: iso_duration(v) for s in RETAINED_STATUSES if (v := self.seconds(s)) is not None}


def iso_duration(seconds: float) -> str:
    """The shortest ISO 8601 spelling of whole ``seconds``: ``P7D``, ``PT12H``, ``PT90S``."""
    whole = round(seconds)
    for unit, size in (("D", 86400), ("H", 3600), ("M", 60)):
        if whole % size == 0:
            return f"P{whole // size}D" if unit == "D" else f"PT{whole // size}{unit}"
    return f"PT{whole}S"


def parse_retention(raw: Mapping[str, str], field: str = "retention") -> RetentionPolicy:
    """A policy from ``{"succeeded": "P7D", ...}``; unknown statuses and bad durations are a
    ``ValidationError`` naming ``retention.<status>``."""
    values: dict[str, float] = {}
    for status, text in raw.items():
        if status not in RETAINED_STATUSES:
            raise ValidationError(
                f"{status!r} is not a final status; use {', '.join(RETAINED_STATUSES)}",
                field=f"{field}.{status}",
            )
        values[status] = duration_seconds(text, f"{field}.{status}")
    return RetentionPolicy(**values)


def default_policy(succeeded: str, failed: str, cancelled: str) -> RetentionPolicy:
    """The configured defaults (every status set)."""
    return parse_retention(
        {"succeeded": succeeded, "failed": failed, "cancelled": cancelled}, "retention_default"
    )
