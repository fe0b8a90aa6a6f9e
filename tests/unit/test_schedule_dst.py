"""Daylight saving time: gaps and folds for fixed-time and real-time schedules, and the knobs.

2026 transitions used here: America/New_York 03-08 02:00 -> 03:00 and 11-01 02:00 -> 01:00;
Europe/London 03-29 01:00 -> 02:00 and 10-25 02:00 -> 01:00; Australia/Lord_Howe (30 minutes)
10-04 02:00 -> 02:30 and 04-05 02:00 -> 01:30; Asia/Kolkata (+05:30) has none.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import pairwise
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from duetime.schedule import (
    Occurrence,
    occurrences_after,
    occurrences_between,
    parse_spec,
    skipped_between,
)
from duetime.schedule.dst import earliest_wall

NY = "America/New_York"


def day_of(spec_kwargs: dict[str, Any], zone: str, y: int, m: int, d: int) -> list[Occurrence]:
    """Every occurrence of one local day (plus the night around it)."""
    spec = parse_spec(timezone=zone, **spec_kwargs)
    z = ZoneInfo(zone)
    start = datetime(y, m, d, tzinfo=z) - timedelta(hours=1)
    return occurrences_between(spec, start, start + timedelta(hours=26), 500)


def local(occurrences: list[Occurrence], zone: str) -> list[str]:
    return [o.nominal.astimezone(ZoneInfo(zone)).strftime("%m-%d %H:%M%z") for o in occurrences]


@pytest.mark.parametrize(
    ("zone", "expr", "date", "runs_at", "note"),
    [
        (
            NY,
            "30 2 * * *",
            (2026, 3, 8),
            "03-08 03:00-0400",
            "02:30 does not exist on 2026-03-08 in America/New_York (DST gap); runs at 03:00",
        ),
        (
            "Europe/London",
            "30 1 * * *",
            (2026, 3, 29),
            "03-29 02:00+0100",
            "01:30 does not exist on 2026-03-29 in Europe/London (DST gap); runs at 02:00",
        ),
        (
            "Australia/Lord_Howe",
            "15 2 * * *",
            (2026, 10, 4),
            "10-04 02:30+1100",
            "02:15 does not exist on 2026-10-04 in Australia/Lord_Howe (DST gap); runs at 02:30",
        ),
    ],
)
def test_fixed_time_in_a_gap_runs_right_after_the_jump(
    zone: str, expr: str, date: tuple[int, int, int], runs_at: str, note: str
) -> None:
    got = [
        o for o in day_of({"cron": expr}, zone, *date) if o.nominal.day in (date[2], date[2] - 1)
    ]
    shifted = [o for o in got if o.kind == "dst_shifted"]
    assert len(shifted) == 1
    assert local(shifted, zone) == [runs_at]
    assert shifted[0].note == note


@pytest.mark.parametrize(
    ("zone", "expr", "date", "first", "second"),
    [
        (NY, "30 1 * * *", (2026, 11, 1), "11-01 01:30-0400", "11-01 01:30-0500"),
        ("Europe/London", "30 1 * * *", (2026, 10, 25), "10-25 01:30+0100", "10-25 01:30+0000"),
        ("Australia/Lord_Howe", "45 1 * * *", (2026, 4, 5), "04-05 01:45+1100", "04-05 01:45+1030"),
    ],
)
def test_fixed_time_in_a_fold_runs_once_or_both(
    zone: str, expr: str, date: tuple[int, int, int], first: str, second: str
) -> None:
    once = day_of({"cron": expr}, zone, *date)
    assert first in local(once, zone)
    assert second not in local(once, zone)
    assert all(o.kind is None and o.note is None for o in once)
    both = day_of({"cron": expr, "dst": {"ambiguous": "both"}}, zone, *date)
    assert set(local(both, zone)) == set(local(once, zone)) | {second}
    assert len(both) == len(once) + 1
    repeat = [o for o in both if o.kind == "dst_repeat"]
    assert local(repeat, zone) == [second]
    assert repeat[0].note is not None and "occurs twice" in repeat[0].note
    assert [o.nominal for o in both] == sorted(o.nominal for o in both)


def test_skip_drops_the_gap_time_and_reports_it_for_the_ledger() -> None:
    spec = parse_spec(cron="30 2 * * *", timezone=NY, dst={"nonexistent": "skip"})
    start = datetime(2026, 3, 6, tzinfo=UTC)
    end = datetime(2026, 3, 11, tzinfo=UTC)
    got = occurrences_between(spec, start, end, 10)
    assert local(got, NY) == [
        "03-06 02:30-0500",
        "03-07 02:30-0500",
        "03-09 02:30-0400",
        "03-10 02:30-0400",
    ]
    assert skipped_between(spec, start, end) == [
        (
            datetime(2026, 3, 8, 7, 0, tzinfo=UTC),
            "02:30 does not exist on 2026-03-08 in America/New_York (DST gap); "
            "skipped (dst.nonexistent=skip)",
        )
    ]
    default = parse_spec(cron="30 2 * * *", timezone=NY)
    assert skipped_between(default, start, end) == []


def test_several_gap_times_collapse_into_one_run_or_one_skip() -> None:
    start, end = datetime(2026, 3, 8, tzinfo=UTC), datetime(2026, 3, 8, 12, tzinfo=UTC)
    spec = parse_spec(cron="0,30 2 * * *", timezone=NY)
    (only,) = occurrences_between(spec, start, end, 10)
    assert only.nominal == datetime(2026, 3, 8, 7, tzinfo=UTC)
    assert only.kind == "dst_shifted"
    assert only.note is not None and only.note.startswith("02:00 and 02:30 do not exist")
    # A shifted time meeting a real one is one plain run that still says what happened.
    spec = parse_spec(cron="0 2,3 * * *", timezone=NY)
    (merged,) = occurrences_between(spec, start, end, 10)
    assert merged.nominal == datetime(2026, 3, 8, 7, tzinfo=UTC)
    assert merged.kind is None
    assert merged.note is not None and "02:00 does not exist" in merged.note
    skipping = parse_spec(cron="0 2,3 * * *", timezone=NY, dst={"nonexistent": "skip"})
    assert [o.nominal for o in occurrences_between(skipping, start, end, 10)] == [merged.nominal]
    assert [t for t, _ in skipped_between(skipping, start, end)] == [merged.nominal]


@pytest.mark.parametrize("zone", [NY, "Europe/London", "Australia/Lord_Howe", "Asia/Kolkata"])
@pytest.mark.parametrize("dst", [{}, {"nonexistent": "skip", "ambiguous": "both"}])
def test_every_fifteen_minutes_keeps_its_real_time_rhythm_all_year(
    zone: str, dst: dict[str, str]
) -> None:
    spec = parse_spec(cron="*/15 * * * *", timezone=zone, dst=dst)
    z = ZoneInfo(zone)
    for month, day in ((3, 7), (3, 28), (4, 4), (10, 3), (10, 24), (10, 31)):
        start = datetime(2026, month, day, tzinfo=z)
        got = occurrences_between(spec, start, start + timedelta(days=2), 1000)
        steps = {b.nominal - a.nominal for a, b in pairwise(got)}
        assert steps == {timedelta(minutes=15)}, (zone, month, day)
        assert all(o.note is None and o.kind is None for o in got)


def test_hourly_runs_twice_at_the_repeated_hour_and_skips_the_missing_one() -> None:
    spec = parse_spec(cron="0 * * * *", timezone=NY)
    fall = occurrences_between(spec, datetime(2026, 11, 1, 3, tzinfo=UTC), None, 4)
    assert local(fall, NY) == [
        "11-01 00:00-0400",
        "11-01 01:00-0400",
        "11-01 01:00-0500",
        "11-01 02:00-0500",
    ]
    spring = occurrences_between(spec, datetime(2026, 3, 8, 4, tzinfo=UTC), None, 3)
    assert local(spring, NY) == ["03-08 00:00-0500", "03-08 01:00-0500", "03-08 03:00-0400"]


def test_fixed_hour_on_fold_day_runs_once_by_default() -> None:
    spec = parse_spec(cron="30 1 * * *", timezone=NY)
    z = ZoneInfo(NY)
    got = occurrences_between(
        spec, datetime(2026, 11, 1, tzinfo=z), datetime(2026, 11, 1, 12, tzinfo=z), 10
    )
    assert local(got, NY) == ["11-01 01:30-0400"]


def test_no_dst_zones_have_no_notes_all_year() -> None:
    for zone in ("Asia/Kolkata", "UTC"):
        spec = parse_spec(cron="30 2 * * *", timezone=zone, dst={"ambiguous": "both"})
        got = occurrences_after(spec, datetime(2026, 1, 1, tzinfo=UTC), 366)
        assert all(o.note is None and o.kind is None for o in got)
        offset = ZoneInfo(zone).utcoffset(datetime(2026, 1, 1))
        assert offset is not None
        assert {(o.nominal + offset).strftime("%H:%M") for o in got} == {"02:30"}


def test_after_inside_a_fold_is_strict_in_real_time() -> None:
    spec = parse_spec(cron="5 1 * * *", timezone=NY, dst={"ambiguous": "both"})
    # 01:10 EDT: the 01:05 EST run is still ahead
    after = datetime(2026, 11, 1, 1, 10, tzinfo=ZoneInfo(NY))  # fold=0: EDT
    (nxt,) = occurrences_after(spec, after, 1)
    assert local([nxt], NY) == ["11-01 01:05-0500"]
    assert nxt.kind == "dst_repeat"
    # 01:10 EST: it is behind; tomorrow's is next
    after = datetime(2026, 11, 1, 1, 10, tzinfo=ZoneInfo(NY), fold=1)
    (nxt,) = occurrences_after(spec, after, 1)
    assert local([nxt], NY) == ["11-02 01:05-0500"]


def test_earliest_wall_reaches_back_across_a_fold() -> None:
    after = datetime(2026, 11, 1, 5, 10, tzinfo=UTC)  # 01:10 EDT
    assert earliest_wall(after, ZoneInfo(NY)) == datetime(2026, 11, 1, 0, 10)
    assert earliest_wall(after, ZoneInfo("UTC")) == datetime(2026, 11, 1, 5, 10)
