"""The backend-neutral history rules: retention periods, months and export, cursors, merging."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from duetime.errors import ValidationError
from duetime.history.events import (
    HistoryEvent,
    HistoryFilter,
    check_history_filter,
    decode_history_cursor,
    encode_history_cursor,
)
from duetime.history.partitions import (
    export_needed,
    month_bounds,
    months_ahead,
    months_between,
    months_due_for_export,
)
from duetime.history.query import merge_newest_first
from duetime.history.retention import RetentionPolicy, iso_duration, parse_retention

DAY = 86400.0


def test_retention_parse_merge_and_render() -> None:
    policy = parse_retention({"failed": "P90D", "succeeded": "PT12H"})
    assert policy == RetentionPolicy(succeeded=12 * 3600, failed=90 * DAY)
    defaults = RetentionPolicy(7 * DAY, 30 * DAY, 7 * DAY)
    assert policy.over(defaults) == RetentionPolicy(12 * 3600, 90 * DAY, 7 * DAY)
    assert policy.to_json() == {"succeeded": "PT12H", "failed": "P90D"}
    assert iso_duration(90) == "PT90S" and iso_duration(120) == "PT2M"
    assert parse_retention({"cancelled": "P1Y"}).cancelled == pytest.approx(365.2425 * DAY)
    for bad, field in (
        ({"running": "P1D"}, "retention.running"),
        ({"failed": "soon"}, "retention.failed"),
        ({"failed": "PT1S"}, "retention.failed"),
        ({"failed": "P200Y"}, "retention.failed"),
    ):
        with pytest.raises(ValidationError) as caught:
            parse_retention(bad)
        assert caught.value.field == field


def test_months_and_export_rules() -> None:
    now = datetime(2030, 3, 20, 12, tzinfo=UTC)
    assert months_ahead(now) == [date(2030, 3, 1), date(2030, 4, 1), date(2030, 5, 1)]
    assert month_bounds(date(2030, 12, 1))[1] == datetime(2031, 1, 1, tzinfo=UTC)
    known = [date(2029, 12, 1), date(2030, 1, 1), date(2030, 2, 1), date(2030, 3, 1)]
    # Hot window of 30 days: cutoff Feb 18; January (ends Feb 1) is due, February is not.
    assert months_due_for_export(known, now, 30) == [date(2029, 12, 1), date(2030, 1, 1)]
    since, until = datetime(2030, 1, 30, tzinfo=UTC), datetime(2030, 2, 2, tzinfo=UTC)
    assert months_between(since, until, known) == [date(2030, 1, 1), date(2030, 2, 1)]
    assert months_between(None, None, known) == known

    assert export_needed(None, {"a": 3})
    assert not export_needed({"a": 3, "b": 1}, {"a": 3})  # sealed; a drop was cut short
    assert not export_needed({"a": 3}, {"a": 1})
    assert export_needed({"a": 3}, {"a": 3, "b": 2})  # records the archive does not hold


def _event(at: datetime, event_id: int) -> HistoryEvent:
    return HistoryEvent(
        at=at, id=event_id, kind="task", task_id=None, schedule_id=None, name=None, queue=None,
        labels={}, from_status=None, to_status="ready", actor="api", fields=None, attempt=None,
        outcome=None, error=None, http_status=None, duration_ms=None, worker=None,
    )  # fmt: skip


def test_cursor_round_trip_and_refusals() -> None:
    event = _event(datetime(2030, 1, 2, 3, 4, 5, 678901, tzinfo=UTC), 42)
    assert decode_history_cursor(encode_history_cursor(event)) == (event.at, 42)
    for bad in ("zzz", "aDEueC4y", ""):
        with pytest.raises(ValidationError):
            decode_history_cursor(bad)


def test_filter_checks() -> None:
    with pytest.raises(ValidationError, match="kind"):
        check_history_filter(HistoryFilter(tenant_id="t", kinds=("nope",)))
    with pytest.raises(ValidationError, match="until"):
        t = datetime(2030, 1, 1, tzinfo=UTC)
        check_history_filter(HistoryFilter(tenant_id="t", since=t, until=t))


def test_merge_keeps_each_record_once_newest_first() -> None:
    t = datetime(2030, 1, 1, tzinfo=UTC)
    hot = [_event(t, 5), _event(t, 3)]
    cold = [_event(t, 4), _event(t, 3), _event(t, 1)]
    assert [e.id for e in merge_newest_first(10, hot, cold)] == [5, 4, 3, 1]
    assert [e.id for e in merge_newest_first(2, hot, cold)] == [5, 4]
