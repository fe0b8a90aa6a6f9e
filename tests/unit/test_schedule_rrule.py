"""``rrule``: RFC 5545 rules in local wall time, DST rules, bounds and errors."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from dateutil.rrule import rrulestr

from duetime.errors import ValidationError
from duetime.schedule import occurrences_after, occurrences_between, parse_spec
from duetime.schedule.budget import DEFAULT_BUDGET, Budget

LONDON = ZoneInfo("Europe/London")
NY = ZoneInfo("America/New_York")
CREATED = datetime(2026, 1, 5, 10, 7, 33, tzinfo=UTC)


def wall(instants: list[datetime], zone: ZoneInfo) -> list[str]:
    return [t.astimezone(zone).strftime("%Y-%m-%d %H:%M%z") for t in instants]


def test_last_friday_of_the_month_at_nine_local() -> None:
    spec = parse_spec(
        rrule="FREQ=MONTHLY;BYDAY=-1FR;BYHOUR=9", timezone="Europe/London", anchor=CREATED
    )
    got = occurrences_after(spec, CREATED, 4)
    assert wall([o.nominal for o in got], LONDON) == [
        "2026-01-30 09:00+0000",
        "2026-02-27 09:00+0000",
        "2026-03-27 09:00+0000",
        "2026-04-24 09:00+0100",  # British summer time: still 09:00 on the wall
    ]


def test_monthly_on_the_fifteenth_takes_its_time_from_start_at() -> None:
    start = datetime(2026, 1, 15, 9, 30, tzinfo=NY)
    spec = parse_spec(
        rrule="FREQ=MONTHLY;BYMONTHDAY=15", timezone="America/New_York", start_at=start
    )
    got = occurrences_after(spec, start - timedelta(seconds=1), 4)
    assert wall([o.nominal for o in got], NY) == [
        "2026-01-15 09:30-0500",
        "2026-02-15 09:30-0500",
        "2026-03-15 09:30-0400",
        "2026-04-15 09:30-0400",
    ]


def test_without_start_at_the_rule_starts_at_local_midnight_of_creation() -> None:
    spec = parse_spec(
        rrule="FREQ=MONTHLY;BYMONTHDAY=15", timezone="America/New_York", anchor=CREATED
    )
    got = occurrences_after(spec, CREATED, 2)
    assert wall([o.nominal for o in got], NY) == ["2026-01-15 00:00-0500", "2026-02-15 00:00-0500"]
    weekly = parse_spec(rrule="RRULE:FREQ=WEEKLY", timezone="UTC", anchor=CREATED)
    got = occurrences_after(weekly, CREATED, 2)  # creation was a Monday
    assert [o.nominal for o in got] == [
        datetime(2026, 1, 12, tzinfo=UTC),
        datetime(2026, 1, 19, tzinfo=UTC),
    ]


def test_daily_rules_follow_the_fixed_time_dst_rules() -> None:
    spec = parse_spec(
        rrule="FREQ=DAILY;BYHOUR=2;BYMINUTE=30", timezone="America/New_York", anchor=CREATED
    )
    got = occurrences_between(spec, datetime(2026, 3, 7, 12, tzinfo=UTC), None, 2)
    assert wall([o.nominal for o in got], NY) == ["2026-03-08 03:00-0400", "2026-03-09 02:30-0400"]
    assert got[0].kind == "dst_shifted"
    skip = parse_spec(
        rrule="FREQ=DAILY;BYHOUR=2;BYMINUTE=30",
        timezone="America/New_York",
        anchor=CREATED,
        dst={"nonexistent": "skip"},
    )
    got = occurrences_between(skip, datetime(2026, 3, 7, 12, tzinfo=UTC), None, 1)
    assert wall([o.nominal for o in got], NY) == ["2026-03-09 02:30-0400"]
    both = parse_spec(
        rrule="FREQ=DAILY;BYHOUR=1;BYMINUTE=30",
        timezone="America/New_York",
        anchor=CREATED,
        dst={"ambiguous": "both"},
    )
    got = occurrences_between(both, datetime(2026, 11, 1, 4, tzinfo=UTC), None, 3)
    assert wall([o.nominal for o in got], NY) == [
        "2026-11-01 01:30-0400",
        "2026-11-01 01:30-0500",
        "2026-11-02 01:30-0500",
    ]
    assert [o.kind for o in got] == [None, "dst_repeat", None]


def test_sub_daily_rules_keep_a_real_time_rhythm() -> None:
    spec = parse_spec(rrule="FREQ=HOURLY", timezone="America/New_York", anchor=CREATED)
    got = occurrences_between(spec, datetime(2026, 11, 1, 3, 30, tzinfo=UTC), None, 4)
    assert [o.nominal for o in got] == [
        datetime(2026, 11, 1, h, tzinfo=UTC) for h in (4, 5, 6, 7)
    ]  # 00:00 EDT, 01:00 EDT, 01:00 EST, 02:00 EST
    quarter = parse_spec(
        rrule="FREQ=MINUTELY;INTERVAL=15", timezone="Europe/London", anchor=CREATED
    )
    got = occurrences_between(quarter, datetime(2026, 3, 28, 23, tzinfo=UTC), None, 12)
    assert {b.nominal - a.nominal for a, b in itertools.pairwise(got)} == {timedelta(minutes=15)}


def test_count_and_until_end_the_rule() -> None:
    start = datetime(2026, 1, 1, 9, tzinfo=UTC)
    counted = parse_spec(rrule="FREQ=DAILY;COUNT=3", start_at=start)
    assert len(occurrences_after(counted, start - timedelta(days=1), 10)) == 3
    assert occurrences_after(counted, start + timedelta(days=2), 10) == []
    until = parse_spec(rrule="FREQ=DAILY;UNTIL=20260103T090000Z", start_at=start)
    got = occurrences_after(until, start - timedelta(days=1), 10)
    assert [o.nominal.day for o in got] == [1, 2, 3]
    local_date = parse_spec(
        rrule="FREQ=DAILY;UNTIL=20260103", timezone="America/New_York", start_at=start
    )
    assert [
        o.nominal.day for o in occurrences_after(local_date, start - timedelta(days=1), 10)
    ] == [
        1,
        2,
        3,
    ]


def test_a_rule_started_years_ago_jumps_ahead_without_replaying_them() -> None:
    rule = "FREQ=MINUTELY;INTERVAL=7;BYHOUR=9,10"
    spec = parse_spec(rrule=rule, start_at=datetime(2006, 1, 1, tzinfo=UTC))
    after = datetime(2026, 6, 1, 9, 50, tzinfo=UTC)
    # Counted in work units (Python calls), not wall time, so a loaded machine cannot fail it:
    # jumping ahead takes ~700; replaying twenty years from DTSTART takes ~8.7 million.
    budget = Budget(10**9)
    with budget.spend("rrule", "the occurrences"):
        got = occurrences_after(spec, after, 5)
    assert budget.units - budget.left < 50_000
    # 09:50 is a whole number of 7-minute steps after DTSTART (checked with dateutil)
    assert [o.nominal.strftime("%H:%M") for o in got] == [
        "09:57",
        "10:04",
        "10:11",
        "10:18",
        "10:25",
    ]


@pytest.mark.parametrize(
    "rule",
    [
        "FREQ=MINUTELY;INTERVAL=7;BYHOUR=9,10",
        "FREQ=WEEKLY;INTERVAL=3;BYDAY=TU,FR",
        "FREQ=HOURLY;INTERVAL=5",
        "FREQ=DAILY;INTERVAL=9;BYHOUR=8,20",
        "FREQ=MONTHLY;BYDAY=MO,TU;BYSETPOS=-1",
    ],
)
def test_jumping_ahead_agrees_with_dateutil_from_dtstart(rule: str) -> None:
    dtstart = datetime(2025, 2, 3, 6, 15)
    spec = parse_spec(rrule=rule, start_at=dtstart.replace(tzinfo=UTC))
    raw = rrulestr(rule, dtstart=dtstart)
    for after in (datetime(2025, 9, 30, 23, 59), datetime(2026, 2, 3, 6, 15)):
        expected = list(raw.xafter(after, count=5))
        got = occurrences_after(spec, after.replace(tzinfo=UTC), 5)
        assert [o.nominal.replace(tzinfo=None) for o in got] == expected


@pytest.mark.parametrize(
    "rule",
    [
        "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30",
        "FREQ=DAILY;BYMONTH=2;BYMONTHDAY=30",
        "FREQ=MINUTELY;BYMONTH=4;BYMONTHDAY=31",
        "FREQ=YEARLY;INTERVAL=4;BYMONTH=2;BYMONTHDAY=29",  # from 2025: never a leap year
        "FREQ=MONTHLY;BYDAY=MO;BYSETPOS=6",
        "FREQ=DAILY;INTERVAL=7;BYDAY=TU",  # from a Monday, every 7 days: always Mondays
    ],
)
def test_rules_that_never_fire_are_refused_quickly(rule: str) -> None:
    # "Quickly" in work units, not wall time (a loaded machine cannot fail it): within the budget
    # the API gives one evaluation (the worst of these needs about a third of it).
    budget = Budget(10**9)
    with pytest.raises(ValidationError) as info, budget.spend("rrule", "the check"):
        parse_spec(rrule=rule, start_at=datetime(2025, 1, 6, tzinfo=UTC))
    assert budget.units - budget.left < DEFAULT_BUDGET
    assert info.value.field == "rrule"
    assert "never fires" in info.value.detail


@pytest.mark.parametrize(
    ("rule", "words"),
    [
        ("", "RFC 5545"),
        ("BYHOUR=9", "FREQ"),
        ("FREQ=SOMETIMES", "FREQ"),
        ("FREQ=DAILY;BYEASTER=0", "not supported"),
        ("FREQ=DAILY;DTSTART=20260101T000000", "start_at"),
        ("DTSTART:20260101T000000\nRRULE:FREQ=DAILY", "single RRULE"),
        ("FREQ=DAILY;EXDATE=20260101", "start_at"),
        ("FREQ=DAILY;COUNT=0", "COUNT"),
        ("FREQ=DAILY;COUNT=10001", "COUNT"),
        ("FREQ=DAILY;INTERVAL=-1", "INTERVAL"),
        ("FREQ=DAILY;COUNT=2;UNTIL=20270101T000000Z", "both COUNT and UNTIL"),
        ("FREQ=DAILY;FREQ=WEEKLY", "twice"),
        ("FREQ=DAILY;BYHOUR=9-17", "not valid"),
        ("FREQ=DAILY;BYHOUR", "KEY=VALUE"),
        ("FREQ=DAILY;UNTIL=tomorrow", "UNTIL"),
        ("FREQ=DAILY;UNTIL=20260231", "UNTIL"),
        ("FREQ=DAILY;UNTIL=20250101T000000Z", "never fires"),
    ],
)
def test_bad_rules_name_the_rrule_field(rule: str, words: str) -> None:
    with pytest.raises(ValidationError) as info:
        parse_spec(rrule=rule, anchor=CREATED)
    assert info.value.field == "rrule"
    assert words in info.value.detail


def test_rrule_needs_an_anchor() -> None:
    with pytest.raises(ValidationError) as info:
        parse_spec(rrule="FREQ=DAILY")
    assert info.value.field == "start_at"
