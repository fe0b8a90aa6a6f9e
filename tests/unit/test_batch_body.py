"""The batch body's plain reading (``duetime.api.batch_body``) agrees with pydantic's.

For any body: when ``TaskBatchCreate`` refuses it, ``parse_batch`` hands it back to pydantic
(None), so the 422 is the one pydantic words; when pydantic accepts it, both readings build the
same ``NewTask`` list (or the same error from the builder: payload size, target check). The same
holds for a single create's body (``parse_single`` against ``TaskCreate``).
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from typing import Any

import pydantic
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from duetime.api.batch_body import parse_batch, parse_single
from duetime.api.convert import TaskBuilder
from duetime.api.schemas import TaskBatchCreate, TaskCreate
from duetime.errors import ValidationError
from duetime.types import NewTask

NOW = datetime(2026, 11, 26, 23, 0, tzinfo=UTC)


class _Clock:
    async def now(self) -> datetime:
        return NOW


def _refuse_private(target: Any) -> None:
    if "internal" in str(target.get("url", "")):
        raise ValueError("private address")


BUILDER = TaskBuilder(64, validate_target=_refuse_private)


def _build(bodies: list[Any], batch: bool = True) -> list[NewTask] | str:
    try:
        return asyncio.run(BUILDER.new_tasks(_Clock(), "t1", bodies, batch=batch))
    except ValidationError as exc:
        return f"{type(exc).__name__}: {exc.field}: {exc.detail}"


def _compare(raw: bytes, *, single: bool = False) -> None:
    """Both readings of a batch body (or, ``single``, of a single create's) agree."""
    try:
        if single:
            models: list[Any] | None = [TaskCreate.model_validate_json(raw)]
        else:
            models = [*TaskBatchCreate.model_validate_json(raw).tasks]
    except pydantic.ValidationError:
        models = None
    fast: list[Any] | None
    if single:
        one = parse_single(raw)
        fast = None if one is None else [one]
    else:
        fast = parse_batch(raw)
    if models is None:
        assert fast is None, raw
        return
    if fast is None:
        return  # read by pydantic: the old path exactly
    assert _build(fast, batch=not single) == _build(models, batch=not single), raw


texts = st.one_of(
    st.text(max_size=5),
    st.sampled_from(["", "a", "default", "q\n", "a" * 129, "x\x85", "é", "a:b.c-d", "-a"]),
)
numbers = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0, 1, 30, 3600, 3601, 0.001, 0.0005, 32767, 32768, -32768, -32769, True]),
)
json_values = st.recursive(
    st.none() | st.booleans() | numbers | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=8,
)
targets = st.one_of(
    st.just({"type": "worker"}),
    st.just({"type": "worker", "url": "http://x"}),
    st.builds(
        lambda url, extra: {"type": "http", "url": url, **extra},
        st.sampled_from(
            [
                "https://example.com/hook",
                "http://internal/hook",
                "ftp://example.com",
                "http://[::1",
                "http:///nohost",
                "https://" + "a" * 2050,
                "",
            ]
        ),
        st.dictionaries(
            st.sampled_from(["method", "headers", "other"]),
            st.sampled_from(["POST", "GET", "post", {}, {"X-A": "1"}, None, 1]),
            max_size=2,
        ),
    ),
    st.just({"type": "amqp", "url": "amqp://h", "routing_key": "k"}),
    st.just({"type": "nope"}),
    json_values,
)
run_ats = st.one_of(
    st.sampled_from(
        [
            "2026-12-01T15:00:00Z",
            "2026-12-01t15:00:00.123456+01:00",
            "2026-12-01 15:00:00z",
            "2026-12-01T15:00:00",
            "1969-12-31T23:59:59Z",
            "9000-01-01T00:00:00Z",
            "2026-02-30T00:00:00Z",
            "soon",
            "2026-12-01T15:00:00Z\n",
        ]
    ),
    numbers,
    st.none(),
)
labels = st.one_of(
    st.dictionaries(st.sampled_from(["team", "a/b", "x:y", "", "Z" * 64]), texts, max_size=3),
    json_values,
)
fields: dict[str, st.SearchStrategy[Any]] = {
    "target": targets,
    "payload": json_values,
    "name": st.one_of(texts, st.none(), numbers),
    "queue": st.one_of(texts, st.none()),
    "run_at": run_ats,
    "priority": numbers,
    "timeout_seconds": st.one_of(numbers, st.none()),
    "labels": labels,
    "concurrency_key": st.one_of(texts, st.none()),
    "idempotency_key": st.one_of(texts, st.none()),
    "delay_seconds": numbers,
    "retry": st.sampled_from([{"max_attempts": 2}, {"bogus": 1}, None]),
    "depends_on": st.sampled_from([[], ["0b5e6c4e-8f0a-4a53-9d43-58c1a4c5e0f1"], ["x"]]),
    "payload_ref": st.sampled_from(["s3://b/o", ""]),
    "unknown": st.just(1),
}
items = (
    st.fixed_dictionaries(
        {"target": targets},
        optional={name: strategy for name, strategy in fields.items() if name != "target"},
    )
    | json_values
)


