"""The value types: enums, derived properties, JSON round trips, slots and hashing (their fields
are read-only for the type checker: ``tests/static/read_only_values.py``)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from duetime.types import (
    PATCHABLE_STATUSES,
    TERMINAL_STATUSES,
    AttemptOutcome,
    ClaimRequest,
    NewTask,
    RetryPolicy,
    TargetType,
    Task,
    TaskFilter,
    TaskPatch,
    TaskStatus,
)

S = TaskStatus
T0 = datetime(2030, 1, 1, tzinfo=UTC)


def _task(**overrides: object) -> Task:
    fields: dict[str, object] = dict(
        id="00000000-0000-7000-8000-000000000000",
        tenant_id="t",
        name="n",
        queue="default",
        status=S.READY,
        version=1,
        target={"type": "http", "url": "https://example.com/"},
        payload_json='{"a": [1, null]}',
        idempotency_key=None,
        priority=0,
        retry=RetryPolicy(),
        timeout_seconds=30,
        depends_on=(),
        concurrency_key=None,
        labels={},
        attempts=0,
        series_start=0,
        schedule_id=None,
        scheduled_for=None,
        run_at=T0,
        due_at=T0 + timedelta(seconds=5),
        created_at=T0,
        updated_at=T0,
    )
    fields.update(overrides)
    return Task(**fields)  # type: ignore[arg-type]


def test_status_values_and_terminality() -> None:
    assert [s.value for s in S] == [
        "scheduled",
        "blocked",
        "ready",
        "running",
        "retrying",
        "succeeded",
        "failed",
        "cancelled",
    ]
    assert {s for s in S if s.terminal} == {S.SUCCEEDED, S.FAILED, S.CANCELLED}
    assert {S.SUCCEEDED, S.FAILED, S.CANCELLED} == TERMINAL_STATUSES
    assert {S.SCHEDULED, S.BLOCKED, S.READY, S.RETRYING} == PATCHABLE_STATUSES
    assert not (PATCHABLE_STATUSES & TERMINAL_STATUSES) and S.RUNNING not in PATCHABLE_STATUSES
    assert S("ready") is S.READY and str(S.READY) == "ready"


def test_outcome_and_target_values() -> None:
    assert {o.value for o in AttemptOutcome} == {
        "succeeded",
        "failed",
        "timed_out",
        "lease_expired",
    }
    assert {t.value for t in TargetType} == {"http", "amqp", "nats", "redis", "worker"}


def test_retry_policy_defaults_and_json_round_trip() -> None:
    default = RetryPolicy()
    assert default == RetryPolicy(5, 1.0, 3600.0, 2.0, 0.1)
    policy = RetryPolicy(
        max_attempts=3, initial_delay_seconds=0.5, max_delay_seconds=9, multiplier=3, jitter=0
    )
    data = policy.to_json()
    assert data == {
        "max_attempts": 3,
        "initial_delay_seconds": 0.5,
        "max_delay_seconds": 9,
        "multiplier": 3,
        "jitter": 0,
    }
    assert RetryPolicy.from_json(data) == policy
    assert RetryPolicy.from_json(default.to_json()) == default


def test_retry_policy_from_json_rejects_unknown_fields() -> None:
    with pytest.raises(TypeError):
        RetryPolicy.from_json({"max_attempts": 1, "bogus": 2})


def test_task_derived_properties() -> None:
    task = _task(attempts=7, series_start=4)
    assert task.payload == {"a": [1, None]}
    assert task.target_type is TargetType.HTTP
    assert task.attempts_in_series == 3
    assert _task(target={"type": "worker"}).target_type is TargetType.WORKER


@pytest.mark.parametrize("status", list(S))
def test_next_attempt_at_only_while_waiting_to_run(status: TaskStatus) -> None:
    task = _task(status=status)
    if status in (S.SCHEDULED, S.READY, S.RETRYING):
        assert task.next_attempt_at == task.due_at
    else:
        assert task.next_attempt_at is None


def test_task_optional_fields_default_to_empty() -> None:
    task = _task()
    assert task.started_at is None and task.finished_at is None and task.last_error is None
    assert task.result is None and task.lease_id is None and task.lease_expires_at is None
    assert task.worker_id is None and task.cancel_requested is False


def test_new_task_defaults() -> None:
    new = NewTask(tenant_id="t", target={"type": "worker"})
    assert new.payload_json == "null" and new.queue == "default" and new.run_at is None
    assert new.priority == 0 and new.retry == RetryPolicy() and new.timeout_seconds == 30.0
    assert new.depends_on == () and dict(new.labels) == {} and new.idempotency_key is None
    # Mutable defaults are per instance.
    assert NewTask(tenant_id="t", target={}).labels is not new.labels


def test_patch_filter_and_claim_defaults() -> None:
    assert TaskPatch() == TaskPatch(None, None, None, None)
    query = TaskFilter(tenant_id="t")
    assert query.limit == 100 and query.cursor is None and tuple(query.statuses) == ()
    claim = ClaimRequest(worker_id="w", limit=1, target_types=frozenset({TargetType.WORKER}))
    assert claim.lease_seconds is None and claim.lease_grace_seconds == 10.0
    assert claim.queue is None and claim.names is None


@pytest.mark.parametrize(
    "value",
    [
        _task(),
        RetryPolicy(),
        NewTask(tenant_id="t", target={}),
        TaskPatch(),
        TaskFilter(tenant_id="t"),
    ],
)
def test_values_take_no_new_attributes_and_keep_their_fields(value: object) -> None:
    with pytest.raises(AttributeError):
        value.not_a_field = None  # type: ignore[attr-defined]
    assert dataclasses.replace(value) == value


def test_values_hash_by_their_fields_as_frozen_dataclasses_do() -> None:
    assert hash(RetryPolicy(max_attempts=3)) == hash(RetryPolicy(max_attempts=3))
    assert len({RetryPolicy(), RetryPolicy(), RetryPolicy(max_attempts=2)}) == 2
