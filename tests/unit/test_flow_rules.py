"""Keyed flow control's pure rules: the key expression language, the rules' JSON, throttle and
debounce timing, the keyed claim's allocation, and how a create's keys are evaluated."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

from duetime.errors import ValidationError
from duetime.flow.keys import KeySource, evaluate, parse_key
from duetime.flow.rules import (
    DEFAULT_UNIQUE_STATES,
    duration_text,
    flow_document,
    flow_rules,
    parse_duration,
    parse_rate,
    rate_text,
    stored_rules,
    unique_rule,
)
from duetime.flow.timing import debounce_due, throttle_slot
from duetime.lifecycle.flow import FlowGate
from duetime.lifecycle.flow import keyed as keyed_task
from duetime.store.core.keyed import (
    KeyHead,
    bucket_writes,
    next_cursor,
    plan_takes,
    refill_after,
    scan_cap,
)
from duetime.types import FlowAsk, FlowRules, NewTask, Queue, QueueSettings, TaskStatus

T0 = datetime(2030, 1, 1, tzinfo=UTC)


def _source(payload: str = "{}", name: str | None = "job", **labels: str) -> KeySource:
    return KeySource(name, labels, payload, None)


# -- key expressions -----------------------------------------------------------------------------


def test_a_key_term_reads_the_name_a_label_or_a_payload_path() -> None:
    payload = '{"customer": {"id": 42, "tier": "gold"}, "items": [1, 2], "none": null}'
    source = _source(payload, tenant="eu-1")
    assert evaluate(("name",), source) == "job"
    assert evaluate(("labels.tenant",), source) == "eu-1"
    assert evaluate(("payload.customer.tier",), source) == "gold"
    assert evaluate(("payload.customer.id",), source) == "42"  # JSON text of a non-string
    assert evaluate(("payload.customer",), source) == '{"id":42,"tier":"gold"}'
    assert evaluate(("payload",), _source('{"b": 1, "a": 2}')) == '{"a":2,"b":1}'


def test_a_key_has_no_value_when_what_it_reads_is_absent_null_or_empty() -> None:
    source = _source('{"a": {"b": null}, "items": [{"x": 1}], "e": ""}', name=None)
    for terms in (("name",), ("labels.x",), ("payload.a.b",), ("payload.items.x",), ("payload.e",),
                  ("payload.zz.y",)):  # fmt: skip
        assert evaluate(terms, source) is None, terms


def test_a_key_of_several_terms_is_their_json_array_and_long_keys_are_digests() -> None:
    source = _source('{"id": 7}', tenant="t")
    assert evaluate(("name", "payload.id", "labels.none"), source) == '["job",7,null]'
    assert evaluate(("labels.none", "payload.nope"), source) is None
    long = evaluate(("payload.s",), _source('{"s": "' + "x" * 500 + '"}'))
    assert long is not None and long.startswith("sha256:") and len(long) == 7 + 64
    assert evaluate(("payload.s",), _source('{"s": "a\\u0000b"}')).startswith("sha256:")  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ("nmae", "key"),
        ("labels.", "key"),
        ("labels.-x", "key"),
        ("payload.a..b", "key"),
        ("payload.12", "key"),
        (["name", "bogus"], "key.1"),
        ([], "key"),
        (["name"] * 5, "key"),
        (7, "key"),
    ],
)
def test_a_bad_key_expression_names_its_field(raw: object, field: str) -> None:
    with pytest.raises(ValidationError) as caught:
        parse_key(raw, "key")
    assert caught.value.field == field


# -- rules -----------------------------------------------------------------------------------


def test_durations_and_rates() -> None:
    assert parse_duration("PT0.5S", "p", 0.001, 10) == 0.5
    assert parse_duration("P1W2DT3H4M5S", "p", 0, 10**7) == 9 * 86400 + 3 * 3600 + 4 * 60 + 5
    for bad in ("P1M", "PT", "1h", "P", "PT1.5M", "P1DT"):
        with pytest.raises(ValidationError):
            parse_duration(bad, "p", 0, 10**7)
    with pytest.raises(ValidationError, match="between"):
        parse_duration("P400D", "p", 1, 366 * 86400)
    assert [duration_text(s) for s in (0.5, 60, 7200, 86400, 61)] == [
        "PT0.5S", "PT1M", "PT2H", "P1D", "PT61S"
    ]  # fmt: skip
    assert parse_rate("10/s", "r") == 10 and parse_rate("600/m", "r") == 10
    assert parse_rate("36/h", "r") == 0.01 and parse_rate(2.5, "r") == 2.5
    assert [rate_text(r) for r in (10, 2.5, 1 / 60, 90 / 3600, 0.3)] == [
        "10/s", "2.5/s", "1/m", "90/h", "18/m"
    ]  # fmt: skip
    for bad in ("10", "0/s", "-1/s", "1/d", True, 2_000_000):
        with pytest.raises(ValidationError):
            parse_rate(bad, "r")


def test_a_bad_rule_names_its_field() -> None:
    cases = [
        ({"key_limit": {"key": "name"}}, "key_limit"),
        ({"key_limit": {"key": "name", "burst": 2, "max_concurrency": 1}}, "key_limit.burst"),
        ({"key_limit": {"key": "name", "rate": "x"}}, "key_limit.rate"),
        ({"unique": {"key": "name"}}, "unique.period"),
        ({"unique": {"key": "name", "period": "PT1H", "states": ["done"]}}, "unique.states.0"),
        ({"debounce": {"key": "name", "period": "PT5S", "max_wait": "PT1S"}}, "debounce.max_wait"),
        ({"debounce": {"key": "bad", "period": "PT5S"}}, "debounce.key"),
        ({"throttle": {"key": "name"}}, "throttle.rate"),
        ({"throttle": {"key": "name", "rate": "1/s", "extra": 1}}, "throttle.extra"),
    ]
    for doc, field in cases:
        with pytest.raises(ValidationError) as caught:
            flow_rules(doc)
        assert caught.value.field == field, doc


def test_rules_round_trip_through_their_json() -> None:
    doc = {
        "key_limit": {"key": ["name", "labels.t"], "rate": "10/s", "burst": 20},
        "unique": {"key": "payload.order", "period": "PT1H"},
        "debounce": {"key": "labels.user", "period": "PT5S"},
        "throttle": {"key": "name", "rate": "2/s"},
    }
    rules, most = flow_rules(doc)
    assert most is None and rules.key_rate == 10 and rules.key_burst == 20
    assert rules.unique is not None and rules.unique.states == DEFAULT_UNIQUE_STATES
    assert rules.debounce is not None and rules.debounce.max_wait_seconds == 50.0
    assert rules.throttle is not None and rules.throttle.burst == 1
    shown = flow_document(rules, None)
    assert shown["key_limit"] == {"key": ["name", "labels.t"], "rate": "10/s", "burst": 20}
    assert stored_rules(shown) == rules
    assert stored_rules({"unique": {"key": "nope"}}) == FlowRules()  # unreadable: no rules


def test_a_tasks_own_window_gives_its_key_or_an_expression() -> None:
    own = unique_rule({"key": "order-1", "period": "PT1M"}, literal=True)
    assert own.literal == "order-1" and own.key == ()
    assert unique_rule({"key_from": "payload.x", "period": "PT1M"}, literal=True).key == (
        "payload.x",
    )
    with pytest.raises(ValidationError, match="key_from"):
        unique_rule({"period": "PT1M"}, literal=True)


# -- timing ------------------------------------------------------------------------------------


def test_throttle_runs_a_burst_then_one_per_slot_and_forgets_an_idle_key() -> None:
    tat = None
    slots = []
    for _ in range(5):
        slot, tat = throttle_slot(tat, T0, rate=2.0, burst=2)
        slots.append((slot - T0).total_seconds())
    assert slots == [0, 0, 0.5, 1.0, 1.5]
    later = T0 + timedelta(seconds=10)
    assert throttle_slot(tat, later, 2.0, 2)[0] == later
    future = T0 + timedelta(seconds=60)  # a create asked to run later runs then, if free
    assert throttle_slot(None, future, 1.0, 1) == (future, future + timedelta(seconds=1))


def test_debounce_moves_to_a_period_after_the_last_create_up_to_max_wait() -> None:
    assert debounce_due(T0 + timedelta(seconds=3), T0, 5, 60) == T0 + timedelta(seconds=8)
    assert debounce_due(T0 + timedelta(seconds=58), T0, 5, 60) == T0 + timedelta(seconds=60)


# -- the keyed claim ---------------------------------------------------------------------------


def _head(
    key: str, tokens: float | None = None, priority: int = 0, due: int = 0, **kw: int
) -> KeyHead:
    at = None if tokens is None else T0
    return KeyHead(key, priority, T0 + timedelta(seconds=due), tokens, at, kw.get("running"))


def test_takes_follow_each_keys_bucket_and_claim_order() -> None:
    heads = [_head("a", due=3), _head("b", 0.5, due=1), _head("c", 2.7, due=2), _head("", due=9)]
    takes, wait = plan_takes(heads, 10, T0, rate=1.0, burst=3, per_key=None)
    assert [(t.key, t.take) for t in takes] == [("c", 2), ("a", 3), ("", 10)]
    assert wait == pytest.approx(0.5)  # b's next token
    short, _ = plan_takes(heads, 2, T0, rate=1.0, burst=3, per_key=None)
    assert [t.key for t in short] == ["c", "a"]  # the first room keys in claim order
    per_key, _ = plan_takes([_head("a", running=1)], 10, T0, 1.0, 3, per_key=2)
    assert [(t.key, t.take) for t in per_key] == [("a", 1)]


def test_buckets_keep_what_a_claim_left_and_when_they_are_full_again() -> None:
    takes, _ = plan_takes([_head("a"), _head("")], 10, T0, rate=2.0, burst=4, per_key=None)
    writes, wait = bucket_writes(takes, Counter({"a": 4, "": 3}), T0, 2.0, 4)
    assert writes == [("a", 0.0, T0 + timedelta(seconds=2))]
    assert wait == pytest.approx(0.5)
    assert refill_after(None, 0.001) == 0.01 and refill_after(None, None) is None


def test_claims_go_round_the_keys_past_the_scan_cap() -> None:
    assert scan_cap(10) == 256 and scan_cap(1000) == 4000
    heads = [_head(f"k{i}") for i in range(3)]
    assert next_cursor(heads, 3) == "k2" and next_cursor(heads, 4) is None


# -- a create's keys ------------------------------------------------------------------------


def test_a_creates_keys_are_evaluated_once_under_its_queues_rules() -> None:
    rules, _ = flow_rules(
        {
            "key_limit": {"key": "payload.customer", "rate": "1/s", "max_concurrency": 2},
            "unique": {"key": "payload.order", "period": "PT1H"},
            "throttle": {"key": "labels.team", "rate": "1/s"},
        }
    )
    new = NewTask(tenant_id="t", target={"type": "worker"}, payload_json='{"customer": "c1"}')
    done = keyed_task(new, rules, per_key=2)
    assert (done.concurrency_key, done.flow_key) == ("c1", "c1")
    assert done.flow is None  # no order, no team: neither rule applies
    given = NewTask(
        tenant_id="t",
        target={"type": "worker"},
        payload_json='{"order": 9}',
        concurrency_key="mine",
        labels={"team": "x"},
    )
    done = keyed_task(given, rules, per_key=2)
    assert (done.concurrency_key, done.flow_key) == ("mine", "mine")
    assert done.flow is not None and done.flow.unique is not None and done.flow.throttle
    assert done.flow.unique[0] == "9" and done.flow.throttle[0] == "x"
    unkeyed = keyed_task(NewTask(tenant_id="t", target={"type": "worker"}), rules, None)
    assert (unkeyed.concurrency_key, unkeyed.flow_key) == (None, "")


def test_a_tasks_own_window_wins_over_its_queues() -> None:
    rules, _ = flow_rules({"unique": {"key": "name", "period": "PT1H"}})
    own = unique_rule({"key": "x", "period": "PT1M", "states": ["ready"]}, literal=True)
    new = NewTask(
        tenant_id="t", target={"type": "worker"}, name="n", flow=FlowAsk(unique=("x", own))
    )
    done = keyed_task(new, rules, None)
    assert done.flow is not None and done.flow.unique == ("x", own)
    assert own.states == (TaskStatus.READY,)


class _Queues:
    """A queue store that counts its reads (the rules cache's only call)."""

    def __init__(self, settings: QueueSettings) -> None:
        self.settings = settings
        self.reads = 0

    async def queue_get(self, tenant_id: str, name: str) -> Queue | None:
        self.reads += 1
        return Queue(tenant_id, name, self.settings, T0)


async def test_a_nodes_rules_are_read_once_a_second_and_at_once_after_a_change() -> None:
    now = [0.0]
    gate = FlowGate(clock=lambda: now[0])
    rules, _ = flow_rules({"key_limit": {"key": "payload.c", "rate": "1/s"}})
    store = _Queues(QueueSettings(flow=rules))
    plain = NewTask(
        tenant_id="t", target={"type": "worker"}, queue="other", payload_json='{"c": 1}'
    )
    keyed_new = NewTask(
        tenant_id="t", target={"type": "worker"}, queue="q", payload_json='{"c": 1}'
    )
    made = await gate.apply(store, "t", [keyed_new, keyed_new, plain])  # type: ignore[arg-type]
    assert [t.flow_key for t in made] == ["1", "1", "1"]  # the fake gives every queue the rule
    assert store.reads == 2  # one read per queue, not per task
    now[0] = 0.5
    await gate.apply(store, "t", [keyed_new])  # type: ignore[arg-type]
    assert store.reads == 2
    gate.forget("t", "q")
    await gate.apply(store, "t", [keyed_new])  # type: ignore[arg-type]
    assert store.reads == 3
    now[0] = 2.0
    store.settings = QueueSettings()
    again = await gate.apply(store, "t", [keyed_new])  # type: ignore[arg-type]
    assert store.reads == 4 and again[0] is keyed_new  # no rules now: the task as it was
