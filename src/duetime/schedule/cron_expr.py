"""Five-field cron expressions: parsing, day matching and the wall times they name.

Grammar (case-insensitive), one field each for minute (0-59), hour (0-23), day of month (1-31),
month (1-12 or JAN-DEC) and day of week (0-7 or SUN-SAT; 0 and 7 are Sunday)::

    field := term ("," term)*
    term  := ("*" | value | value "-" value) ["/" step]
           | "L" | "LW" | <n>"W"                 (day of month: last day, last weekday,
                                                   weekday nearest the n-th)
           | <d>"L" | <d>"#"<n>                  (day of week: last <d> of the month,
                                                   n-th <d> of the month, n in 1-5)

plus the macros ``@yearly`` (``@annually``), ``@monthly``, ``@weekly``, ``@daily`` (``@midnight``)
and ``@hourly``. As in Debian's cron and cronsim: when the day-of-month and day-of-week fields are
both restricted, a day matching either runs; when either field starts with ``*`` (``*``, ``*/2``),
both must match. A job is *fixed-time* (DST knobs apply) when neither its minute nor its hour field
starts with ``*``; otherwise it keeps a real-time rhythm (see :mod:`duetime.schedule.dst`).
"""

from __future__ import annotations

import calendar
import functools
from bisect import bisect_left
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta

from duetime.errors import ValidationError

MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
MONTH_NAMES = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
DAY_NAMES = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
_FIELDS = ("minute", "hour", "day-of-month", "month", "day-of-week")
_BOUNDS = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 7))
# The Gregorian calendar repeats every 400 years, so a day pattern that matches nothing in that
# span never matches: iteration gives up there instead of looping.
HORIZON_YEARS = 400
MAX_LENGTH = 256


def _error(detail: str) -> ValidationError:
    return ValidationError(detail, field="cron")


