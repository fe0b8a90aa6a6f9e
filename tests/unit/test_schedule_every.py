"""``every``: ISO 8601 durations from an anchor; calendar versus exact parts; errors."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import pairwise
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from duetime.errors import ValidationError
from duetime.schedule import next_after, occurrences_after, parse_spec
from duetime.schedule.every_expr import parse_every

NY = ZoneInfo("America/New_York")


def test_exact_duration_counts_from_start_at_which_is_the_first_run() -> None:
    start = datetime(2026, 3, 8, 6, 0, tzinfo=UTC)  # 01:00 EST, an hour before the gap
    spec = parse_spec(every="PT15M", timezone="America/New_York", start_at=start)
    got = occurrences_after(spec, start - timedelta(days=1), 10)
    assert [o.nominal for o in got] == [start + k * timedelta(minutes=15) for k in range(10)]
    assert all(o.note is None for o in got)  # exact time ignores DST
    later = occurrences_after(spec, start + timedelta(minutes=20), 2)
    assert [o.nominal for o in later] == [
        start + timedelta(minutes=30),
        start + timedelta(minutes=45),
    ]


def test_exact_duration_from_the_creation_anchor() -> None:
    created = datetime(2026, 5, 1, 10, 7, 33, tzinfo=UTC)
    spec = parse_spec(every="PT1H30M", anchor=created)
    assert next_after(spec, created) == created + timedelta(minutes=90)
    assert next_after(spec, created - timedelta(seconds=1)) == created
    year_later = created + timedelta(days=365, minutes=1)
    # 365 days = 5840 steps of 90 minutes exactly
    assert next_after(spec, year_later) == created + timedelta(minutes=90 * 5841)


def test_one_day_is_a_calendar_day_at_the_same_wall_time() -> None:
    start = datetime(2026, 3, 6, 9, 0, tzinfo=NY)
    spec = parse_spec(every="P1D", timezone="America/New_York", start_at=start)
    got = occurrences_after(spec, start - timedelta(seconds=1), 4)
    assert [o.nominal.astimezone(NY).strftime("%d %H:%M%z") for o in got] == [
        "06 09:00-0500",
        "07 09:00-0500",
        "08 09:00-0400",
        "09 09:00-0400",
    ]
    exact = parse_spec(every="PT24H", timezone="America/New_York", start_at=start)
    got = occurrences_after(exact, start - timedelta(seconds=1), 4)
    assert [o.nominal.astimezone(NY).strftime("%d %H:%M%z") for o in got] == [
        "06 09:00-0500",
        "07 09:00-0500",
        "08 10:00-0400",
        "09 10:00-0400",
    ]


def test_calendar_steps_use_the_dst_knobs() -> None:
    start = datetime(2026, 3, 7, 2, 30, tzinfo=NY)
    spec = parse_spec(every="P1D", timezone="America/New_York", start_at=start)
    got = occurrences_after(spec, start, 2)
    assert got[0].kind == "dst_shifted"
    assert got[0].nominal.astimezone(NY).strftime("%d %H:%M") == "08 03:00"
    assert got[0].note == (
        "02:30 does not exist on 2026-03-08 in America/New_York (DST gap); runs at 03:00"
    )
    assert got[1].nominal.astimezone(NY).strftime("%d %H:%M%z") == "09 02:30-0400"
    skip = parse_spec(
        every="P1D", timezone="America/New_York", start_at=start, dst={"nonexistent": "skip"}
    )
    assert [o.nominal.day for o in occurrences_after(skip, start, 2)] == [9, 10]
    fold_start = datetime(2026, 10, 31, 1, 30, tzinfo=NY)
    both = parse_spec(
        every="P1D", timezone="America/New_York", start_at=fold_start, dst={"ambiguous": "both"}
    )
    got = occurrences_after(both, fold_start, 3)
    assert [o.nominal.astimezone(NY).strftime("%d %H:%M%z") for o in got] == [
        "01 01:30-0400",
        "01 01:30-0500",
        "02 01:30-0500",
    ]
    assert [o.kind for o in got] == [None, "dst_repeat", None]


def test_months_and_years_clamp_to_the_month_end_and_come_back() -> None:
    start = datetime(2026, 1, 31, 12, tzinfo=UTC)
    spec = parse_spec(every="P1M", start_at=start)
    got = occurrences_after(spec, start - timedelta(seconds=1), 5)
    assert [o.nominal.date().isoformat() for o in got] == [
        "2026-01-31",
        "2026-02-28",
        "2026-03-31",
        "2026-04-30",
        "2026-05-31",
    ]
    leap = datetime(2024, 2, 29, tzinfo=UTC)
    yearly = parse_spec(every="P1Y", start_at=leap)
    got = occurrences_after(yearly, leap, 4)
    assert [o.nominal.date().isoformat() for o in got] == [
        "2025-02-28",
        "2026-02-28",
        "2027-02-28",
        "2028-02-29",
    ]
    # far ahead: found by estimate, not by walking every step
    assert next_after(spec, datetime(2126, 1, 31, 13, tzinfo=UTC)) == datetime(
        2126, 2, 28, 12, tzinfo=UTC
    )


def test_weeks_and_mixed_durations() -> None:
    start = datetime(2026, 1, 5, 8, tzinfo=UTC)  # a Monday
    weekly = parse_spec(every="P1W", start_at=start)
    assert [o.nominal.weekday() for o in occurrences_after(weekly, start, 3)] == [0, 0, 0]
    mixed = parse_spec(every="P1DT12H", start_at=start)
    got = occurrences_after(mixed, start - timedelta(seconds=1), 3)
    assert [o.nominal for o in got] == [start + k * timedelta(hours=36) for k in range(3)]


def test_end_at_bounds_every() -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    spec = parse_spec(every="PT1H", start_at=start, end_at=start + timedelta(hours=3))
    got = occurrences_after(spec, start - timedelta(days=1), 10)
    assert [o.nominal for o in got] == [start + timedelta(hours=h) for h in range(4)]


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("", "ISO 8601"),
        ("15M", "ISO 8601"),
        ("P", "ISO 8601"),
        ("PT", "ISO 8601"),
        ("P1DT", "ISO 8601"),
        ("PT15X", "ISO 8601"),
        ("PT0S", "zero"),
        ("P0D", "zero"),
        ("-PT5M", "negative"),
        ("PT1.5H", "fraction"),
        ("PT0.5S", "fraction"),
        ("PT0,5S", "fraction"),
        ("P101Y", "100 years"),
    ],
)
def test_bad_durations_name_the_every_field(text: str, words: str) -> None:
    with pytest.raises(ValidationError) as info:
        parse_spec(every=text, anchor=datetime(2026, 1, 1, tzinfo=UTC))
    assert info.value.field == "every"
    assert words in info.value.detail


def test_every_needs_an_anchor() -> None:
    with pytest.raises(ValidationError) as info:
        parse_spec(every="PT5M")
    assert info.value.field == "start_at"


def test_duration_parts() -> None:
    every = parse_every("p1y2m3w4dt5h6m7s")
    assert (every.years, every.months, every.weeks, every.days) == (1, 2, 3, 4)
    assert every.exact == timedelta(hours=5, minutes=6, seconds=7)
    assert every.is_calendar
    assert not parse_every("PT1M").is_calendar  # one minute, not one month
    assert parse_every("P1M").is_calendar


@settings(max_examples=60, deadline=None)
@given(
    seconds=st.integers(min_value=1, max_value=7 * 86_400),
    offset=st.integers(min_value=-86_400 * 400, max_value=86_400 * 400),
)
def test_exact_steps_are_anchor_plus_k_times_the_duration(seconds: int, offset: int) -> None:
    anchor = datetime(2026, 1, 1, 0, 0, 7, tzinfo=UTC)
    spec = parse_spec(every=f"PT{seconds}S", anchor=anchor, timezone="Europe/London")
    after = anchor + timedelta(seconds=offset)
    got = occurrences_after(spec, after, 3)
    step = timedelta(seconds=seconds)
    assert got[0].nominal > after
    assert got[0].nominal - step <= max(after, anchor - step)
    for o in got:
        assert (o.nominal - anchor) % step == timedelta(0)
    assert [b.nominal - a.nominal for a, b in pairwise(got)] == [step, step]


@settings(max_examples=40, deadline=None)
@given(
    months=st.integers(min_value=1, max_value=14),
    day=st.integers(min_value=1, max_value=31),
    skip_ahead=st.integers(min_value=0, max_value=3000),
)
def test_calendar_estimate_matches_walking_from_the_anchor(
    months: int, day: int, skip_ahead: int
) -> None:
    anchor = datetime(2026, 1, day, 9, 30, tzinfo=NY)
    spec = parse_spec(every=f"P{months}M", timezone="America/New_York", start_at=anchor)
    walked = occurrences_after(spec, anchor - timedelta(seconds=1), 40)
    after = anchor + timedelta(days=skip_ahead * months // 10)
    expected = [o for o in walked if o.nominal > after][:2]
    assert len(expected) == 2
    assert occurrences_after(spec, after, 2) == expected
