"""The dashboard's pure parts: chart geometry, error grouping and the DST look-ahead."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from duetime.api.ui import charts
from duetime.api.ui.views_dead import error_key, group_by_error
from duetime.schedule.preview import dst_ahead, upcoming
from duetime.types import RetryPolicy, Schedule, ScheduleConfig, Task, TaskStatus

END = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)


def test_buckets_split_the_window_and_count_what_falls_in() -> None:
    edges = charts.bucket_edges(END, timedelta(hours=1), buckets=4)
    assert edges[0] == END - timedelta(hours=1) and edges[-1] == END and len(edges) == 5
    times = [
        END - timedelta(minutes=59),  # first bucket
        END - timedelta(minutes=45),  # exactly an edge: the bucket it opens
        END - timedelta(minutes=1),
        END,  # the window's end belongs to the last bucket
        END + timedelta(seconds=1),  # outside
        END - timedelta(hours=2),  # outside
    ]
    assert charts.count_in_buckets(edges, times) == [1, 1, 0, 2]


def test_lag_is_a_percentile_per_bucket() -> None:
    edges = charts.bucket_edges(END, timedelta(minutes=2), buckets=2)
    first = END - timedelta(seconds=90)
    samples = [(first, float(n)) for n in range(1, 101)]
    assert charts.lag_in_buckets(edges, samples) == [95.0, 0.0]
    assert charts.lag_in_buckets(edges, samples, 0.5) == [50.0, 0.0]
    assert charts.percentile([3.0], 0.95) == 3.0


@pytest.mark.parametrize(
    ("value", "ceiling"), [(0, 1), (0.3, 0.5), (1, 1), (7, 10), (12, 20), (450, 500), (5001, 10000)]
)
def test_the_y_axis_ends_on_a_round_number(value: float, ceiling: float) -> None:
    assert charts.nice_ceiling(value) == pytest.approx(ceiling)


def test_bars_stack_in_series_order_within_the_plot() -> None:
    edges = charts.bucket_edges(END, timedelta(hours=1), buckets=2)
    chart = charts.bar_chart(
        "Finished",
        edges,
        [charts.Series("ok", "c-ok", [3, 0]), charts.Series("failed", "c-bad", [2, 1])],
    )
    assert chart.y_max_label == "5" and not chart.empty
    ok, failed_first, failed_second = chart.bars
    bottom = charts.MARGIN_TOP + charts.HEIGHT
    assert ok.css == "c-ok" and ok.y + ok.height == pytest.approx(bottom)
    assert failed_first.y + failed_first.height == pytest.approx(ok.y)  # stacked on top
    assert failed_first.y == pytest.approx(charts.MARGIN_TOP)  # 5 of 5: the full height
    assert failed_second.x > failed_first.x
    assert failed_second.height == pytest.approx(charts.HEIGHT / 5)
    assert "failed 1" in failed_second.title and "11:30-12:00 UTC" in failed_second.title
    assert charts.bar_chart("none", edges, [charts.Series("x", "c-ok", [0, 0])]).empty


def test_durations_read_like_people_write_them() -> None:
    assert charts.format_seconds(0.0042) == "4.2 ms"
    assert charts.format_seconds(0.25) == "250 ms"
    assert charts.format_seconds(12.5) == "12.5 s"
    assert charts.format_seconds(250) == "4m 10s"
    assert charts.format_seconds(3 * 3600 + 300) == "3h 5m"
    assert charts.format_seconds(52 * 3600) == "2d 4h"


def _failed(error: str | None, queue: str = "q", minute: int = 0) -> Task:
    at = END + timedelta(minutes=minute)
    return Task(
        id=f"00000000-0000-7000-8000-{minute:012d}", tenant_id="t", name=None, queue=queue,
        status=TaskStatus.FAILED, version=1, target={"type": "worker"}, payload_json="null",
        idempotency_key=None, priority=0, retry=RetryPolicy(), timeout_seconds=30,
        depends_on=(), concurrency_key=None, labels={}, attempts=1, series_start=0,
        schedule_id=None, scheduled_for=None, run_at=at, due_at=at, created_at=at,
        updated_at=at, finished_at=at, last_error=error,
    )  # fmt: skip


def test_dead_letters_group_by_the_first_line_of_their_error() -> None:
    assert error_key("HTTP 500\nTraceback ...") == "HTTP 500"
    assert error_key(None) == error_key("  ") == "(no error recorded)"
    assert len(error_key("x" * 500)) == 160
    groups = group_by_error(
        [
            _failed("connect refused", "a", 1),
            _failed("HTTP 500\nbody one", "a", 2),
            _failed("HTTP 500\nbody two", "b", 3),
            _failed(None, "a", 4),
        ]
    )
    assert [(g.error, len(g.tasks), sorted(g.queues)) for g in groups] == [
        ("HTTP 500", 2, ["a", "b"]),
        ("(no error recorded)", 1, ["a"]),
        ("connect refused", 1, ["a"]),
    ]
    assert groups[0].last_at == END + timedelta(minutes=3)


def _schedule(cron: str, zone: str, **dst: str) -> Schedule:
    config = ScheduleConfig(
        cron=cron,
        timezone=zone,
        dst_nonexistent=dst.get("nonexistent", "run_after_gap"),
        dst_ambiguous=dst.get("ambiguous", "first"),
    )
    anchor = datetime(2026, 1, 1, tzinfo=UTC)
    return Schedule(
        id="s", tenant_id="t", config=config, anchor_at=anchor, paused=False, pause_note=None,
        paused_at=None, resumed_at=None, resume_catchup=None, next_run_at=None,
        materialized_until=anchor, buffered_at=None, last_task_id=None, version=1,
        created_at=anchor, updated_at=anchor,
    )  # fmt: skip


def test_dst_changes_ahead_name_the_moved_skipped_and_doubled_runs() -> None:
    after = datetime(2026, 11, 26, tzinfo=UTC)
    shifted = dst_ahead(_schedule("30 2 * * *", "America/New_York"), after)
    assert [(o["at"].isoformat(), o["kind"]) for o in shifted[:2]] == [
        ("2027-03-14T03:00:00-04:00", "dst_shifted"),
        ("2028-03-12T03:00:00-04:00", "dst_shifted"),
    ]
    assert "DST gap" in shifted[0]["note"]

    skipped = dst_ahead(_schedule("30 2 * * *", "America/New_York", nonexistent="skip"), after)
    assert (
        skipped[0]["kind"] == "dst_skipped" and skipped[0]["at"].date().isoformat() == "2027-03-14"
    )

    both = dst_ahead(_schedule("30 1 * * *", "America/New_York", ambiguous="both"), after)
    assert (
        both[0]["kind"] == "dst_repeat" and both[0]["at"].isoformat() == "2027-11-07T01:30:00-05:00"
    )

    assert dst_ahead(_schedule("*/15 * * * *", "UTC"), after) == []
    runs = upcoming(_schedule("0 9 * * *", "Europe/Paris"), after, 2)
    assert [r["at"].isoformat() for r in runs] == [
        "2026-11-26T09:00:00+01:00",
        "2026-11-27T09:00:00+01:00",
    ]
