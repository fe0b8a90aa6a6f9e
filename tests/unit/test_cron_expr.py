"""Cron expressions: syntax, day rules (L, W, #, DOM-or-DOW), macros and the errors they raise."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest

from duetime.errors import ValidationError
from duetime.schedule import occurrences_after, occurrences_between, parse_spec
from duetime.schedule.cron_expr import parse_cron


def days(expr: str, start: date, count: int) -> list[date]:
    spec = parse_spec(cron=expr)
    after = datetime.combine(start, datetime.min.time(), UTC) - timedelta(seconds=1)
    return [o.nominal.date() for o in occurrences_after(spec, after, count)]


def test_fixed_time_every_day_in_utc() -> None:
    spec = parse_spec(cron="30 2 * * *")
    got = occurrences_after(spec, datetime(2026, 1, 1, 2, 30, tzinfo=UTC), 3)
    assert [o.nominal for o in got] == [datetime(2026, 1, d, 2, 30, tzinfo=UTC) for d in (2, 3, 4)]
    assert all(o.note is None and o.kind is None for o in got)


def test_lists_ranges_steps_and_names() -> None:
    spec = parse_spec(cron="10-50/20 9,17 * JAN-FEB mon-FRI")
    got = occurrences_between(spec, datetime(2026, 1, 1, tzinfo=UTC), None, 7)
    assert [o.nominal for o in got] == [
        datetime(2026, 1, 1, 9, 10, tzinfo=UTC),
        datetime(2026, 1, 1, 9, 30, tzinfo=UTC),
        datetime(2026, 1, 1, 9, 50, tzinfo=UTC),
        datetime(2026, 1, 1, 17, 10, tzinfo=UTC),
        datetime(2026, 1, 1, 17, 30, tzinfo=UTC),
        datetime(2026, 1, 1, 17, 50, tzinfo=UTC),
        datetime(2026, 1, 2, 9, 10, tzinfo=UTC),  # Friday; then the weekend is skipped
    ]
    assert days("0 0 * * SAT,SUN", date(2026, 1, 1), 3) == [
        date(2026, 1, 3),
        date(2026, 1, 4),
        date(2026, 1, 10),
    ]
    # a single value with a step runs to the end of the field; 7 is Sunday too
    assert parse_cron("5/20 * * * *").minutes == (5, 25, 45)
    assert parse_cron("0 0 * * 5-7").dow == {5, 6, 0}


def test_last_day_of_month_and_leap_years() -> None:
    assert days("0 9 L * *", date(2026, 1, 1), 4) == [
        date(2026, 1, 31),
        date(2026, 2, 28),
        date(2026, 3, 31),
        date(2026, 4, 30),
    ]
    assert days("0 9 L 2 *", date(2027, 3, 1), 2) == [date(2028, 2, 29), date(2029, 2, 28)]


def test_last_weekday_of_month() -> None:
    # Jan 31 2026 is a Saturday, Feb 28 a Saturday, May 31 a Sunday
    assert days("0 9 LW * *", date(2026, 1, 1), 5) == [
        date(2026, 1, 30),
        date(2026, 2, 27),
        date(2026, 3, 31),
        date(2026, 4, 30),
        date(2026, 5, 29),
    ]


def test_nearest_weekday() -> None:
    # Feb 15 and Mar 15 2026 are Sundays (-> Monday), Aug 15 a Saturday (-> Friday)
    got = days("0 9 15W * *", date(2026, 1, 1), 8)
    assert got == [
        date(2026, 1, 15),
        date(2026, 2, 16),
        date(2026, 3, 16),
        date(2026, 4, 15),
        date(2026, 5, 15),
        date(2026, 6, 15),
        date(2026, 7, 15),
        date(2026, 8, 14),
    ]
    # Feb 1 2026 is a Sunday (-> Monday 2nd); Aug 1 a Saturday: Monday 3rd, never July 31st
    assert date(2026, 2, 2) in days("0 9 1W * *", date(2026, 1, 1), 12)
    assert date(2026, 8, 3) in days("0 9 1W * *", date(2026, 1, 1), 12)
    # 31W stays in its month (May 31 2026 is a Sunday -> Friday 29th) and, like plain 31,
    # skips months without a 31st
    assert days("0 9 31W * *", date(2026, 1, 1), 4) == [
        date(2026, 1, 30),
        date(2026, 3, 31),
        date(2026, 5, 29),
        date(2026, 7, 31),
    ]


def test_nth_and_last_weekday_of_month() -> None:
    assert days("0 9 * * MON#2", date(2026, 1, 1), 3) == [
        date(2026, 1, 12),
        date(2026, 2, 9),
        date(2026, 3, 9),
    ]
    assert days("0 9 * * 1#5", date(2026, 1, 1), 4) == [
        date(2026, 3, 30),
        date(2026, 6, 29),
        date(2026, 8, 31),
        date(2026, 11, 30),
    ]
    assert days("0 9 * * 5L", date(2026, 1, 1), 3) == [
        date(2026, 1, 30),
        date(2026, 2, 27),
        date(2026, 3, 27),
    ]


def test_day_of_month_or_day_of_week_when_both_are_restricted() -> None:
    got = days("0 9 13 * FRI", date(2026, 1, 1), 5)
    assert got == [
        date(2026, 1, 2),
        date(2026, 1, 9),
        date(2026, 1, 13),  # a Tuesday: matched by day of month
        date(2026, 1, 16),
        date(2026, 1, 23),
    ]


def test_day_of_month_and_day_of_week_when_one_starts_with_a_star() -> None:
    # Debian (Vixie) cron and cronsim: "*/10" starts with "*", so both must match
    got = days("0 0 */10 * MON", date(2026, 1, 1), 4)
    assert all(d.day in (1, 11, 21, 31) and d.weekday() == 0 for d in got)
    assert got[0] == date(2026, 5, 11)
    expr = parse_cron("0 0 */10 * MON")
    assert expr.day_and
    assert not parse_cron("0 0 1-31 * MON").day_and


@pytest.mark.parametrize(
    ("macro", "expanded"),
    [
        ("@yearly", "0 0 1 1 *"),
        ("@annually", "0 0 1 1 *"),
        ("@monthly", "0 0 1 * *"),
        ("@weekly", "0 0 * * 0"),
        ("@daily", "0 0 * * *"),
        ("@midnight", "0 0 * * *"),
        ("@HOURLY", "0 * * * *"),
    ],
)
def test_macros_mean_their_five_fields(macro: str, expanded: str) -> None:
    after = datetime(2026, 5, 17, 13, 45, tzinfo=UTC)
    for zone in ("UTC", "America/New_York"):
        a = occurrences_after(parse_spec(cron=macro, timezone=zone), after, 5)
        b = occurrences_after(parse_spec(cron=expanded, timezone=zone), after, 5)
        assert a == b and len(a) == 5


def test_fixed_time_versus_real_time_follows_debian() -> None:
    assert parse_cron("30 2 * * *").fixed_time
    assert parse_cron("0 1-23/2 * * *").fixed_time  # no leading "*": fixed, as in Debian
    assert not parse_cron("0 * * * *").fixed_time
    assert not parse_cron("*/15 * * * *").fixed_time
    assert not parse_cron("0 */2 * * *").fixed_time
    assert not parse_cron("*/5 9 * * *").fixed_time
    assert not parse_cron("@hourly").fixed_time
    assert parse_cron("@daily").fixed_time


@pytest.mark.parametrize(
    ("expr", "words"),
    [
        ("", "5 fields"),
        ("* * * *", "5 fields"),
        ("0 0 0 * * *", "5 fields"),
        ("60 * * * *", "minute"),
        ("* 24 * * *", "hour"),
        ("* * 0 * *", "day-of-month"),
        ("* * 32 * *", "day-of-month"),
        ("* * * 13 *", "month"),
        ("* * * * 8", "day-of-week"),
        ("* * * FOO *", "month"),
        ("5-1 * * * *", "backwards"),
        ("*/0 * * * *", "step"),
        ("*/x * * * *", "step"),
        ("1,,2 * * * *", "empty"),
        ("0 0 ? * *", "day-of-month"),
        ("0 0 0W * *", "day-of-month"),
        ("0 0 * * L", "5L"),
        ("0 0 * * 1#6", "1-5"),
        ("0 0 * * 1#0", "1-5"),
        ("@reboot", "macro"),
        ("0 0 30 2 *", "never fires"),
        ("0 0 31 4,6,9,11 *", "never fires"),
        ("0 0 LW * */6", "never fires"),  # the last weekday is never a Saturday or Sunday
        ("0 0 */20 * MON#2", "never fires"),  # days 1 and 21 are never a second Monday
    ],
)
def test_bad_expressions_name_the_cron_field(expr: str, words: str) -> None:
    with pytest.raises(ValidationError) as info:
        parse_spec(cron=expr)
    assert info.value.field == "cron"
    assert words in info.value.detail


def test_rare_but_possible_days_are_accepted_and_found() -> None:
    # February 29th on a Monday: every 28 years or so (both fields restricted: OR, so use AND)
    got = days("0 0 29 2 */7", date(2026, 1, 1), 2)  # "*/7" = Sunday; AND
    assert got == [date(2032, 2, 29), date(2060, 2, 29)]
    assert days("0 0 * 2 MON#5", date(2026, 1, 1), 1) == [date(2044, 2, 29)]


def test_iteration_ends_at_year_9999() -> None:
    spec = parse_spec(cron="@yearly")
    got = occurrences_after(spec, datetime(9997, 6, 1, tzinfo=UTC), 10)
    assert [o.nominal.year for o in got] == [9998, 9999]