# Mostly valid items, so that the plain reading accepts many and the built tasks are compared.
good_items = st.fixed_dictionaries(
    {
        "target": st.sampled_from(
            [
                {"type": "worker"},
                {"type": "http", "url": "https://example.com/h"},
                {"type": "http", "url": "http://example.com/h", "method": "PUT", "headers": {}},
                {"type": "http", "url": "http://internal/h"},
            ]
        )
    },
    optional={
        "payload": json_values,
        "name": st.text(min_size=1, max_size=8),
        "queue": st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,5}", fullmatch=True),
        "run_at": st.datetimes(
            min_value=datetime(1970, 1, 2), max_value=datetime(8999, 12, 30), timezones=st.just(UTC)
        ).map(lambda d: d.isoformat()),
        "priority": st.integers(min_value=-32768, max_value=32767),
        "timeout_seconds": st.one_of(
            st.integers(min_value=1, max_value=3600), st.floats(min_value=0.001, max_value=3600)
        ),
        "labels": st.dictionaries(
            st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._/-]{0,4}", fullmatch=True),
            st.text(max_size=5),
            max_size=3,
        ),
        "concurrency_key": st.text(min_size=1, max_size=5) | st.none(),
        "idempotency_key": st.text(min_size=1, max_size=5),
        "delay_seconds": st.floats(min_value=0, max_value=1000),
        "retry": st.just({"max_attempts": 2}),
    },
)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(items, min_size=0, max_size=4))
def test_plain_reading_agrees_with_pydantic(tasks: list[Any]) -> None:
    _compare(json.dumps({"tasks": tasks}).encode())


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(good_items, min_size=1, max_size=4))
def test_plain_reading_builds_the_same_tasks(tasks: list[Any]) -> None:
    _compare(json.dumps({"tasks": tasks}).encode())


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(items, good_items))
def test_a_single_body_is_read_as_pydantic_reads_it(task: Any) -> None:
    _compare(json.dumps(task).encode(), single=True)


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"null",
        b"[]",
        b'{"target": {"type": "worker"}} x',
        b'{"target": {"type": "worker"}, "payload": 18446744073709551616}',
        b'{"target": {"type": "worker"}, "payload": NaN}',
        b'{"target": {"type": "worker"}, "name": "a\\u0000"}',
        b'{"target": {"type": "worker"}, "queue": "b c", "queue": "a"}',
        b'{"target": {"type": "worker"}, "payload": "' + b"x" * 100 + b'"}',
    ],
)
def test_edge_single_bodies_agree(raw: bytes) -> None:
    _compare(raw, single=True)


def test_a_plain_single_body_is_read_without_a_model() -> None:
    raw = b'{"target": {"type": "worker"}, "payload": {"k": 1}, "run_at": "2030-01-01T00:00:00Z"}'
    assert isinstance(parse_single(raw), tuple)
    _compare(raw, single=True)


