"""Property tests for the schedule expression parsers: whatever text arrives as a cron,
``every``, RRULE or timezone, parsing it and finding its next fire times under the evaluation
budget either succeeds or raises :class:`~duetime.errors.ValidationError` naming an API field —
never another exception, never an unbounded search."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta

from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from duetime.errors import ValidationError
from duetime.schedule import occurrences_after, parse_spec
from duetime.schedule.budget import within_budget

FIELDS = {"cron", "every", "rrule", "timezone", "start_at", "end_at", "jitter_seconds"}
NOW = datetime(2030, 1, 1, tzinfo=UTC)
# No shrinking: a failing example under the budget can take minutes to shrink, and the unshrunk
# one (with its seed) is enough to reproduce it.
SETTINGS = settings(
    max_examples=int(os.environ.get("DUETIME_FUZZ_EXAMPLES", "100")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    database=None,
    phases=[Phase.explicit, Phase.generate],
)

instants = st.datetimes(
    min_value=datetime(1970, 1, 1), max_value=datetime(8999, 12, 31), timezones=st.just(UTC)
)
ZONES = ["UTC", "America/New_York", "Europe/London", "Australia/Lord_Howe", "Pacific/Chatham",
         "Asia/Kathmandu", "America/Santiago"]  # fmt: skip
zones = st.sampled_from(ZONES)

_number = st.integers(min_value=-5, max_value=70).map(str)
_cron_term = st.one_of(
    st.just("*"),
    _number,
    st.tuples(_number, _number).map("-".join),
    st.tuples(st.sampled_from(["*", "0", "5-40"]), _number).map("/".join),
    st.sampled_from(["L", "LW", "15W", "5L", "MON#2", "FRI#5", "SUN-SAT", "JAN-DEC", "?", "#"]),
)
_cron_field = st.lists(_cron_term, min_size=1, max_size=3).map(",".join)
crons = st.one_of(
    st.lists(_cron_field, min_size=5, max_size=5).map(" ".join),
    st.lists(_cron_field, min_size=1, max_size=7).map(" ".join),
    st.sampled_from(["@yearly", "@monthly", "@weekly", "@daily", "@hourly", "@reboot"]),
    st.text(max_size=40),
)

everys = st.one_of(
    st.from_regex(
        r"-?P(\d{1,10}Y)?(\d{1,10}M)?(\d{1,3}W)?(\d{1,10}D)?(T(\d{1,10}H)?(\d{1,10}M)?(\d{1,10}S)?)?",
        fullmatch=True,
    ),
    st.text(max_size=30),
)

_ints = st.integers(min_value=-400, max_value=400).map(str)
_byday = st.tuples(
    st.sampled_from(["", "1", "-1", "2", "53", "-53", "0"]),
    st.sampled_from(["MO", "TU", "WE", "TH", "FR", "SA", "SU", "XX"]),
).map("".join)
FREQS = ["YEARLY", "MONTHLY", "WEEKLY", "DAILY", "HOURLY", "MINUTELY", "SECONDLY"]
NUMBER_PARTS = ["INTERVAL", "COUNT", "BYMONTH", "BYMONTHDAY", "BYYEARDAY", "BYWEEKNO", "BYHOUR",
                "BYMINUTE", "BYSECOND", "BYSETPOS"]  # fmt: skip
ODD_PARTS = ["UNTIL=20350101", "UNTIL=20350101T000000Z", "UNTIL=99991231T235959",
             "UNTIL=20350231", "WKST=SU", "DTSTART=20300101", "X-FOO=1", "FREQ"]  # fmt: skip
_rrule_part = st.one_of(
    st.sampled_from([*FREQS, "FORTNIGHTLY"]).map(lambda f: f"FREQ={f}"),
    st.tuples(
        st.sampled_from(NUMBER_PARTS), st.lists(_ints, min_size=1, max_size=3).map(",".join)
    ).map("=".join),
    st.lists(_byday, min_size=1, max_size=3).map(lambda d: "BYDAY=" + ",".join(d)),
    st.sampled_from(ODD_PARTS),
)
rrules = st.one_of(
    st.tuples(
        st.sampled_from(FREQS),
        st.lists(_rrule_part, max_size=5),
    ).map(lambda t: ";".join([f"FREQ={t[0]}", *t[1]])),
    st.lists(_rrule_part, min_size=1, max_size=5).map(";".join),
    st.text(max_size=40),
)


def _evaluate(**kwargs: object) -> None:
    """Parse and find five fire times under the budget; a refusal must name an API field."""
    kind = next(k for k in ("cron", "every", "rrule") if kwargs.get(k) is not None)
    try:
        with within_budget(kind, "the next fire times"):
            spec = parse_spec(anchor=NOW, **kwargs)  # type: ignore[arg-type]
            found = occurrences_after(spec, NOW, 5)
    except ValidationError as exc:
        assert exc.field in FIELDS or (exc.field or "").startswith("dst."), exc
        return
    assert all(o.nominal > NOW for o in found)
    assert [o.nominal for o in found] == sorted(o.nominal for o in found)


@SETTINGS
@given(crons, zones, st.none() | instants)
@example("0 0 29 2 1", "UTC", None)
@example("0 0 31 2 *", "UTC", None)
def test_cron_parses_or_is_a_validation_error(expr: str, zone: str, start: datetime | None) -> None:
    _evaluate(cron=expr, timezone=zone, start_at=start)


@SETTINGS
@given(everys, zones, st.none() | instants)
@example("P100Y", "UTC", datetime(8999, 12, 31, tzinfo=UTC))
@example("PT1S", "UTC", datetime(1970, 1, 1, tzinfo=UTC))
def test_every_parses_or_is_a_validation_error(
    expr: str, zone: str, start: datetime | None
) -> None:
    _evaluate(every=expr, timezone=zone, start_at=start)


@SETTINGS
@given(rrules, zones, st.none() | instants)
@example("FREQ=MINUTELY;BYMONTH=2;BYMONTHDAY=29;BYDAY=MO;BYHOUR=23", "UTC", None)
@example("FREQ=SECONDLY;BYMONTH=2;BYMONTHDAY=29;BYDAY=MO;BYHOUR=23;BYMINUTE=59", "UTC", None)
@example("FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30", "UTC", None)
@example("FREQ=DAILY;UNTIL=99991231T235959", "UTC", datetime(8999, 12, 31, tzinfo=UTC))
@example("FREQ=DAILY;UNTIL=99991231T235959", "America/New_York", None)  # overflowed west of UTC
@example("FREQ=DAILY;UNTIL=99991231", "America/Santiago", None)
@example("FREQ=HOURLY;INTERVAL=5;BYHOUR=3", "UTC", datetime(2030, 1, 1, 1, tzinfo=UTC))
def test_rrule_parses_or_is_a_validation_error(
    expr: str, zone: str, start: datetime | None
) -> None:
    _evaluate(rrule=expr, timezone=zone, start_at=start)


@SETTINGS
@given(st.text(max_size=40) | zones, st.integers(min_value=-(10**6), max_value=10**6))
def test_timezone_and_jitter_parse_or_are_validation_errors(zone: str, jitter: int) -> None:
    _evaluate(cron="0 9 * * *", timezone=zone, jitter_seconds=jitter)


@SETTINGS
@given(instants, st.integers(min_value=-(10**6), max_value=10**9))
def test_start_and_end_at_either_end_of_the_range(start: datetime, span: int) -> None:
    end = start + timedelta(seconds=span)
    _evaluate(every="PT1H", start_at=start, end_at=end)
