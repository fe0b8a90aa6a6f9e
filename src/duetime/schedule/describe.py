"""Human-readable descriptions of schedule expressions (a schedule's ``description``)."""

from __future__ import annotations

import re
from datetime import date, datetime

from cronsim import CronSim
from cronsim.explain import ordinal
from dateutil.rrule import (  # type: ignore[import-untyped,unused-ignore]
    DAILY,
    HOURLY,
    MINUTELY,
    MONTHLY,
    SECONDLY,
    WEEKLY,
    YEARLY,
)

from duetime.schedule.cron_expr import CronExpr
from duetime.schedule.dst import fmt_wall, local_wall
from duetime.schedule.occurrences import compile_spec
from duetime.schedule.rrule_expr import RRuleExpr
from duetime.schedule.spec import ScheduleSpec

_MONTHS = [date(2000, month, 1).strftime("%B") for month in range(1, 13)]
_DAYS = {
    "MO": "Monday",
    "TU": "Tuesday",
    "WE": "Wednesday",
    "TH": "Thursday",
    "FR": "Friday",
    "SA": "Saturday",
    "SU": "Sunday",
}
_REFERENCE = datetime(2000, 1, 1)  # explain() needs a start; any will do
_NTH = {1: "first", 2: "second", 3: "third", 4: "fourth", 5: "fifth"}
_UNITS = {
    YEARLY: ("Yearly", "year"),
    MONTHLY: ("Monthly", "month"),
    WEEKLY: ("Weekly", "week"),
    DAILY: ("Daily", "day"),
    HOURLY: ("Hourly", "hour"),
    MINUTELY: ("Every minute", "minute"),
    SECONDLY: ("Every second", "second"),
}


def describe(spec: ScheduleSpec) -> str:
    """A sentence for people: ``At 02:00 every day (America/New_York)``, ``Every 15 minutes``,
    ``Monthly on the last Friday at 09:00 (Europe/London)``. Wall-clock descriptions name the
    zone; pure rhythms (every N minutes, an exact ``every``) do not need to."""
    c = compile_spec(spec)
    zone = f" ({spec.timezone})"
    if c.cron is not None:
        text, zoned = _describe_cron(c.cron)
        return text + zone if zoned else text
    if c.every is not None:
        every = c.every
        text = every.describe()
        anchor = spec.start_at or spec.anchor
        if not every.is_calendar or anchor is None:
            return text if not every.is_calendar else text + zone
        start = local_wall(anchor, spec.zone)
        if every.exact:  # the time of day drifts: say where the count starts
            return f"{text} from {start:%Y-%m-%d} {fmt_wall(start)}{zone}"
        text += f" at {fmt_wall(start)}"
        if (every.years, every.months, every.weeks, every.days) != (0, 0, 0, 1):
            text += f" from {start:%Y-%m-%d}"
        return text + zone
    assert c.rrule is not None
    text = _describe_rrule(c.rrule)
    return text if c.rrule.real_time else text + zone


def _ordinals(text: str) -> str:
    # cronsim writes "31th" and "22th".
    def fix(match: re.Match[str]) -> str:
        n = int(match.group(1))
        suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
        return f"{n}{suffix}"

    return re.sub(r"\b(\d+)th\b", fix, text)


def _describe_cron(expr: CronExpr) -> tuple[str, bool]:
    minute, hour, dom, month, dow = expr.fields
    every_day = dom == "*" and month == "*" and dow == "*"
    if every_day and hour == "*":
        if minute == "*":
            return "Every minute", False
        if minute.startswith("*/") and minute[2:].isdigit():
            return f"Every {minute[2:]} minutes", False
        if minute == "0":
            return "Every hour", False
        if minute.isdigit():
            return f"Every hour at minute {minute}", False
    if every_day and minute == "0" and hour.startswith("*/") and hour[2:].isdigit():
        return f"Every {hour[2:]} hours", True
    nearest = sorted(expr.dom_nearest)
    plain_dom = ",".join(
        term[:-1] if term[:-1].isdigit() and term.endswith("W") else term for term in dom.split(",")
    )
    try:
        text = CronSim(" ".join((minute, hour, plain_dom, month, dow)), _REFERENCE).explain()
    except Exception:  # a description is best effort; never fail a request over it
        text = f"Cron {' '.join(expr.fields)}"
    if len(nearest) == 1 and "," not in dom:
        # cronsim words a day as "the 15th day" (or "January 15" in a single month)
        (n,) = nearest
        day = f"the {ordinal(n)} day"
        month_day = re.compile(rf"\b({'|'.join(_MONTHS)}) {n}\b")
        if day in text:
            text = text.replace(day, f"the weekday nearest {day}")
        elif month_day.search(text):
            text = month_day.sub(lambda m: f"the weekday nearest {m.group(0)}", text)
    if nearest and "weekday nearest" not in text:
        text += " (W days move to the nearest weekday)"
    return _ordinals(text), True


