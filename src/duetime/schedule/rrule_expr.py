"""``rrule``: one RFC 5545 recurrence rule, expanded by python-dateutil in local wall time.

Accepted: a single ``RRULE`` value (optionally prefixed ``RRULE:``) with the parts FREQ, INTERVAL,
COUNT (at most 10,000), UNTIL, BYMONTH, BYMONTHDAY, BYYEARDAY, BYWEEKNO, BYDAY, BYHOUR, BYMINUTE,
BYSECOND, BYSETPOS and WKST. DTSTART, RDATE, EXDATE and EXRULE are refused: the schedule's
``start_at`` is the rule's DTSTART (read as a wall time in the schedule's zone); without one the
rule starts at local midnight of the anchor's day (the schedule's creation), so an omitted BYHOUR
means 00:00 and an omitted BYDAY of a weekly rule means the creation weekday. UNTIL with ``Z`` is
a UTC instant; without it, a wall time (a bare date includes that whole day).

BYHOUR and friends are wall times. Daily and coarser rules are fixed-time (the ``dst`` knobs
apply); FREQ=MINUTELY or SECONDLY, and FREQ=HOURLY without BYHOUR, keep a real-time rhythm like a
cron job with a wildcard hour (see :mod:`duetime.schedule.dst`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

# python-dateutil ships no type hints; the stubs package may or may not be installed.
from dateutil.rrule import (  # type: ignore[import-untyped,unused-ignore]
    DAILY,
    FREQNAMES,
    HOURLY,
    MINUTELY,
    SECONDLY,
    WEEKLY,
    rrule,
    rrulestr,
)

from duetime.errors import ValidationError
from duetime.schedule.dst import to_instant

ALLOWED = (
    *("FREQ", "INTERVAL", "COUNT", "UNTIL", "BYMONTH", "BYMONTHDAY", "BYYEARDAY", "BYWEEKNO"),
    *("BYDAY", "BYHOUR", "BYMINUTE", "BYSECOND", "BYSETPOS", "WKST"),
)
MAX_COUNT = 10_000
MAX_INTERVAL = 10_000
MAX_LENGTH = 1024
_UNTIL = re.compile(r"(\d{4})(\d{2})(\d{2})(?:T(\d{2})(\d{2})(\d{2})(Z?))?")
# Periods of each frequency in 400 Gregorian years, the span after which the calendar repeats.
_PERIODS_PER_400Y = (400, 4800, 20_871, 146_097, 146_097 * 24, 146_097 * 1440, 146_097 * 86_400)
_DATEUTIL_ERRORS = (TypeError, ValueError, KeyError, IndexError, OverflowError)
"""What dateutil raises from inside an expansion it cannot do (it has no error of its own)."""
_STEP = {
    WEEKLY: timedelta(weeks=1),
    DAILY: timedelta(days=1),
    HOURLY: timedelta(hours=1),
    MINUTELY: timedelta(minutes=1),
    SECONDLY: timedelta(seconds=1),
}


def _error(detail: str) -> ValidationError:
    return ValidationError(detail, field="rrule")


@dataclass(frozen=True)
class RRuleExpr:
    """A parsed rule bound to its DTSTART. Build it with :func:`parse_rrule`."""

    source: str
    parts: tuple[tuple[str, str], ...]  # normalized KEY=VALUE pairs, UNTIL included
    dtstart: datetime  # naive wall time
    until: datetime | None  # UTC instant; occurrences after it are dropped
    real_time: bool
    freq: int  # dateutil's YEARLY (0) ... SECONDLY (6)
    interval: int
    count: int | None
    rule: rrule = field(compare=False, repr=False)

    def walls_from(self, start: datetime) -> Iterator[datetime]:
        """The rule's naive wall times at or after naive ``start``, ascending."""
        rule = self.rule
        unit = _STEP.get(self.freq)
        if unit is not None and self.count is None:
            # dateutil always expands from DTSTART; jump it forward by whole periods (same
            # alignment, same defaults) so a years-old schedule does not replay its history.
            # (COUNT counts from DTSTART, and so does a monthly or yearly rule's day of month.)
            step = unit * self.interval
            periods = (start - self.dtstart) // step - 1
            if periods > 0:
                rule = rule.replace(dtstart=self.dtstart + periods * step)
        try:
            yield from rule.xafter(start, inc=True)
        except _DATEUTIL_ERRORS as exc:  # dateutil gives up on some valid-looking rules
            raise _error(f"rrule {self.source!r} cannot be expanded: {exc}") from None


def _parse_until(value: str, zone: ZoneInfo) -> datetime:
    match = _UNTIL.fullmatch(value)
    if match is None:
        raise _error(f"UNTIL={value} is not a date (YYYYMMDD) or date-time (YYYYMMDDTHHMMSS[Z])")
    y, mo, d, h, mi, s, z = match.groups()
    try:
        if h is None:  # a bare date: the whole of that local day
            wall = datetime.combine(datetime(int(y), int(mo), int(d)).date(), time(23, 59, 59))
            return to_instant(wall, zone)
        moment = datetime(int(y), int(mo), int(d), int(h), int(mi), int(s))
        return moment.replace(tzinfo=UTC) if z else to_instant(moment, zone)
    except (ValueError, OverflowError) as exc:  # Overflow: 9999-12-31 west of UTC
        raise _error(f"UNTIL={value} is not a valid date: {exc}") from None


