"""``every``: an ISO 8601 duration repeated from an anchor instant.

Accepted: ``P[nY][nM][nW][nD][T[nH][nM][nS]]`` with whole, non-negative numbers and a positive
total, e.g. ``PT15M``, ``PT1H30M``, ``P1D``, ``P1W``, ``P1M``, ``P1DT12H``. Rejected with a clear
message: negative or zero durations, fractions (so nothing below one second), and anything longer
than 100 years.

Meaning (as in RFC 5545 and ISO 8601, nominal versus exact durations): the date part (years,
months, weeks, days) is calendar time in the schedule's zone, so ``P1D`` from 09:00 runs at 09:00
local every day across DST changes, and ``P1M`` from the 31st runs on the last day of shorter
months (each occurrence is counted from the anchor, so it returns to the 31st when it can). The
time part (hours, minutes, seconds) is exact elapsed time, so ``PT1H`` keeps a real-time rhythm
through DST changes. Occurrence ``k`` (k = 0, 1, 2, ...) is the anchor plus ``k`` times the date
part (a wall time, resolved with the DST knobs) plus ``k`` times the time part.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import datetime, timedelta

from duetime.errors import ValidationError

_DURATION = re.compile(
    r"P(?:(\d{1,9})Y)?(?:(\d{1,9})M)?(?:(\d{1,9})W)?(?:(\d{1,9})D)?"
    r"(?:T(?:(\d{1,9})H)?(?:(\d{1,9})M)?(?:(\d{1,9})S)?)?"
)
MAX_DAYS = 36_525  # 100 years
_EXAMPLES = "e.g. PT15M, PT1H30M, P1D, P1W or P1M"


def _error(detail: str) -> ValidationError:
    return ValidationError(detail, field="every")


@dataclass(frozen=True, slots=True)
class Every:
    """A parsed ``every`` duration. Build it with :func:`parse_every`."""

    source: str
    years: int
    months: int
    weeks: int
    days: int
    exact: timedelta  # hours, minutes and seconds: elapsed time

    @property
    def is_calendar(self) -> bool:
        """Whether the duration has a date part (then occurrences are wall times)."""
        return bool(self.years or self.months or self.weeks or self.days)

    def approx(self) -> timedelta:
        """The average length of one step: for estimating which step comes after an instant."""
        days = self.years * 365.2425 + self.months * 30.436875 + self.weeks * 7 + self.days
        return timedelta(days=days) + self.exact

    def wall(self, anchor: datetime, k: int) -> datetime:
        """Naive wall time of step ``k`` from naive ``anchor`` (date part only).

        Months are counted from the anchor and clamped to the month's length.
        """
        months = anchor.month - 1 + k * (12 * self.years + self.months)
        year = anchor.year + months // 12
        month = months % 12 + 1
        day = min(anchor.day, calendar.monthrange(year, month)[1])
        moved = anchor.replace(year=year, month=month, day=day)
        return moved + timedelta(days=k * (7 * self.weeks + self.days))

    def describe(self) -> str:
        """``Every 15 minutes``, ``Every day``, ``Every 1 hour and 30 minutes`` ..."""
        seconds = int(self.exact.total_seconds())
        hours, rest = divmod(seconds, 3600)
        minutes, secs = divmod(rest, 60)
        units = [
            (self.years, "year"),
            (self.months, "month"),
            (self.weeks, "week"),
            (self.days, "day"),
            (hours, "hour"),
            (minutes, "minute"),
            (secs, "second"),
        ]
        parts = [(n, unit) for n, unit in units if n]
        if len(parts) == 1 and parts[0][0] == 1:
            return f"Every {parts[0][1]}"
        words = [f"{n} {unit}{'s' if n != 1 else ''}" for n, unit in parts]
        text = words[-1] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]
        return f"Every {text}"


def parse_every(source: str) -> Every:
    """Parse an ISO 8601 duration; raises :class:`ValidationError` (field ``every``)."""
    if not isinstance(source, str) or not source.strip():
        raise _error(f"every must be an ISO 8601 duration, {_EXAMPLES}")
    text = source.strip().upper()
    if text.startswith("-"):
        raise _error(f"every {source!r} is negative; it must be a positive duration")
    if "." in text or "," in text:
        raise _error(
            f"every {source!r} has a fraction; use whole numbers of a smaller unit "
            "(e.g. PT90M, not PT1.5H); the smallest step is one second"
        )
    match = _DURATION.fullmatch(text)
    if match is None or text in ("P", "PT") or text.endswith("T"):
        raise _error(f"every {source!r} is not an ISO 8601 duration, {_EXAMPLES}")
    years, months, weeks, days, hours, minutes, seconds = (int(g or 0) for g in match.groups())
    total_days = (
        years * 365.25
        + months * 30.4375
        + weeks * 7
        + days
        + (hours * 3600 + minutes * 60 + seconds) / 86_400
    )
    if total_days == 0:
        raise _error(f"every {source!r} is zero; it must be a positive duration")
    if total_days > MAX_DAYS:
        raise _error(f"every {source!r} is longer than 100 years")
    exact = timedelta(hours=hours, minutes=minutes, seconds=seconds)
    return Every(source, years, months, weeks, days, exact)