def _describe_rrule(expr: RRuleExpr) -> str:
    parts = dict(expr.parts)
    freq = expr.freq
    interval = int(parts.get("INTERVAL", "1"))
    single, unit = _UNITS[freq]
    text = single if interval == 1 else f"Every {interval} {unit}s"
    if "BYMONTH" in parts:
        months = [_MONTHS[int(m) - 1] for m in parts["BYMONTH"].split(",")]
        text += " in " + _join(months)
    days = []
    for item in parts.get("BYDAY", "").split(","):
        if not item:
            continue
        match = re.fullmatch(r"([+-]?\d+)?(MO|TU|WE|TH|FR|SA|SU)", item)
        if match is None:
            days.append(item)
            continue
        n, day = match.groups()
        if n is None:
            days.append(_DAYS[day])
        elif int(n) == -1:
            days.append(f"the last {_DAYS[day]}")
        elif int(n) < 0:
            days.append(f"the {_nth(-int(n))}-to-last {_DAYS[day]}")
        else:
            days.append(f"the {_nth(int(n))} {_DAYS[day]}")
    monthdays = []
    for item in parts.get("BYMONTHDAY", "").split(","):
        if item:
            n = int(item)
            monthdays.append("the last day" if n == -1 else f"day {n}")
    if monthdays:
        text += " on " + _join(monthdays)
    if days:
        text += (" or " if monthdays else " on ") + _join(days)
    text += _implied_day(expr, freq, parts)
    for key in ("BYYEARDAY", "BYWEEKNO", "BYSETPOS"):
        if key in parts:
            text += f" ({key}={parts[key]})"
    text += _rrule_times(expr, freq, parts)
    if "COUNT" in parts:
        text += f", {parts['COUNT']} times"
    if expr.until is not None:
        text += f", until {expr.until:%Y-%m-%d %H:%M} UTC"
    return text


def _implied_day(expr: RRuleExpr, freq: int, parts: dict[str, str]) -> str:
    # Without day parts, RFC 5545 takes the day from DTSTART.
    if any(key in parts for key in ("BYDAY", "BYMONTHDAY", "BYYEARDAY", "BYWEEKNO")):
        return ""
    start = expr.dtstart
    if freq == WEEKLY:
        return f" on {start:%A}"
    if freq == MONTHLY:
        return f" on day {start.day}"
    if freq == YEARLY and "BYMONTH" not in parts:
        return f" on {start:%B} {start.day}"
    if freq == YEARLY:
        return f" on day {start.day}"
    return ""


def _rrule_times(expr: RRuleExpr, freq: int, parts: dict[str, str]) -> str:
    def values(key: str, default: int) -> list[int]:
        return [int(v) for v in parts[key].split(",")] if key in parts else [default]

    start = expr.dtstart
    if freq in (MINUTELY, SECONDLY):
        return ""
    minutes = values("BYMINUTE", start.minute)
    seconds = values("BYSECOND", start.second)
    if freq == HOURLY and "BYHOUR" not in parts:
        marks = [f"{m}" + (f":{s:02d}" if s else "") for m in minutes for s in seconds]
        return "" if marks == ["0"] else " at minute " + _join(marks)
    hours = values("BYHOUR", start.hour)
    times = [
        f"{h:02d}:{m:02d}" + (f":{s:02d}" if s else "")
        for h in hours
        for m in minutes
        for s in seconds
    ]
    if len(times) > 6:
        return f", {len(times)} times a day from {times[0]} to {times[-1]}"
    return " at " + _join(times)


def _nth(n: int) -> str:
    return _NTH.get(n, _ordinals(f"{n}th"))


def _join(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]
