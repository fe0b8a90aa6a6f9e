"""A schedule's timing fields are declared once (:class:`duetime.types.ScheduleTiming`): the
settings a user gives and the spec the fire-time functions read both inherit them."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

from duetime.schedule import ScheduleSpec
from duetime.schedule.config import spec_of
from duetime.types import ScheduleConfig, ScheduleTiming

TIMING = [f.name for f in dataclasses.fields(ScheduleTiming)]


def test_config_and_spec_inherit_the_timing_fields_first() -> None:
    for cls in (ScheduleConfig, ScheduleSpec):
        assert issubclass(cls, ScheduleTiming)
        assert [f.name for f in dataclasses.fields(cls)][: len(TIMING)] == TIMING
    assert [f.name for f in dataclasses.fields(ScheduleSpec)][len(TIMING) :] == ["anchor"]


def test_a_spec_carries_every_timing_field_of_its_config() -> None:
    anchor = datetime(2026, 1, 1, tzinfo=UTC)
    config = ScheduleConfig(
        every="PT90M",
        timezone="Europe/Paris",
        start_at=datetime(2026, 2, 1, tzinfo=UTC),
        end_at=datetime(2027, 2, 1, tzinfo=UTC),
        jitter_seconds=7,
        dst_nonexistent="skip",
        dst_ambiguous="last",
    )
    spec = spec_of(config, anchor)
    assert {n: getattr(spec, n) for n in TIMING} == {n: getattr(config, n) for n in TIMING}
    assert spec.anchor == anchor
    assert spec_of(dataclasses.replace(config, every=None, cron="0 2 * * *"), anchor).anchor is None