@dataclass(frozen=True, slots=True)
class CronExpr:
    """A parsed cron expression. Build it with :func:`parse_cron`."""

    source: str
    fields: tuple[str, str, str, str, str]  # after macro expansion, upper-cased
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    dom: frozenset[int]
    dom_last: bool
    dom_last_weekday: bool
    dom_nearest: frozenset[int]  # n of "nW"
    months: frozenset[int]
    dow: frozenset[int]  # 0 = Sunday
    dow_last: frozenset[int]  # d of "dL"
    dow_nth: frozenset[tuple[int, int]]  # (d, n) of "d#n"
    day_and: bool
    fixed_time: bool

    def matches_date(self, day: date) -> bool:
        """Whether ``day`` is a day this expression runs on (month, then day rules)."""
        if day.month not in self.months:
            return False
        if self.day_and:
            return self._match_dom(day) and self._match_dow(day)
        return self._match_dom(day) or self._match_dow(day)

    def _match_dom(self, day: date) -> bool:
        if day.day in self.dom:
            return True
        length = calendar.monthrange(day.year, day.month)[1]
        if self.dom_last and day.day == length:
            return True
        if self.dom_last_weekday and day.day == _nearest_weekday(day.year, day.month, length):
            return True
        return any(_nearest_weekday(day.year, day.month, n) == day.day for n in self.dom_nearest)

    def _match_dow(self, day: date) -> bool:
        weekday = (day.weekday() + 1) % 7
        if weekday in self.dow:
            return True
        # the last such weekday: a week later is in the next month
        if weekday in self.dow_last and day.day + 7 > calendar.monthrange(day.year, day.month)[1]:
            return True
        return (weekday, (day.day + 6) // 7) in self.dow_nth

    def walls_from(self, start: datetime) -> Iterator[datetime]:
        """Matching naive wall times at or after naive ``start``, ascending.

        Stops after :data:`HORIZON_YEARS` without a match, or at the end of year 9999.
        """
        times = _day_times(self.hours, self.minutes)
        day = start.date()
        first = bisect_left(times, start.time())
        last_match_year = day.year
        while day.year <= last_match_year + HORIZON_YEARS:
            if day.month not in self.months:
                next_month = _next_month(day)
                if next_month is None:
                    return
                day, first = next_month, 0
                continue
            if self.matches_date(day):
                last_match_year = day.year
                for t in times[first:]:
                    yield datetime.combine(day, t)
            if day == date.max:
                return
            day, first = day + timedelta(days=1), 0

    def ever_matches(self) -> bool:
        """Whether any day ever matches. A month's matching days depend only on its length and
        the weekday it starts on; the 28 years 2000-2027 show every such month."""
        for year in range(2000, 2028):
            for month in sorted(self.months):
                for dom in range(1, calendar.monthrange(year, month)[1] + 1):
                    if self.matches_date(date(year, month, dom)):
                        return True
        return False


@functools.lru_cache(maxsize=1024)
def _day_times(hours: tuple[int, ...], minutes: tuple[int, ...]) -> tuple[time, ...]:
    # Built once per (hours, minutes): "* * * * *" has 1,440 of them, and the materializer asks
    # for the next fire times of thousands of schedules per round.
    return tuple(time(h, m) for h in hours for m in minutes)


def _next_month(day: date) -> date | None:
    if day.month == 12:
        return None if day.year == 9999 else date(day.year + 1, 1, 1)
    return date(day.year, day.month + 1, 1)


def _nearest_weekday(year: int, month: int, n: int) -> int | None:
    """Day of month of the weekday nearest the ``n``-th, not leaving the month (Quartz ``nW``)."""
    length = calendar.monthrange(year, month)[1]
    if n > length:
        return None
    weekday = calendar.weekday(year, month, n)
    if weekday == 5:  # Saturday: the Friday before, or the Monday after the 1st
        return n - 1 if n > 1 else n + 2
    if weekday == 6:  # Sunday: the Monday after, or the Friday before the last day
        return n + 1 if n < length else n - 2
    return n


def _value(text: str, index: int) -> int:
    names = MONTH_NAMES if index == 3 else DAY_NAMES if index == 4 else None
    if names and text in names:
        return names.index(text) + (1 if index == 3 else 0)
    lo, hi = _BOUNDS[index]
    if not text.isdigit() or not lo <= int(text) <= hi:
        allowed = f"{lo}-{hi}" + (" or a name" if names else "")
        raise _error(f"{_FIELDS[index]} field: {text!r} is not a value in {allowed}")
    return int(text)


def _plain_term(term: str, index: int) -> set[int]:
    lo, hi = _BOUNDS[index]
    base, slash, step_text = term.partition("/")
    if slash:
        if not step_text.isdigit() or int(step_text) == 0:
            raise _error(f"{_FIELDS[index]} field: step {step_text!r} must be a positive integer")
        step = int(step_text)
    else:
        step = 1
    if base == "*":
        start, end = lo, hi
    elif "-" in base:
        left, _, right = base.partition("-")
        start, end = _value(left, index), _value(right, index)
        if end < start:
            raise _error(f"{_FIELDS[index]} field: range {base!r} runs backwards")
    else:
        start = _value(base, index)
        end = hi if slash else start  # "5/15" means 5 to the end, every 15th
    return set(range(start, end + 1, step))


def parse_cron(source: str) -> CronExpr:
    """Parse a 5-field expression or macro; raises :class:`ValidationError` (field ``cron``)."""
    if not isinstance(source, str) or not source.strip():
        raise _error("cron must be a non-empty string of 5 fields, e.g. '0 2 * * *'")
    if len(source) > MAX_LENGTH:
        raise _error(f"cron is longer than {MAX_LENGTH} characters")
    text = source.strip()
    if text.startswith("@"):
        if text.lower() not in MACROS:
            raise _error(f"unknown macro {text!r}; use one of {', '.join(MACROS)}")
        text = MACROS[text.lower()]
    parts = text.upper().split()
    if len(parts) != 5:
        raise _error(
            f"cron needs 5 fields (minute hour day-of-month month day-of-week), got {len(parts)}"
        )
    sets: list[set[int]] = []
    dom_last = dom_last_weekday = False
    nearest: set[int] = set()
    last_dow: set[int] = set()
    nth: set[tuple[int, int]] = set()
    for index, part in enumerate(parts):
        values: set[int] = set()
        for term in part.split(","):
            if not term:
                raise _error(f"{_FIELDS[index]} field: empty list item in {part!r}")
            if index == 2 and term in ("L", "LW"):
                dom_last |= term == "L"
                dom_last_weekday |= term == "LW"
            elif index == 2 and term.endswith("W"):
                n = _value(term[:-1], 2)
                nearest.add(n)
            elif index == 4 and term.endswith("L"):
                if not term[:-1].isdigit():
                    raise _error(f"day-of-week field: {term!r} must be <0-7>L, e.g. 5L")
                last_dow.add(_value(term[:-1], 4) % 7)
            elif index == 4 and "#" in term:
                day_text, _, n_text = term.partition("#")
                if not n_text.isdigit() or not 1 <= int(n_text) <= 5:
                    raise _error(f"day-of-week field: in {term!r} the n of d#n must be 1-5")
                nth.add((_value(day_text, 4) % 7, int(n_text)))
            else:
                values |= _plain_term(term, index)
        sets.append(values)
    minute_f, hour_f, dom_f, _, dow_f = parts
    expr = CronExpr(
        source=source,
        fields=(parts[0], parts[1], parts[2], parts[3], parts[4]),
        minutes=tuple(sorted(sets[0])),
        hours=tuple(sorted(sets[1])),
        dom=frozenset(sets[2]),
        dom_last=dom_last,
        dom_last_weekday=dom_last_weekday,
        dom_nearest=frozenset(nearest),
        months=frozenset(sets[3]),
        dow=frozenset(v % 7 for v in sets[4]),
        dow_last=frozenset(last_dow),
        dow_nth=frozenset(nth),
        day_and=dom_f.startswith("*") or dow_f.startswith("*"),
        fixed_time=not minute_f.startswith("*") and not hour_f.startswith("*"),
    )
    if not expr.ever_matches():
        raise _error(f"cron {source!r} never fires: no date matches its day and month fields")
    return expr
