"""``metrics.observe_many`` gives a histogram the counts and sum one ``observe`` each would."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from duetime import metrics

BOUNDS = (0.005, 0.01, 0.25, 1, 2.5)


def _samples(registry: CollectorRegistry) -> dict[tuple[str, str], float]:
    found = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for sample in family.samples:
            if sample.name.endswith(("_bucket", "_sum", "_count")):
                found[sample.name, sample.labels.get("le", "")] = sample.value
    return found


def _histogram(registry: CollectorRegistry) -> Histogram:
    return Histogram("lag", "a lag", ["queue"], buckets=BOUNDS, registry=registry)


def test_many_at_once_count_as_one_by_one() -> None:
    # Values on the bounds, between them, past the last, zero, repeats.
    values = [0.0, 0.005, 0.0051, 0.01, 0.2, 0.25, 0.9, 1.0, 2.5, 2.6, 400.0, 0.0051, 1e-9]
    one_reg, many_reg = CollectorRegistry(), CollectorRegistry()
    one, many = _histogram(one_reg).labels("q"), _histogram(many_reg).labels("q")
    for value in values:
        one.observe(value)
    metrics.observe_many(many, values)
    metrics.observe_many(many, [])
    expected = _samples(one_reg)
    assert _samples(many_reg) == expected
    assert expected["lag_count", ""] == len(values)


def test_a_recorder_records_each_observation() -> None:
    events: list[metrics.Event] = []
    recorder = metrics._Recorder("duetime_due_lag_seconds", ("q",), events)
    metrics.observe_many(recorder, [0.5, 2.0])
    assert events == [
        ("duetime_due_lag_seconds", ("q",), "observe", 0.5),
        ("duetime_due_lag_seconds", ("q",), "observe", 2.0),
    ]
