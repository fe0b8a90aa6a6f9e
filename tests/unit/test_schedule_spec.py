"""parse_spec validation, start/end bounds, jitter, descriptions, and iteration properties."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from duetime.errors import ValidationError
from duetime.schedule import (
    ScheduleSpec,
    describe,
    jitter_for,
    next_after,
    occurrences_after,
    occurrences_between,
    parse_spec,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("kwargs", "field", "words"),
    [
        ({}, "cron", "exactly one of cron, every or rrule"),
        ({"cron": "* * * * *", "every": "PT1M"}, "every", "cron and every"),
        ({"cron": "* * * * *", "rrule": "FREQ=DAILY"}, "rrule", "cron and rrule"),
        ({"cron": "* * * * *", "timezone": "Mars/Olympus_Mons"}, "timezone", "IANA"),
        ({"cron": "* * * * *", "timezone": "localtime"}, "timezone", "IANA"),
        ({"cron": "* * * * *", "timezone": ""}, "timezone", "IANA"),
        ({"cron": "* * * * *", "timezone": "../../etc/passwd"}, "timezone", "IANA"),
        ({"cron": "* * * * *", "start_at": datetime(2026, 1, 1)}, "start_at", "UTC offset"),
        ({"cron": "* * * * *", "end_at": datetime(2026, 1, 1)}, "end_at", "UTC offset"),
        ({"cron": "* * * * *", "start_at": T0, "end_at": T0}, "end_at", "later than start_at"),
        ({"cron": "* * * * *", "jitter_seconds": -1}, "jitter_seconds", "between 0 and"),
        ({"cron": "* * * * *", "jitter_seconds": 86_401}, "jitter_seconds", "between 0 and"),
        ({"cron": "* * * * *", "jitter_seconds": True}, "jitter_seconds", "whole number"),
        ({"cron": "* * * * *", "jitter_seconds": 1.5}, "jitter_seconds", "whole number"),
        ({"cron": "* * * * *", "dst": {"gap": "skip"}}, "dst.gap", "unknown dst setting"),
        ({"cron": "* * * * *", "dst": {"nonexistent": "later"}}, "dst.nonexistent", "skip"),
        ({"cron": "* * * * *", "dst": {"ambiguous": "second"}}, "dst.ambiguous", "both"),
        ({"cron": "0 0 30 2 *"}, "cron", "never fires"),
        ({"every": "PT0S", "anchor": T0}, "every", "zero"),
        ({"rrule": "FREQ=NEVER", "anchor": T0}, "rrule", "FREQ"),
        ({"every": "PT5M"}, "start_at", "start_at"),
        (
            {
                "cron": "0 9 * * *",
                "start_at": T0 + timedelta(hours=10),
                "end_at": T0 + timedelta(hours=11),
            },
            "cron",
            "never fires after start_at and before end_at",
        ),
        (
            {
                "cron": "30 2 * 3 SUN#2",  # always the day New York springs forward
                "timezone": "America/New_York",
                "start_at": T0,
                "dst": {"nonexistent": "skip"},
            },
            "cron",
            "DST gaps",
        ),
    ],
)
def test_every_error_names_its_field(kwargs: dict[str, Any], field: str, words: str) -> None:
    with pytest.raises(ValidationError) as info:
        parse_spec(**kwargs)
    assert info.value.field == field
    assert words in info.value.detail


def test_a_valid_spec_is_normalized_to_utc() -> None:
    start = datetime(2026, 1, 1, 9, tzinfo=ZoneInfo("Asia/Kolkata"))
    spec = parse_spec(
        cron="0 9 * * *",
        timezone="Asia/Kolkata",
        start_at=start,
        jitter_seconds=30,
        dst={"nonexistent": "skip", "ambiguous": "both"},
    )
    assert spec.start_at == datetime(2026, 1, 1, 3, 30, tzinfo=UTC)
    assert spec.start_at.tzinfo is UTC
    assert (spec.dst_nonexistent, spec.dst_ambiguous, spec.jitter_seconds) == ("skip", "both", 30)
    assert (spec.kind, spec.expression, spec.zone.key) == ("cron", "0 9 * * *", "Asia/Kolkata")


def test_start_and_end_are_inclusive_bounds() -> None:
    start = datetime(2026, 1, 2, 9, tzinfo=UTC)
    end = datetime(2026, 1, 4, 9, tzinfo=UTC)
    spec = parse_spec(cron="0 9 * * *", start_at=start, end_at=end)
    got = occurrences_after(spec, T0, 10)
    assert [o.nominal for o in got] == [start, start + timedelta(days=1), end]
    assert occurrences_after(spec, end, 10) == []
    assert next_after(spec, end - timedelta(seconds=1)) == end
    assert next_after(spec, end) is None
    # (start, end] of the query, inside the schedule's own bounds
    window = occurrences_between(spec, start, end - timedelta(seconds=1), 10)
    assert [o.nominal for o in window] == [start + timedelta(days=1)]
    assert occurrences_between(spec, start, end, 0) == []


def test_naive_instants_are_a_programming_error() -> None:
    spec = parse_spec(cron="* * * * *")
    with pytest.raises(ValueError, match="timezone-aware"):
        occurrences_after(spec, datetime(2026, 1, 1), 1)


def test_a_spec_built_directly_is_checked_when_used() -> None:
    spec = ScheduleSpec(cron="61 * * * *")
    with pytest.raises(ValidationError) as info:
        occurrences_after(spec, T0, 1)
    assert info.value.field == "cron"
    fine = ScheduleSpec(cron="*/5 * * * *", timezone="Europe/London")
    assert next_after(fine, T0) == T0 + timedelta(minutes=5)


def test_jitter_is_deterministic_and_in_range() -> None:
    nominal = datetime(2026, 3, 1, 2, 30, tzinfo=UTC)
    assert jitter_for("sch_1", nominal, 0) == 0
    first = jitter_for("sch_1", nominal, 600)
    assert first == jitter_for("sch_1", nominal, 600)
    # the same instant written in another zone is the same occurrence
    same = nominal.astimezone(ZoneInfo("America/New_York"))
    assert jitter_for("sch_1", same, 600) == first
    values = [jitter_for("sch_1", nominal + timedelta(minutes=i), 600) for i in range(2000)]
    assert min(values) >= 0 and max(values) <= 600
    assert len(set(values)) > 400  # spread, not constant
    assert {jitter_for(f"sch_{i}", nominal, 1) for i in range(50)} == {0, 1}  # both ends reached
    assert len({jitter_for(f"sch_{i}", nominal, 600) for i in range(50)}) > 30


@pytest.mark.parametrize(
    ("kwargs", "text"),
    [
        (
            {"cron": "0 2 * * *", "timezone": "America/New_York"},
            "At 02:00 every day (America/New_York)",
        ),
        ({"cron": "*/15 * * * *"}, "Every 15 minutes"),
        ({"cron": "* * * * *", "timezone": "Europe/London"}, "Every minute"),
        ({"cron": "@hourly"}, "Every hour"),
        ({"cron": "5 * * * *"}, "Every hour at minute 5"),
        ({"cron": "0 */2 * * *", "timezone": "Asia/Kolkata"}, "Every 2 hours (Asia/Kolkata)"),
        ({"cron": "@daily"}, "At 00:00 every day (UTC)"),
        ({"cron": "0 9 * * MON-FRI"}, "At 09:00 on Monday through Friday (UTC)"),
        ({"cron": "0 9 L * *"}, "At 09:00 on the last day of every month (UTC)"),
        ({"cron": "0 9 * * 5L"}, "At 09:00 on the last Friday of the month (UTC)"),
        ({"cron": "0 9 * * MON#2"}, "At 09:00 on the second Monday of the month (UTC)"),
        ({"cron": "0 9 31 * *"}, "At 09:00 on the 31st day of every month (UTC)"),
        (
            {"cron": "0 9 15W * *"},
            "At 09:00 on the weekday nearest the 15th day of every month (UTC)",
        ),
        ({"cron": "0 9 1W 1 *"}, "At 09:00 on the weekday nearest January 1 (UTC)"),
        ({"every": "PT15M", "anchor": T0}, "Every 15 minutes"),
        ({"every": "PT1H30M", "anchor": T0}, "Every 1 hour and 30 minutes"),
        ({"every": "PT1H", "anchor": T0}, "Every hour"),
        (
            {
                "every": "P1D",
                "start_at": datetime(2026, 1, 1, 14, tzinfo=UTC),
                "timezone": "America/New_York",
            },
            "Every day at 09:00 (America/New_York)",
        ),
        ({"every": "P2W", "anchor": T0}, "Every 2 weeks at 00:00 from 2026-01-01 (UTC)"),
        (
            {"every": "P1M", "start_at": datetime(2026, 1, 31, 9, tzinfo=UTC)},
            "Every month at 09:00 from 2026-01-31 (UTC)",
        ),
        (
            {"every": "P1DT12H", "anchor": T0},
            "Every 1 day and 12 hours from 2026-01-01 00:00 (UTC)",
        ),
        ({"rrule": "FREQ=WEEKLY", "anchor": T0}, "Weekly on Thursday at 00:00 (UTC)"),
        (
            {"rrule": "FREQ=HOURLY;INTERVAL=4;BYMINUTE=15", "anchor": T0},
            "Every 4 hours at minute 15",
        ),
        (
            {
                "rrule": "FREQ=MONTHLY;BYDAY=-1FR;BYHOUR=9",
                "anchor": T0,
                "timezone": "Europe/London",
            },
            "Monthly on the last Friday at 09:00 (Europe/London)",
        ),
        ({"rrule": "FREQ=MONTHLY;BYMONTHDAY=15", "anchor": T0}, "Monthly on day 15 at 00:00 (UTC)"),
        (
            {"rrule": "FREQ=WEEKLY;INTERVAL=2;BYDAY=MO,WE;BYHOUR=8;BYMINUTE=30", "anchor": T0},
            "Every 2 weeks on Monday and Wednesday at 08:30 (UTC)",
        ),
        (
            {"rrule": "FREQ=YEARLY;BYMONTH=3;BYDAY=2SU;BYHOUR=7", "anchor": T0},
            "Yearly in March on the second Sunday at 07:00 (UTC)",
        ),
        ({"rrule": "FREQ=MINUTELY;INTERVAL=10", "anchor": T0}, "Every 10 minutes"),
        ({"rrule": "FREQ=DAILY;BYHOUR=9;COUNT=5", "anchor": T0}, "Daily at 09:00, 5 times (UTC)"),
    ],
)
def test_descriptions(kwargs: dict[str, Any], text: str) -> None:
    assert describe(parse_spec(**kwargs)) == text


EXPRESSIONS = st.sampled_from(
    [
        {"cron": "30 2 * * *"},
        {"cron": "30 1 * * *"},
        {"cron": "*/15 * * * *"},
        {"cron": "0 * * * *"},
        {"cron": "0,30 2 * * *"},
        {"cron": "0 9 15W * *"},
        {"every": "P1D"},
        {"every": "PT45M"},
        {"rrule": "FREQ=DAILY;BYHOUR=1,2;BYMINUTE=30"},
        {"rrule": "FREQ=HOURLY;INTERVAL=3"},
    ]
)
ZONES = st.sampled_from(
    ["America/New_York", "Europe/London", "Australia/Lord_Howe", "Asia/Kolkata", "UTC"]
)
DST = st.fixed_dictionaries(
    {
        "nonexistent": st.sampled_from(["run_after_gap", "skip"]),
        "ambiguous": st.sampled_from(["first", "both"]),
    }
)


@settings(max_examples=150, deadline=None)
@given(
    expression=EXPRESSIONS,
    zone=ZONES,
    dst=DST,
    after=st.datetimes(min_value=datetime(2025, 1, 1), max_value=datetime(2027, 12, 31)),
)
def test_fire_times_are_ascending_strictly_after_and_resume_where_they_stopped(
    expression: dict[str, str], zone: str, dst: dict[str, str], after: datetime
) -> None:
    spec = parse_spec(
        **expression, timezone=zone, dst=dst, anchor=datetime(2024, 12, 30, 7, 45, tzinfo=UTC)
    )
    start = after.replace(tzinfo=UTC)
    got = occurrences_after(spec, start, 8)
    assert len(got) == 8
    assert all(o.nominal > start for o in got)
    assert [o.nominal for o in got] == sorted({o.nominal for o in got})  # ascending, no repeats
    # asking again from any fire time continues the same sequence
    assert occurrences_after(spec, got[2].nominal, 5) == got[3:]
    # and (start, end] windows cut the same sequence
    assert occurrences_between(spec, start, got[4].nominal, 100) == got[:5]
    for o in got:
        if o.kind is not None:
            assert o.note  # a moved or repeated run always says why
        if dst["nonexistent"] == "skip":
            assert o.kind != "dst_shifted"
        if dst["ambiguous"] == "first":
            assert o.kind != "dst_repeat"
