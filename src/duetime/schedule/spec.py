"""The schedule expression and its options (SPEC §3 "Schedules"): a plain value."""

from __future__ import annotations

from dataclasses import fields
from datetime import datetime
from zoneinfo import ZoneInfo

from duetime.errors import ValidationError
from duetime.types import ScheduleTiming, value_type

EXPRESSION_FIELDS = ("cron", "every", "rrule")

TIMING_FIELDS = tuple(f.name for f in fields(ScheduleTiming))
"""The names of the timing fields, in declaration order."""


@value_type
class ScheduleSpec(ScheduleTiming):
    """A schedule's timing (:class:`~duetime.types.ScheduleTiming`'s fields) plus the anchor it
    counts from: what every fire-time function takes.

    Build it with :func:`parse_spec`, which validates everything (or from a stored schedule's
    settings with :func:`duetime.schedule.config.spec_of`). Constructing it directly skips
    the checks; the expression is still parsed (and may raise :class:`ValidationError`) the
    first time it is used. Instants are timezone-aware UTC.

    ``anchor`` is the instant an ``every`` counts from, and the day an ``rrule`` starts on, when
    ``start_at`` is not set: pass the schedule's creation time. For cron it only serves
    :func:`parse_spec`'s check that something fires between it and ``end_at``.
    """

    anchor: datetime | None = None

    @property
    def zone(self) -> ZoneInfo:
        """The schedule's IANA zone (render upcoming times with ``instant.astimezone(zone)``)."""
        return ZoneInfo(self.timezone)

    @property
    def kind(self) -> str:
        """``"cron"``, ``"every"`` or ``"rrule"``: which expression is set."""
        for name in EXPRESSION_FIELDS:
            if getattr(self, name) is not None:
                return name
        raise ValidationError("exactly one of cron, every or rrule is required", field="cron")

    @property
    def expression(self) -> str:
        """The expression text as given."""
        value = getattr(self, self.kind)
        assert isinstance(value, str)
        return value
