"""Our cron fire times against independent implementations.

* cronsim (the model SPEC §3 names for daylight saving time): with the default ``dst`` knobs our
  fire times equal raw cronsim's over a year in each zone. One known difference, asserted below:
  in a zone whose clocks go back by 30 minutes (Lord Howe), cronsim's hour-stepping misses the
  first wall-clock times after the fold for wildcard-hour jobs; we run them, as the wall clock
  shows them once and the job keeps its rhythm.
* croniter (test-only dependency) for zones without DST changes, including ``nW``, which cronsim
  lacks. croniter reads ``31W`` in a 30-day month as the last weekday; we skip such months, like
  a plain ``31``, so ``31W`` is left out of the comparison.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from croniter import croniter
from cronsim import CronSim, CronSimError
from hypothesis import given, settings
from hypothesis import strategies as st

from duetime.errors import ValidationError
from duetime.schedule import describe, occurrences_after, occurrences_between, parse_spec

ZONES = ["America/New_York", "Europe/London", "Australia/Lord_Howe", "Asia/Kolkata", "UTC"]
# Daily or rarer: compared over the whole of 2026.
SPARSE = [
    "30 2 * * *",
    "0 2 * * *",
    "30 1 * * *",
    "45 1 * * *",
    "0 0 * * *",
    "5 2 * * 1-5",
    "30 2 L * *",
    "0 2 LW * *",
    "0 2 * * 0#1",
    "0 1 * * 0L",
    "30 2,3 * * *",
    "0 9 1,15 * MON",
    "0 0 */10 * MON",
    "0 0 * * 0",
]
# Several times an hour: compared over the days around each 2026 transition.
DENSE = [
    "0 * * * *",
    "*/15 * * * *",
    "0,30 * * * *",
    "*/20 2 * * *",
    "0 */2 * * *",
    "0-59/7 1-2 * * 0",
    "15,45 1-3 * * *",
]
TRANSITIONS = {
    "America/New_York": [(3, 7), (10, 31)],
    "Europe/London": [(3, 28), (10, 24)],
    "Australia/Lord_Howe": [(4, 4), (10, 3)],
    "Asia/Kolkata": [(3, 7)],
    "UTC": [(3, 7)],
}
# cronsim steps hours in real time and lands mid-hour after Lord Howe's 30-minute fold.
CRONSIM_MISSES = {
    ("Australia/Lord_Howe", "*/20 2 * * *"): {
        "2026-04-05T02:00:00+10:30",
        "2026-04-05T02:20:00+10:30",
    },
    ("Australia/Lord_Howe", "0 */2 * * *"): {"2026-04-05T02:00:00+10:30"},
}


def cronsim_between(expr: str, zone: ZoneInfo, start: datetime, end: datetime) -> list[datetime]:
    found = []
    for moment in CronSim(expr, start.astimezone(zone)):
        if moment >= end:
            break
        found.append(moment.astimezone(UTC))
    return found


def ours_between(expr: str, zone: str, start: datetime, end: datetime) -> list[datetime]:
    spec = parse_spec(cron=expr, timezone=zone)
    return [o.nominal for o in occurrences_between(spec, start, end, 100_000) if o.nominal < end]


@pytest.mark.parametrize("zone", ZONES)
def test_daily_and_rarer_jobs_agree_with_cronsim_over_a_year(zone: str) -> None:
    start = datetime(2026, 1, 1, tzinfo=ZoneInfo(zone))
    end = datetime(2027, 1, 1, tzinfo=ZoneInfo(zone))
    for expr in SPARSE:
        theirs = cronsim_between(expr, ZoneInfo(zone), start, end)
        assert ours_between(expr, zone, start, end) == theirs, expr
        assert len(theirs) >= 5, expr


@pytest.mark.parametrize("zone", ZONES)
def test_frequent_jobs_agree_with_cronsim_around_each_transition(zone: str) -> None:
    z = ZoneInfo(zone)
    for month, day in TRANSITIONS[zone]:
        start = datetime(2026, month, day, tzinfo=z)
        end = start + timedelta(days=3)
        for expr in DENSE:
            theirs = cronsim_between(expr, z, start, end)
            ours = ours_between(expr, zone, start, end)
            extra = {t.astimezone(z).isoformat() for t in set(ours) - set(theirs)}
            assert set(theirs) <= set(ours), expr
            assert extra == (CRONSIM_MISSES.get((zone, expr), set()) if month == 4 else set())
            assert ours == sorted(ours), expr


def test_lord_howe_fold_keeps_the_wall_clock_rhythm() -> None:
    # 02:00 LHDT (+11) becomes 01:30 LHST (+10:30) on 2026-04-05; 02:00 then shows once.
    spec = parse_spec(cron="0 */2 * * *", timezone="Australia/Lord_Howe")
    zone = spec.zone
    got = occurrences_after(spec, datetime(2026, 4, 4, 23, 30, tzinfo=zone), 3)
    assert [o.nominal.astimezone(zone).isoformat() for o in got] == [
        "2026-04-05T00:00:00+11:00",
        "2026-04-05T02:00:00+10:30",
        "2026-04-05T04:00:00+10:30",
    ]


CRONITER_EXPRS = [
    "30 2 * * *",
    "0 3 * * 0",
    "5 2 * * 1-5",
    "30 2 L * *",
    "0 2 * * 0#1",
    "0 9 15W * *",
    "0 9 1W * *",
    "0 9 1,15 * MON",
    "0 0 1 1 *",
    "@weekly",
    "@monthly",
    "0 12 * JAN-MAR,NOV SAT,SUN",
    "10-50/20 */6 2-20/3 2,5,8 *",
]


@pytest.mark.parametrize("zone", ["UTC", "Asia/Kolkata"])
def test_jobs_agree_with_croniter_where_there_is_no_dst(zone: str) -> None:
    z = ZoneInfo(zone)
    start = datetime(2026, 1, 1, tzinfo=z)
    end = datetime(2027, 1, 1, tzinfo=z)
    for expr in CRONITER_EXPRS:
        it = croniter(expr, start)
        theirs = []
        while (moment := it.get_next(datetime)) < end:
            theirs.append(moment.astimezone(UTC))
        assert ours_between(expr, zone, start, end) == theirs, expr


FIELD_VALUES = {
    "minute": st.sampled_from(["0", "30", "*/15", "5,35", "10-20/5", "*", "59"]),
    "hour": st.sampled_from(["0", "1", "2", "1-3", "*/2", "*", "2,3", "23"]),
    "dom": st.sampled_from(["*", "1", "15", "L", "LW", "*/10", "28-31"]),
    "month": st.sampled_from(["*", "3", "10,11", "MAR-APR", "*/3"]),
    "dow": st.sampled_from(["*", "0", "MON-FRI", "5L", "0#1", "SUN,SAT"]),
}


@settings(max_examples=120, deadline=None)
@given(
    minute=FIELD_VALUES["minute"],
    hour=FIELD_VALUES["hour"],
    dom=FIELD_VALUES["dom"],
    month=FIELD_VALUES["month"],
    dow=FIELD_VALUES["dow"],
    zone=st.sampled_from(["America/New_York", "Europe/London", "Asia/Kolkata", "UTC"]),
    after=st.datetimes(min_value=datetime(2025, 1, 1), max_value=datetime(2027, 12, 31)),
)
def test_random_expressions_agree_with_cronsim(
    minute: str, hour: str, dom: str, month: str, dow: str, zone: str, after: datetime
) -> None:
    expr = f"{minute} {hour} {dom} {month} {dow}"
    try:
        spec = parse_spec(cron=expr, timezone=zone)
    except ValidationError as exc:  # a combination that never fires: cronsim finds nothing
        assert exc.field == "cron"
        try:
            first = next(iter(CronSim(expr, datetime(2026, 1, 1))), None)
        except CronSimError:
            first = None
        assert first is None
        return
    assert not describe(spec).startswith("Cron ")  # cronsim explained it: no fallback text
    start = after.replace(tzinfo=UTC)
    ours = [o.nominal for o in occurrences_after(spec, start, 6)]
    theirs = []
    # cronsim's fixed-time mode iterates naive wall times, so from inside a fold it can return
    # a time before its start: keep only the times after it, as we do.
    for moment in CronSim(expr, start.astimezone(ZoneInfo(zone))):
        if moment.astimezone(UTC) > start:
            theirs.append(moment.astimezone(UTC))
        if len(theirs) == 6:
            break
    assert ours == theirs