def _split(source: str) -> list[tuple[str, str]]:
    text = source.strip()
    if "\n" in text or "\r" in text:
        raise _error("rrule must be a single RRULE line; use start_at instead of DTSTART")
    if text.upper().startswith("RRULE:"):
        text = text[6:]
    pairs: list[tuple[str, str]] = []
    for item in text.split(";"):
        key, eq, value = item.partition("=")
        key = key.strip().upper()
        if not eq or not value.strip():
            raise _error(f"rrule part {item!r} is not KEY=VALUE")
        if key in ("DTSTART", "RDATE", "EXDATE", "EXRULE"):
            raise _error(f"{key} is not accepted in rrule; set the schedule's start_at instead")
        if key not in ALLOWED:
            raise _error(f"rrule part {key} is not supported; use {', '.join(ALLOWED)}")
        if key in (k for k, _ in pairs):
            raise _error(f"rrule part {key} appears twice")
        pairs.append((key, value.strip().upper()))
    return pairs


def parse_rrule(source: str, zone: ZoneInfo, dtstart: datetime) -> RRuleExpr:
    """Parse ``source`` with naive ``dtstart`` (wall time in ``zone``).

    Raises :class:`ValidationError` (field ``rrule``) for bad syntax and for rules that can
    never produce an occurrence (e.g. ``FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30``).
    """
    if not isinstance(source, str) or not source.strip():
        raise _error("rrule must be an RFC 5545 RRULE, e.g. FREQ=MONTHLY;BYDAY=-1FR;BYHOUR=9")
    if len(source) > MAX_LENGTH:
        raise _error(f"rrule is longer than {MAX_LENGTH} characters")
    pairs = _split(source)
    values = dict(pairs)
    if values.get("FREQ") not in FREQNAMES:
        raise _error(f"rrule needs FREQ, one of {', '.join(FREQNAMES)}")
    freq = FREQNAMES.index(values["FREQ"])
    for key, limit in (("COUNT", MAX_COUNT), ("INTERVAL", MAX_INTERVAL)):
        if key in values and not (values[key].isdigit() and 1 <= int(values[key]) <= limit):
            raise _error(f"{key}={values[key]} must be a whole number from 1 to {limit}")
    if "COUNT" in values and "UNTIL" in values:
        raise _error("rrule may not have both COUNT and UNTIL")
    until = _parse_until(values["UNTIL"], zone) if "UNTIL" in values else None
    body = ";".join(f"{k}={v}" for k, v in pairs if k != "UNTIL")
    dtstart = dtstart.replace(microsecond=0, tzinfo=None)
    try:
        rule = rrulestr(body, dtstart=dtstart, cache=False)
    except (ValueError, TypeError, KeyError, IndexError) as exc:
        raise _error(f"rrule {source!r} is not valid: {exc}") from None
    if not isinstance(rule, rrule):  # pragma: no cover - rrulestr returns a set only if asked
        raise _error("rrule must be a single rule")
    interval = int(values.get("INTERVAL", "1"))
    try:
        fires = _dates_can_match(values, freq, dtstart) and _can_fire(rule, dtstart, freq, interval)
    except _DATEUTIL_ERRORS as exc:
        # e.g. FREQ=HOURLY;INTERVAL=5;BYHOUR=3 from an hour the interval never brings to 3.
        raise _error(f"rrule {source!r} cannot be expanded: {exc}") from None
    if not fires:
        raise _error(f"rrule {source!r} never fires: no date matches all of its parts")
    real_time = freq in (MINUTELY, SECONDLY) or (freq == HOURLY and "BYHOUR" not in values)
    count = int(values["COUNT"]) if "COUNT" in values else None
    return RRuleExpr(source, tuple(pairs), dtstart, until, real_time, freq, interval, count, rule)


def _dates_can_match(values: dict[str, str], freq: int, dtstart: datetime) -> bool:
    """A quick necessary condition: some date passes the rule's day filters at all.

    For weekly and finer rules these filters do not depend on the period, so a yearly rule with
    the same filters, moved to the calendar's last 400-year cycle, answers in a few hundred
    periods; this catches "February 30" at once instead of after a long daily scan.
    """
    keys = ("BYMONTH", "BYMONTHDAY", "BYYEARDAY", "BYWEEKNO", "BYDAY")
    filters = [f"{key}={values[key]}" for key in keys if key in values]
    if freq < WEEKLY or not filters or any(c.isdigit() for c in values.get("BYDAY", "")):
        return True
    start = dtstart.replace(year=dtstart.year + (9599 - dtstart.year) // 400 * 400)
    probe = rrulestr(";".join(["FREQ=YEARLY", *filters]), dtstart=start, cache=False)
    return probe.after(start, inc=True) is not None


def _can_fire(rule: rrule, dtstart: datetime, freq: int, interval: int) -> bool:
    """Whether the rule (ignoring COUNT) ever yields, decided in bounded time.

    dateutil scans period after period until year 9999 when nothing matches, which takes seconds
    for a daily rule. The rule's pattern repeats every ``400 * m`` years (the calendar's 400-year
    cycle times the smallest ``m`` that also realigns INTERVAL), so the rule moved by whole
    repeats to just before year 9999 yields if and only if the real one does.
    """
    span = 400 * (interval // math.gcd(interval, _PERIODS_PER_400Y[freq]))
    if span > 5000:
        # The exact repeat is too long to fit before year 9999; test the weaker condition
        # "some period yields" (INTERVAL=1), which already rules out e.g. February 30.
        span, rule = 400, rule.replace(interval=1)
    year = dtstart.year + ((10_000 - span - dtstart.year) // span) * span
    probe_start = dtstart.replace(year=year)
    probe = rule.replace(dtstart=probe_start, count=None, until=None)
    return probe.after(probe_start, inc=True) is not None