@pytest.mark.parametrize(
    "raw",
    [
        b'{"tasks": []}',
        b'{"tasks": [{"target": {"type": "worker"}}], "x": 1}',
        b'{"tasks": {"target": {"type": "worker"}}}',
        b'[{"target": {"type": "worker"}}]',
        b'{"tasks": [{"target": {"type": "worker"}, "payload": 18446744073709551616}]}',
        b'{"tasks": [{"target": {"type": "worker"}, "payload": 1e400}]}',
        b'{"tasks": [{"target": {"type": "worker"}, "payload": NaN}]}',
        b'{"tasks": [{"target": {"type": "worker"}, "payload": "\\ud800"}]}',
        b'{"tasks": [{"target": {"type": "worker"}, "name": "a\\u0000"}]}',
        b'{"tasks": [{"target": {"type": "worker"}, "queue": "a", "queue": "b c"}]}',
        b'{"tasks": [{"target": {"type": "worker"}, "queue": "b c", "queue": "a"}]}',
        b'{"tasks": [{"target": {"type": "worker"}, "payload": ' + b"[" * 300 + b"]" * 300 + b"}]}",
        b'{"tasks": [{"target": {"type": "worker"}, "payload": ' + b"[" * 70 + b"]" * 70 + b"}]}",
        b'{"tasks": [{"target": {"type": "worker"}, "payload": "' + b"x" * 100 + b'"}]}',
        b'{"tasks": [{"target": {"type": "worker"}}] ',
        b'{"tasks": [' + b'{"target": {"type": "worker"}},' * 1000 + b"{}]}",
    ],
)
def test_edge_bodies_agree(raw: bytes) -> None:
    _compare(raw)


def test_a_plain_batch_is_read_without_models() -> None:
    raw = json.dumps(
        {
            "tasks": [
                {
                    "target": {"type": "http", "url": "https://example.com/h"},
                    "payload": {"k": [1, 2.5, None]},
                    "name": "send",
                    "queue": "q.1",
                    "run_at": "2026-12-01T16:00:00+01:00",
                    "priority": 3,
                    "timeout_seconds": 5,
                    "labels": {"team": "billing"},
                    "concurrency_key": "c-1",
                },
                {"target": {"type": "worker"}, "retry": {"max_attempts": 2}},
            ]
        }
    ).encode()
    found = parse_batch(raw)
    assert found is not None
    assert isinstance(found[0], tuple)
    assert isinstance(found[1], TaskCreate)
    _compare(raw)


def test_a_batch_checks_each_distinct_plain_target_once() -> None:
    """Items mostly share a target: the network guard runs once per distinct one, and each task
    still gets its own copy of the target as the guard left it."""
    seen: list[Any] = []

    def check(target: Any) -> Any:
        seen.append(dict(target))
        return {**target, "checked": len(seen)}

    hook = {"type": "http", "url": "https://example.com/h"}
    items = [{"target": hook}, {"target": {"type": "worker"}}, {"target": hook}, {"target": hook}]
    found = parse_batch(json.dumps({"tasks": items}).encode())
    assert found is not None
    built = asyncio.run(
        TaskBuilder(64, validate_target=check).new_tasks(_Clock(), "t", found, batch=True)
    )
    assert [t["url"] for t in seen if "url" in t] == ["https://example.com/h"]
    assert len(seen) == 2
    assert [t.target["checked"] for t in built] == [1, 2, 1, 1]
    assert built[0].target == built[2].target and built[0].target is not built[2].target


def test_a_refused_target_names_its_first_item() -> None:
    items = [{"target": {"type": "worker"}}] + [
        {"target": {"type": "http", "url": "http://internal/h"}}
    ] * 2
    found = parse_batch(json.dumps({"tasks": items}).encode())
    assert found is not None
    assert _build(found) == "ValidationError: tasks.1.target.url: private address"
