"""Validating a schedule's timing as the API receives it."""

from __future__ import annotations

import functools
import zoneinfo
from collections.abc import Mapping
from datetime import UTC, datetime

from duetime.errors import ValidationError
from duetime.schedule.dst import AMBIGUOUS_CHOICES, NONEXISTENT_CHOICES
from duetime.schedule.occurrences import check_fires
from duetime.schedule.spec import EXPRESSION_FIELDS, ScheduleSpec

MAX_JITTER_SECONDS = 86_400


@functools.cache
def _zone_names() -> frozenset[str]:
    # "localtime" is the machine's own zone file, not an IANA name: refuse it.
    return frozenset(zoneinfo.available_timezones() - {"localtime", "posixrules", "Factory"})


def _zone(name: object) -> str:
    if not isinstance(name, str) or not name:
        raise ValidationError("timezone must be an IANA zone name such as UTC", field="timezone")
    if name != "UTC" and name not in _zone_names():
        raise ValidationError(
            f"timezone {name!r} is not an IANA zone name (e.g. America/New_York, UTC)",
            field="timezone",
        )
    return name


def _instant(value: object, name: str) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, datetime):
        raise ValidationError(f"{name} must be a date-time", field=name)
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValidationError(f"{name} must include a UTC offset (e.g. ...Z)", field=name)
    return value.astimezone(UTC)


def _dst(dst: Mapping[str, object] | None) -> tuple[str, str]:
    settings = dict(dst or {})
    for key in settings:
        if key not in ("nonexistent", "ambiguous"):
            raise ValidationError(
                f"unknown dst setting {key!r}; use nonexistent and ambiguous", field=f"dst.{key}"
            )
    nonexistent = settings.get("nonexistent", "run_after_gap")
    ambiguous = settings.get("ambiguous", "first")
    if nonexistent not in NONEXISTENT_CHOICES:
        raise ValidationError(
            f"dst.nonexistent must be one of {', '.join(NONEXISTENT_CHOICES)}",
            field="dst.nonexistent",
        )
    if ambiguous not in AMBIGUOUS_CHOICES:
        raise ValidationError(
            f"dst.ambiguous must be one of {', '.join(AMBIGUOUS_CHOICES)}", field="dst.ambiguous"
        )
    return str(nonexistent), str(ambiguous)


def parse_spec(
    *,
    cron: str | None = None,
    every: str | None = None,
    rrule: str | None = None,
    timezone: str = "UTC",
    start_at: datetime | None = None,
    end_at: datetime | None = None,
    jitter_seconds: int = 0,
    dst: Mapping[str, object] | None = None,
    anchor: datetime | None = None,
) -> ScheduleSpec:
    """Validate a schedule's timing as the API receives it and return the :class:`ScheduleSpec`.

    ``dst`` is the API's ``{"nonexistent": ..., "ambiguous": ...}`` object. ``anchor`` is the
    schedule's creation time (needed by ``every`` and ``rrule`` when ``start_at`` is not set).

    Raises :class:`ValidationError` whose ``field`` names the culprit: ``cron``, ``every``,
    ``rrule`` (bad syntax, or an expression that never fires), ``timezone``, ``start_at``,
    ``end_at``, ``jitter_seconds``, ``dst.nonexistent``, ``dst.ambiguous``.
    """
    given = [
        name
        for name, value in zip(EXPRESSION_FIELDS, (cron, every, rrule), strict=True)
        if value is not None
    ]
    if not given:
        raise ValidationError(
            "exactly one of cron, every or rrule is required (none given)", field="cron"
        )
    if len(given) > 1:
        raise ValidationError(
            f"exactly one of cron, every or rrule is allowed (got {' and '.join(given)})",
            field=given[1],
        )
    zone_name = _zone(timezone)
    start = _instant(start_at, "start_at")
    end = _instant(end_at, "end_at")
    if start is not None and end is not None and end <= start:
        raise ValidationError("end_at must be later than start_at", field="end_at")
    if isinstance(jitter_seconds, bool) or not isinstance(jitter_seconds, int):
        raise ValidationError("jitter_seconds must be a whole number", field="jitter_seconds")
    if not 0 <= jitter_seconds <= MAX_JITTER_SECONDS:
        raise ValidationError(
            f"jitter_seconds must be between 0 and {MAX_JITTER_SECONDS}", field="jitter_seconds"
        )
    nonexistent, ambiguous = _dst(dst)
    anchor_at = _instant(anchor, "anchor")
    if given[0] != "cron" and start is None and anchor_at is None:
        raise ValidationError(
            f"{given[0]} needs start_at (or the schedule's creation time as its anchor)",
            field="start_at",
        )
    spec = ScheduleSpec(
        cron=cron,
        every=every,
        rrule=rrule,
        timezone=zone_name,
        start_at=start,
        end_at=end,
        jitter_seconds=jitter_seconds,
        dst_nonexistent=nonexistent,
        dst_ambiguous=ambiguous,
        anchor=anchor_at,
    )
    check_fires(spec)
    return spec
