"""The store conformance suite: one set of tests that every :class:`~duetime.store.Store` backend
must pass unchanged (the way river's ``riverdrivertest`` serves every driver).

Each test is ``async def test_...(store, clock)``: ``store`` is an open, migrated, empty store whose
time is pinned to ``clock`` (a :class:`~duetime.clock.FakeClock`). A backend's test module runs the
whole suite with::

    from duetime.testing.conformance import *  # noqa: F403

given ``store`` and ``clock`` pytest fixtures. The tests check the sentences of the docstrings in
:mod:`duetime.store.protocols` and nothing they do not say; each test names the contract it checks.

This module is long on purpose: it is a catalogue of contracts, read one test at a time.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from duetime.clock import FakeClock
from duetime.errors import Conflict, NotFound, ValidationError
from duetime.ids import new_id
from duetime.states import after_attempt
from duetime.store.protocols import Leadership, Signal, Store
from duetime.target_types import PUSH_TYPES
from duetime.types import (
    AttemptOutcome,
    ClaimRequest,
    Completion,
    CompletionResult,
    Lease,
    NewTask,
    RetryPolicy,
    TargetType,
    Task,
    TaskFilter,
    TaskPatch,
    TaskStatus,
)

S = TaskStatus
WORKER = {"type": "worker"}
HTTP = {"type": "http", "url": "https://example.com/hook", "method": "POST", "headers": {}}
ALL_TYPES = frozenset(TargetType)
_names = itertools.count(1)


# -- helpers ---------------------------------------------------------------------------------------


def _secs(seconds: float) -> timedelta:
    return timedelta(seconds=seconds)


def _assert_utc(*values: Any) -> None:
    """Every datetime inside the given store results is timezone-aware UTC."""
    for value in values:
        if isinstance(value, datetime):
            assert value.tzinfo is not None, f"naive datetime {value!r}"
            assert value.utcoffset() == timedelta(0), f"not UTC: {value!r}"
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            for f in dataclasses.fields(value):
                _assert_utc(getattr(value, f.name))
        elif isinstance(value, list | tuple):
            _assert_utc(*value)


def new_task(tenant_id: str, **fields: Any) -> NewTask:
    """A :class:`NewTask` for ``tenant_id``: a ``worker`` task with a unique name by default."""
    fields.setdefault("target", WORKER)
    fields.setdefault("name", f"job-{next(_names)}")
    return NewTask(tenant_id=tenant_id, **fields)


async def _tenant(store: Store, name: str = "acme") -> str:
    return (await store.tenant_create(name)).id


async def _create(store: Store, tenant_id: str, **fields: Any) -> Task:
    (created,) = await store.task_create_many([new_task(tenant_id, **fields)])
    assert created.created
    return created.task


async def _get(store: Store, task: Task) -> Task:
    got = await store.task_get(task.tenant_id, task.id)
    assert got is not None, f"task {task.id} vanished"
    return got


async def _claim(
    store: Store,
    limit: int = 100,
    *,
    types: frozenset[TargetType] = ALL_TYPES,
    worker: str = "w1",
    queue: str | None = None,
    names: Sequence[str] | None = None,
    lease_seconds: float | None = 30.0,
    grace: float = 10.0,
) -> list[Lease]:
    return await store.task_claim(
        ClaimRequest(
            worker_id=worker,
            limit=limit,
            target_types=types,
            lease_seconds=lease_seconds,
            lease_grace_seconds=grace,
            queue=queue,
            names=names,
        )
    )


async def _claim_one(store: Store, task: Task, **kw: Any) -> Lease:
    """Claim exactly ``task`` (its name is unique in the test)."""
    assert task.name is not None
    leases = await _claim(store, 1, queue=task.queue, names=[task.name], **kw)
    assert [lease.task.id for lease in leases] == [task.id]
    return leases[0]


def _completion(
    lease: Lease,
    outcome: AttemptOutcome = AttemptOutcome.SUCCEEDED,
    *,
    delay: float | None = None,
    error: str | None = None,
    result_json: str | None = None,
    http_status: int | None = None,
    worker: str | None = "w1",
    duration_ms: float = 12.5,
    logs: str | None = None,
    response: str | None = None,
) -> Completion:
    started = lease.task.started_at or datetime(2000, 1, 1, tzinfo=UTC)
    return Completion(
        task_id=lease.task.id,
        lease_id=lease.lease_id,
        outcome=outcome,
        started_at=started,
        duration_ms=duration_ms,
        result_json=result_json,
        error=error,
        http_status=http_status,
        retry_delay_seconds=delay,
        worker=worker,
        logs=logs,
        response=response,
        status=after_attempt(outcome is AttemptOutcome.SUCCEEDED, delay),
    )


async def _complete(store: Store, completion: Completion) -> CompletionResult:
    (result,) = await store.task_complete_many([completion])
    return result


async def _succeed(store: Store, lease: Lease) -> CompletionResult:
    result = await _complete(store, _completion(lease, result_json='{"ok": true}'))
    assert result.accepted
    return result


async def _fail(store: Store, lease: Lease, delay: float | None = None) -> CompletionResult:
    result = await _complete(
        store, _completion(lease, AttemptOutcome.FAILED, delay=delay, error="boom")
    )
    assert result.accepted
    return result


async def _running(store: Store, tenant_id: str, **fields: Any) -> tuple[Task, Lease]:
    task = await _create(store, tenant_id, **fields)
    return task, await _claim_one(store, task)


async def _in_status(store: Store, tenant_id: str, status: TaskStatus, **fields: Any) -> Task:
    """A fresh task of ``tenant_id`` brought to ``status`` through the protocol."""
    now = await store.now()
    if status is S.SCHEDULED:
        return await _create(store, tenant_id, run_at=now + _secs(3600), **fields)
    if status is S.BLOCKED:
        parent = await _create(store, tenant_id, run_at=now + _secs(3600))
        return await _create(store, tenant_id, depends_on=(parent.id,), **fields)
    task = await _create(store, tenant_id, **fields)
    if status is S.READY:
        return task
    if status is S.CANCELLED:
        return await store.task_cancel(tenant_id, task.id)
    lease = await _claim_one(store, task)
    if status is S.SUCCEEDED:
        await _succeed(store, lease)
    elif status is S.FAILED:
        await _fail(store, lease)
    elif status is S.RETRYING:
        await _fail(store, lease, delay=3600)
    task = await _get(store, task)
    assert task.status is status
    return task


async def _drain(signal: Signal) -> None:
    """Consume pending notifications; the signal must go quiet (``wait`` → False on timeout)."""
    for _ in range(50):
        if not await signal.wait(0.05):
            return
    raise AssertionError("signal never stopped firing")


async def _list(store: Store, tenant_id: str, **filters: Any) -> list[Task]:
    return await store.task_list(TaskFilter(tenant_id=tenant_id, **filters))


# -- life of the store -----------------------------------------------------------------------------


async def test_migrate_when_current_applies_nothing(store: Store, clock: FakeClock) -> None:
    """migrate: returns the versions applied, empty when current; migrations_pending empty."""
    assert await store.migrate() == []
    assert await store.migrations_pending() == []
    assert await store.migrate() == []


async def test_ping_and_now_follow_the_pinned_clock(store: Store, clock: FakeClock) -> None:
    """now(): the pinned test time; datetimes are aware UTC."""
    await store.ping()
    assert await store.now() == clock.now()
    _assert_utc(await store.now())
    clock.advance(90.5)
    assert await store.now() == clock.now()


async def test_close_is_idempotent(store: Store, clock: FakeClock) -> None:
    """close(): idempotent."""
    await store.close()
    await store.close()


# -- tenancy ---------------------------------------------------------------------------------------


async def test_tenant_create_and_get(store: Store, clock: FakeClock) -> None:
    """tenant_create / tenant_get; Conflict if the id exists."""
    tenant = await store.tenant_create("acme")
    assert tenant.name == "acme" and tenant.id
    _assert_utc(tenant)
    assert await store.tenant_get(tenant.id) == tenant
    assert await store.tenant_get("no-such-tenant") is None
    named = await store.tenant_create("Default", tenant_id="default")
    assert named.id == "default" and named.name == "Default"
    assert await store.tenant_get("default") == named
    try:
        await store.tenant_create("again", tenant_id="default")
    except Conflict:
        pass
    else:
        raise AssertionError("a duplicate tenant id must raise Conflict")
    fetched = await store.tenant_get("default")
    assert fetched is not None and fetched.name == "Default"


async def test_tenant_create_makes_first_signing_secret(store: Store, clock: FakeClock) -> None:
    """tenant_create: creates the tenant's first signing secret, live (no expiry)."""
    tenant_id = await _tenant(store)
    secrets = await store.signing_secret_list(tenant_id)
    assert len(secrets) == 1
    (secret,) = secrets
    assert secret.tenant_id == tenant_id and secret.secret and secret.expires_at is None
    _assert_utc(secret)


async def test_api_key_lifecycle(store: Store, clock: FakeClock) -> None:
    """api_key_create / get_by_hash / delete; NotFound for an unknown tenant."""
    tenant_id = await _tenant(store)
    key = await store.api_key_create(tenant_id, "k1", "hash-1")
    assert (key.id, key.tenant_id, key.key_hash) == ("k1", tenant_id, "hash-1")
    _assert_utc(key)
    assert await store.api_key_get_by_hash("hash-1") == key
    assert await store.api_key_get_by_hash("hash-unknown") is None
    assert await store.api_key_delete("k1") is True
    assert await store.api_key_get_by_hash("hash-1") is None
    assert await store.api_key_delete("k1") is False
    try:
        await store.api_key_create("no-such-tenant", "k2", "hash-2")
    except NotFound:
        pass
    else:
        raise AssertionError("a key for an unknown tenant must raise NotFound")
    assert await store.api_key_get_by_hash("hash-2") is None


async def test_signing_secret_rotate_with_overlap(store: Store, clock: FakeClock) -> None:
    """rotate: old live secrets expire overlap seconds from now; both live meanwhile; list drops
    expired ones, oldest first."""
    tenant_id = await _tenant(store)
    (old,) = await store.signing_secret_list(tenant_id)
    clock.advance(5)
    live = await store.signing_secret_rotate(tenant_id, "whsec_bmV3", 100)
    _assert_utc(live)
    assert [s.secret for s in live] == [old.secret, "whsec_bmV3"]
    assert live[0].id == old.id
    assert live[0].expires_at == clock.now() + _secs(100)
    assert live[1].expires_at is None and live[1].tenant_id == tenant_id
    assert await store.signing_secret_list(tenant_id) == live
    clock.advance(99.5)
    assert [s.secret for s in await store.signing_secret_list(tenant_id)] == [
        old.secret,
        "whsec_bmV3",
    ]
    clock.advance(1)
    assert [s.secret for s in await store.signing_secret_list(tenant_id)] == ["whsec_bmV3"]


async def test_signing_secret_rotate_keeps_an_earlier_expiry(
    store: Store, clock: FakeClock
) -> None:
    """rotate: every older live secret expires at now+overlap, but an earlier expiry is kept."""
    tenant_id = await _tenant(store)
    (first,) = await store.signing_secret_list(tenant_id)
    t0 = clock.now()
    await store.signing_secret_rotate(tenant_id, "whsec_c2Vjb25k", 100)
    clock.advance(10)
    live = await store.signing_secret_rotate(tenant_id, "whsec_dGhpcmQ", 1000)
    assert [s.secret for s in live] == [first.secret, "whsec_c2Vjb25k", "whsec_dGhpcmQ"]
    assert live[0].expires_at == t0 + _secs(100)
    assert live[1].expires_at == clock.now() + _secs(1000)
    assert live[2].expires_at is None
    clock.advance(95)
    assert [s.secret for s in await store.signing_secret_list(tenant_id)] == [
        "whsec_c2Vjb25k",
        "whsec_dGhpcmQ",
    ]
    # A shorter overlap brings an expiry forward: "an earlier expiry is kept" cuts both ways.
    live = await store.signing_secret_rotate(tenant_id, "whsec_Zm91cnRo", 0.5)
    assert [s.secret for s in live] == ["whsec_c2Vjb25k", "whsec_dGhpcmQ", "whsec_Zm91cnRo"]
    assert live[0].expires_at == clock.now() + _secs(0.5)
    clock.advance(1)
    assert [s.secret for s in await store.signing_secret_list(tenant_id)] == ["whsec_Zm91cnRo"]


async def test_signing_secrets_are_per_tenant(store: Store, clock: FakeClock) -> None:
    """signing_secret_list / rotate touch only the given tenant's secrets."""
    a = await _tenant(store, "a")
    b = await _tenant(store, "b")
    (b_secret,) = await store.signing_secret_list(b)
    await store.signing_secret_rotate(a, "whsec_YQ", 1)
    clock.advance(2)
    assert [s.secret for s in await store.signing_secret_list(a)] == ["whsec_YQ"]
    assert await store.signing_secret_list(b) == [b_secret]


# -- create ----------------------------------------------------------------------------------------


async def test_create_now_is_ready_and_round_trips(store: Store, clock: FakeClock) -> None:
    """create: run_at None means now → ready; every field as given; get returns the same task."""
    tenant_id = await _tenant(store)
    when = datetime(2029, 12, 31, 23, 0, tzinfo=UTC)
    policy = RetryPolicy(
        max_attempts=3, initial_delay_seconds=2.5, max_delay_seconds=99, multiplier=3, jitter=0
    )
    spec = new_task(
        tenant_id,
        target=HTTP,
        payload_json='{"a": [1, 2, {"b": null}], "c": "é"}',
        name="send-report",
        queue="reports",
        idempotency_key="idem-1",
        priority=7,
        retry=policy,
        timeout_seconds=12.5,
        concurrency_key="customer-42",
        labels={"team": "billing", "env": "prod"},
        schedule_id="sched-1",
        scheduled_for=when,
    )
    (created,) = await store.task_create_many([spec])
    task = created.task
    assert created.created is True
    _assert_utc(task)
    assert task.status is S.READY
    assert task.run_at == clock.now() and task.due_at == clock.now()
    assert task.tenant_id == tenant_id and task.id
    assert dict(task.target) == HTTP and task.target_type is TargetType.HTTP
    assert task.payload == {"a": [1, 2, {"b": None}], "c": "é"}
    assert (task.name, task.queue, task.idempotency_key) == ("send-report", "reports", "idem-1")
    assert (task.priority, task.retry, task.timeout_seconds) == (7, policy, 12.5)
    assert task.concurrency_key == "customer-42"
    assert dict(task.labels) == {"team": "billing", "env": "prod"}
    assert (task.schedule_id, task.scheduled_for) == ("sched-1", when)
    assert task.depends_on == ()
    assert (task.attempts, task.series_start) == (0, 0)
    assert task.lease_id is None and task.lease_expires_at is None and task.worker_id is None
    assert task.cancel_requested is False and task.finished_at is None
    assert await store.task_get(tenant_id, task.id) == task


async def test_create_future_run_at_is_scheduled(store: Store, clock: FakeClock) -> None:
    """create: run_at after now → scheduled; due_at is run_at."""
    tenant_id = await _tenant(store)
    run_at = clock.now() + _secs(60)
    task = await _create(store, tenant_id, run_at=run_at)
    assert task.status is S.SCHEDULED
    assert task.run_at == run_at and task.due_at == run_at
    assert (await _get(store, task)).status is S.SCHEDULED


async def test_create_past_or_present_run_at_is_ready(store: Store, clock: FakeClock) -> None:
    """create: ready when run_at is not after now (past, or exactly now)."""
    tenant_id = await _tenant(store)
    past = await _create(store, tenant_id, run_at=clock.now() - _secs(3600))
    present = await _create(store, tenant_id, run_at=clock.now())
    assert past.status is S.READY and past.run_at == clock.now() - _secs(3600)
    assert present.status is S.READY and present.run_at == clock.now()


async def test_create_many_returns_input_order(store: Store, clock: FakeClock) -> None:
    """create_many: results in input order."""
    tenant_id = await _tenant(store)
    specs = [new_task(tenant_id, name=f"n{i}", priority=i) for i in range(7)]
    results = await store.task_create_many(specs)
    assert [r.task.name for r in results] == [f"n{i}" for i in range(7)]
    assert all(r.created for r in results)
    assert len({r.task.id for r in results}) == 7
    assert len(await _list(store, tenant_id)) == 7


async def test_create_idempotent_hit_returns_existing(store: Store, clock: FakeClock) -> None:
    """create: an existing (tenant, idempotency_key) is not created again; created=False."""
    tenant_id = await _tenant(store)
    first = await _create(store, tenant_id, idempotency_key="k", payload_json='{"v": 1}')
    clock.advance(1)
    (again,) = await store.task_create_many(
        [new_task(tenant_id, idempotency_key="k", payload_json='{"v": 2}')]
    )
    assert again.created is False
    assert again.task == await _get(store, first)
    assert again.task.id == first.id and again.task.payload == {"v": 1}
    assert [t.id for t in await _list(store, tenant_id)] == [first.id]


async def test_create_duplicate_key_inside_one_batch(store: Store, clock: FakeClock) -> None:
    """create: a repeat inside the same batch returns the batch's first task with created=False."""
    tenant_id = await _tenant(store)
    results = await store.task_create_many(
        [
            new_task(tenant_id, idempotency_key="dup", payload_json="1"),
            new_task(tenant_id, payload_json="2"),
            new_task(tenant_id, idempotency_key="dup", payload_json="3"),
        ]
    )
    assert [r.created for r in results] == [True, True, False]
    assert results[2].task.id == results[0].task.id
    assert results[2].task.payload == 1
    assert len(await _list(store, tenant_id)) == 2


async def test_racing_creates_with_one_key_make_one_task(store: Store, clock: FakeClock) -> None:
    """create: concurrent creates with one idempotency key make one task; the others get it back
    with created=False."""
    tenant_id = await _tenant(store)
    results = await asyncio.gather(
        *(
            store.task_create_many([new_task(tenant_id, idempotency_key="race", priority=i)])
            for i in range(4)
        )
    )
    created = [r for (r,) in results]
    assert sum(c.created for c in created) == 1
    assert len({c.task.id for c in created}) == 1
    assert len(await _list(store, tenant_id)) == 1


async def test_idempotency_keys_are_per_tenant(store: Store, clock: FakeClock) -> None:
    """create: the key is scoped to (tenant, key); another tenant's same key is a new task."""
    a = await _tenant(store, "a")
    b = await _tenant(store, "b")
    task_a = await _create(store, a, idempotency_key="shared")
    (created_b,) = await store.task_create_many([new_task(b, idempotency_key="shared")])
    assert created_b.created is True
    assert created_b.task.id != task_a.id and created_b.task.tenant_id == b


async def test_create_unknown_parent_creates_nothing(store: Store, clock: FakeClock) -> None:
    """create: an unknown parent raises ValidationError(field depends_on); nothing is created."""
    tenant_id = await _tenant(store)
    batch = [
        new_task(tenant_id, idempotency_key="first"),
        new_task(tenant_id, depends_on=(new_id(),)),
    ]
    await _expect_depends_on_error(store, batch)
    assert await _list(store, tenant_id) == []
    # The idempotency key was not taken by the rolled-back batch.
    (again,) = await store.task_create_many([new_task(tenant_id, idempotency_key="first")])
    assert again.created is True


async def test_create_other_tenants_parent_is_unknown(store: Store, clock: FakeClock) -> None:
    """create: another tenant's parent is unknown → ValidationError; nothing created."""
    a = await _tenant(store, "a")
    b = await _tenant(store, "b")
    parent = await _create(store, a)
    await _expect_depends_on_error(store, [new_task(b), new_task(b, depends_on=(parent.id,))])
    assert await _list(store, b) == []


async def _expect_depends_on_error(store: Store, batch: list[NewTask]) -> None:
    try:
        await store.task_create_many(batch)
    except ValidationError as exc:
        assert exc.field is not None
        assert exc.field == "depends_on" or exc.field.startswith("depends_on."), exc.field
    else:
        raise AssertionError("an unknown parent must raise ValidationError")


async def test_create_with_unfinished_parent_is_blocked(store: Store, clock: FakeClock) -> None:
    """create: blocked if a parent has not succeeded (any waiting or running parent)."""
    tenant_id = await _tenant(store)
    parents = [
        await _in_status(store, tenant_id, status)
        for status in (S.READY, S.SCHEDULED, S.BLOCKED, S.RETRYING)
    ]
    _, lease = await _running(store, tenant_id)
    parents.append(lease.task)
    succeeded = await _in_status(store, tenant_id, S.SUCCEEDED)
    for parent in parents:
        child = await _create(store, tenant_id, depends_on=(succeeded.id, parent.id))
        assert child.status is S.BLOCKED, parent.status
        assert child.depends_on == (succeeded.id, parent.id)


async def test_create_with_succeeded_parents(store: Store, clock: FakeClock) -> None:
    """create: every parent succeeded → ready (due) or scheduled (future run_at)."""
    tenant_id = await _tenant(store)
    p1 = await _in_status(store, tenant_id, S.SUCCEEDED)
    p2 = await _in_status(store, tenant_id, S.SUCCEEDED)
    now_child = await _create(store, tenant_id, depends_on=(p1.id, p2.id))
    later = clock.now() + _secs(30)
    later_child = await _create(store, tenant_id, depends_on=(p1.id,), run_at=later)
    assert now_child.status is S.READY
    assert later_child.status is S.SCHEDULED and later_child.due_at == later


async def test_create_with_failed_or_cancelled_parent_fails(store: Store, clock: FakeClock) -> None:
    """create: failed if a parent failed or was cancelled (even when others are unfinished)."""
    tenant_id = await _tenant(store)
    failed = await _in_status(store, tenant_id, S.FAILED)
    cancelled = await _in_status(store, tenant_id, S.CANCELLED)
    waiting = await _in_status(store, tenant_id, S.READY)
    for bad in (failed, cancelled):
        child = await _create(store, tenant_id, depends_on=(waiting.id, bad.id))
        assert child.status is S.FAILED, bad.status
        assert (await _get(store, child)).status is S.FAILED


async def test_create_fires_ready_signal(store: Store, clock: FakeClock) -> None:
    """create: fires ready_signal for a ready task; for ready ``worker`` tasks only, it wakes
    the long polls (``wait_after``) and leaves the dispatchers (``wait``) asleep."""
    tenant_id = await _tenant(store)
    signal = store.ready_signal
    await _drain(signal)
    seen = signal.generation
    await _create(store, tenant_id)  # a worker task
    assert await signal.wait_after(seen, 5.0)
    assert not await signal.wait(0.1)
    seen = signal.generation
    await _create(store, tenant_id, target=HTTP)
    assert await signal.wait(5.0)
    assert await signal.wait_after(seen, 0)


async def test_create_scheduled_fires_due_signal(store: Store, clock: FakeClock) -> None:
    """create: fires due_signal for a scheduled task (the first one is the earliest due)."""
    tenant_id = await _tenant(store)
    await _drain(store.due_signal)
    await _create(store, tenant_id, run_at=clock.now() + _secs(5))
    assert await store.due_signal.wait(5.0)


async def test_create_wakes_the_promoter_only_before_its_horizon(
    store: Store, clock: FakeClock
) -> None:
    """create: with ``due_signal.horizon`` set (the promoter is up by then anyway), a task due
    at or after it fires nothing; one due before it, or any once the horizon is cleared, does."""
    tenant_id = await _tenant(store)
    signal = store.due_signal
    signal.horizon = clock.now() + _secs(60)
    try:
        await _drain(signal)
        seen = signal.generation
        await _create(store, tenant_id, run_at=clock.now() + _secs(60))
        await _create(store, tenant_id, run_at=clock.now() + _secs(600))
        assert not await signal.wait(0.1)
        assert signal.generation == seen
        await _create(store, tenant_id, run_at=clock.now() + _secs(59))
        assert await signal.wait(5.0)
    finally:
        signal.horizon = None
    await _create(store, tenant_id, run_at=clock.now() + _secs(600))
    assert await signal.wait(5.0)


async def test_signal_notify_and_wait(store: Store, clock: FakeClock) -> None:
    """Signal: wait returns True when notified since the last wait or during it, else False
    on timeout; notifications may coalesce; wait_after wakes every waiter and consumes nothing."""
    for signal in (store.ready_signal, store.due_signal):
        await check_signal(signal)


async def check_signal(signal: Signal) -> None:
    """The :class:`~duetime.store.protocols.Signal` contract on one signal, by ``notify()``
    alone (also run against :class:`duetime.testing.fakes.FakeSignal`)."""
    await _drain(signal)
    signal.notify()
    signal.notify()
    assert await signal.wait(5.0)
    await _drain(signal)
    waiter = asyncio.ensure_future(signal.wait(5.0))
    await asyncio.sleep(0.05)
    signal.notify()
    assert await waiter
    await _drain(signal)
    assert not await signal.wait(0.05)
    seen = signal.generation
    assert await signal.wait_after(seen, 0.05) is False
    waiters = [asyncio.ensure_future(signal.wait_after(seen, 5.0)) for _ in range(3)]
    await asyncio.sleep(0.01)
    assert not any(w.done() for w in waiters)
    signal.notify()
    assert await asyncio.wait_for(asyncio.gather(*waiters), 5.0) == [True, True, True]
    assert signal.generation != seen
    assert await signal.wait_after(seen, 0) is True  # already moved: no waiting
    assert await signal.wait(0.05) is True  # the flag of ``wait`` was left alone
    await _drain(signal)
    # A wake for the long polls only: wait_after sees it, wait (the dispatchers) does not.
    seen = signal.generation
    sleeper = asyncio.ensure_future(signal.wait(0.2))
    polls = asyncio.ensure_future(signal.wait_after(seen, 5.0))
    await asyncio.sleep(0.01)
    signal.notify(pulls_only=True)
    assert await asyncio.wait_for(polls, 5.0) is True
    assert await sleeper is False
    assert await signal.wait(0.05) is False  # nothing left pending for the next wait either


# -- get and list ----------------------------------------------------------------------------------


async def test_task_get_is_per_tenant(store: Store, clock: FakeClock) -> None:
    """task_get: one task of the tenant, or None (unknown id, or another tenant's)."""
    a = await _tenant(store, "a")
    b = await _tenant(store, "b")
    task = await _create(store, a)
    assert await store.task_get(a, task.id) == task
    assert await store.task_get(b, task.id) is None
    assert await store.task_get(a, new_id()) is None


async def test_list_is_newest_first_by_id(store: Store, clock: FakeClock) -> None:
    """task_list: newest first, by id descending."""
    tenant_id = await _tenant(store)
    ids = []
    for _ in range(4):
        results = await store.task_create_many([new_task(tenant_id) for _ in range(3)])
        ids += [r.task.id for r in results]
        clock.advance(1)
    listed = [t.id for t in await _list(store, tenant_id)]
    assert listed == sorted(ids, reverse=True)


async def test_list_cursor_pages_without_gaps_or_repeats(store: Store, clock: FakeClock) -> None:
    """task_list: limit, and cursor = the last id of the previous page."""
    tenant_id = await _tenant(store)
    other = await _tenant(store, "other")
    await store.task_create_many([new_task(other) for _ in range(5)])
    results = await store.task_create_many([new_task(tenant_id) for _ in range(11)])
    everything = sorted((r.task.id for r in results), reverse=True)
    pages: list[list[str]] = []
    cursor: str | None = None
    while True:
        page = [t.id for t in await _list(store, tenant_id, limit=4, cursor=cursor)]
        assert len(page) <= 4
        if not page:
            break
        pages.append(page)
        cursor = page[-1]
    assert [len(p) for p in pages] == [4, 4, 3]
    assert [i for p in pages for i in p] == everything
    assert [t.id for t in await _list(store, tenant_id, limit=2)] == everything[:2]
    assert await _list(store, tenant_id, cursor=everything[-1]) == []


async def test_list_filters_by_status_list(store: Store, clock: FakeClock) -> None:
    """task_list: statuses matches any of the given statuses."""
    tenant_id = await _tenant(store)
    by_status = {s: await _in_status(store, tenant_id, s) for s in S}
    blocked_parent = (await _get(store, by_status[S.BLOCKED])).depends_on[0]
    running = await _list(store, tenant_id, statuses=[S.RUNNING])
    assert [t.id for t in running] == [by_status[S.RUNNING].id]
    got = await _list(store, tenant_id, statuses=[S.FAILED, S.CANCELLED, S.RETRYING])
    expected = {by_status[s].id for s in (S.FAILED, S.CANCELLED, S.RETRYING)}
    assert {t.id for t in got} == expected
    scheduled = await _list(store, tenant_id, statuses=[S.SCHEDULED])
    assert {t.id for t in scheduled} == {by_status[S.SCHEDULED].id, blocked_parent}
    assert len(await _list(store, tenant_id, statuses=[])) == len(S) + 1


async def test_list_filters_by_queue_name_schedule_and_labels(
    store: Store, clock: FakeClock
) -> None:
    """task_list: queue, name, schedule_id equal; labels must all match."""
    tenant_id = await _tenant(store)
    a = await _create(store, tenant_id, queue="q1", name="x", labels={"team": "t1", "env": "p"})
    b = await _create(store, tenant_id, queue="q1", name="y", labels={"team": "t1"})
    c = await _create(store, tenant_id, queue="q2", name="x", schedule_id="s1")
    d = await _create(store, tenant_id, queue="q2", name="z", schedule_id="s2",
                      labels={"team": "t2", "env": "p"})  # fmt: skip

    async def ids(**filters: Any) -> set[str]:
        return {t.id for t in await _list(store, tenant_id, **filters)}

    assert await ids(queue="q1") == {a.id, b.id}
    assert await ids(name="x") == {a.id, c.id}
    assert await ids(queue="q2", name="x") == {c.id}
    assert await ids(schedule_id="s2") == {d.id}
    assert await ids(labels={"team": "t1"}) == {a.id, b.id}
    assert await ids(labels={"env": "p"}) == {a.id, d.id}
    assert await ids(labels={"team": "t1", "env": "p"}) == {a.id}
    assert await ids(labels={"team": "t1", "env": "q"}) == set()
    assert await ids(queue="q1", labels={"team": "t2"}) == set()
    assert await ids(queue="nope") == set()


async def test_list_run_window_is_inclusive_exclusive(store: Store, clock: FakeClock) -> None:
    """task_list: run_after is inclusive, run_before exclusive, both on run_at."""
    tenant_id = await _tenant(store)
    t0 = clock.now()
    tasks = [await _create(store, tenant_id, run_at=t0 + _secs(10 * i)) for i in range(5)]

    async def ids(**filters: Any) -> list[str]:
        return sorted(t.id for t in await _list(store, tenant_id, **filters))

    def expect(*indexes: int) -> list[str]:
        return sorted(tasks[i].id for i in indexes)

    assert await ids(run_after=t0 + _secs(10)) == expect(1, 2, 3, 4)
    assert await ids(run_before=t0 + _secs(30)) == expect(0, 1, 2)
    assert await ids(run_after=t0 + _secs(10), run_before=t0 + _secs(30)) == expect(1, 2)
    assert await ids(run_after=t0 + _secs(5), run_before=t0 + _secs(15)) == expect(1)
    assert await ids(run_after=t0 + _secs(10), run_before=t0 + _secs(10)) == []


async def test_list_is_per_tenant(store: Store, clock: FakeClock) -> None:
    """task_list: only the query's tenant's tasks, whatever the filters."""
    a = await _tenant(store, "a")
    b = await _tenant(store, "b")
    mine = await _create(store, a, queue="shared", name="same")
    await _create(store, b, queue="shared", name="same")
    assert [t.id for t in await _list(store, a, queue="shared", name="same")] == [mine.id]
    assert len(await _list(store, b)) == 1
    assert await _list(store, await _tenant(store, "c")) == []


# -- update ----------------------------------------------------------------------------------------


async def test_update_payload_priority_labels(store: Store, clock: FakeClock) -> None:
    """task_update: applies the patch; None fields stay as they were."""
    tenant_id = await _tenant(store)
    task = await _create(store, tenant_id, payload_json='{"v": 1}', priority=1, labels={"a": "1"})
    patched = await store.task_update(
        tenant_id, task.id, TaskPatch(payload_json='{"v": 2}', priority=9, labels={"b": "2"})
    )
    assert (
        patched.payload == {"v": 2} and patched.priority == 9 and dict(patched.labels) == {"b": "2"}
    )
    assert patched.run_at == task.run_at and patched.status is S.READY
    assert await _get(store, task) == patched
    again = await store.task_update(tenant_id, task.id, TaskPatch(priority=3))
    assert again.priority == 3 and again.payload == {"v": 2} and dict(again.labels) == {"b": "2"}


async def test_update_run_at_flips_ready_and_scheduled(store: Store, clock: FakeClock) -> None:
    """task_update: run_at moves due_at; ready → scheduled into the future, scheduled → ready when
    due (now or past)."""
    tenant_id = await _tenant(store)
    task = await _create(store, tenant_id)
    later = clock.now() + _secs(600)
    moved = await store.task_update(tenant_id, task.id, TaskPatch(run_at=later))
    assert moved.status is S.SCHEDULED and moved.run_at == later and moved.due_at == later
    now = clock.now()
    back = await store.task_update(tenant_id, task.id, TaskPatch(run_at=now))
    assert back.status is S.READY and back.run_at == now and back.due_at == now
    future = await _create(store, tenant_id, run_at=clock.now() + _secs(60))
    past = clock.now() - _secs(60)
    due = await store.task_update(tenant_id, future.id, TaskPatch(run_at=past))
    assert due.status is S.READY and due.due_at == past
    still = await _create(store, tenant_id, run_at=clock.now() + _secs(60))
    later2 = clock.now() + _secs(120)
    moved2 = await store.task_update(tenant_id, still.id, TaskPatch(run_at=later2))
    assert moved2.status is S.SCHEDULED and moved2.due_at == later2
    assert await store.task_next_due_at() == clock.now() + _secs(120)


async def test_update_run_at_of_retrying_task(store: Store, clock: FakeClock) -> None:
    """task_update: a retrying task patched to a due run_at becomes ready; a future one keeps
    waiting with due_at moved."""
    tenant_id = await _tenant(store)
    task = await _in_status(store, tenant_id, S.RETRYING)
    later = clock.now() + _secs(7200)
    moved = await store.task_update(tenant_id, task.id, TaskPatch(run_at=later))
    assert moved.status in (S.RETRYING, S.SCHEDULED)
    assert moved.due_at == later and moved.run_at == later
    due = await store.task_update(tenant_id, task.id, TaskPatch(run_at=clock.now()))
    assert due.status is S.READY and due.due_at == clock.now()


async def test_update_blocked_task_moves_due_at(store: Store, clock: FakeClock) -> None:
    """task_update: a blocked task stays blocked; its new run_at decides ready vs scheduled on
    release."""
    tenant_id = await _tenant(store)
    parent, lease = await _running(store, tenant_id)
    child = await _create(store, tenant_id, depends_on=(parent.id,))
    later = clock.now() + _secs(300)
    patched = await store.task_update(tenant_id, child.id, TaskPatch(run_at=later, priority=4))
    assert patched.status is S.BLOCKED and patched.due_at == later and patched.priority == 4
    await _succeed(store, lease)
    released = await _get(store, child)
    assert released.status is S.SCHEDULED and released.due_at == later


async def test_update_conflict_outside_waiting_states(store: Store, clock: FakeClock) -> None:
    """task_update: Conflict for running and terminal tasks; nothing changes."""
    tenant_id = await _tenant(store)
    for status in (S.RUNNING, S.SUCCEEDED, S.FAILED, S.CANCELLED):
        task = await _in_status(store, tenant_id, status)
        try:
            await store.task_update(tenant_id, task.id, TaskPatch(priority=99))
        except Conflict:
            pass
        else:
            raise AssertionError(f"patching a {status} task must raise Conflict")
        assert await _get(store, task) == task


async def test_update_not_found(store: Store, clock: FakeClock) -> None:
    """task_update: NotFound for an unknown id or another tenant's task."""
    a = await _tenant(store, "a")
    b = await _tenant(store, "b")
    task = await _create(store, a)
    for tenant_id, task_id in ((b, task.id), (a, new_id())):
        try:
            await store.task_update(tenant_id, task_id, TaskPatch(priority=5))
        except NotFound:
            pass
        else:
            raise AssertionError("must raise NotFound")
    assert (await _get(store, task)).priority == 0


# -- cancel ----------------------------------------------------------------------------------------


async def test_cancel_waiting_task_at_once(store: Store, clock: FakeClock) -> None:
    """task_cancel: scheduled, blocked, ready and retrying tasks are cancelled at once."""
    tenant_id = await _tenant(store)
    cancelled_ids = set()
    for status in (S.SCHEDULED, S.BLOCKED, S.READY, S.RETRYING):
        task = await _in_status(store, tenant_id, status)
        cancelled = await store.task_cancel(tenant_id, task.id)
        assert cancelled.status is S.CANCELLED, status
        assert cancelled.finished_at is not None
        assert await _get(store, task) == cancelled
        cancelled_ids.add(task.id)
    # Nothing cancelled is promoted or claimed later (the blocked task's parent still is).
    clock.advance(10_000)
    await store.task_promote_due(100)
    assert not {lease.task.id for lease in await _claim(store)} & cancelled_ids
    listed = await _list(store, tenant_id, statuses=[S.CANCELLED])
    assert {t.id for t in listed} == cancelled_ids


async def test_cancel_running_then_failure_ends_cancelled(store: Store, clock: FakeClock) -> None:
    """task_cancel on running: records the request; the attempt's end makes it cancelled, even a
    retryable failure, and it is not retried."""
    tenant_id = await _tenant(store)
    task, lease = await _running(store, tenant_id)
    requested = await store.task_cancel(tenant_id, task.id)
    assert requested.status is S.RUNNING and requested.cancel_requested is True
    assert requested.lease_id == lease.lease_id
    result = await _complete(
        store, _completion(lease, AttemptOutcome.FAILED, delay=1.0, error="boom")
    )
    assert result.accepted and result.status is S.CANCELLED
    ended = await _get(store, task)
    assert ended.status is S.CANCELLED and ended.lease_id is None
    assert ended.finished_at is not None
    clock.advance(60)
    assert await store.task_promote_due(100) == 0
    assert await _claim(store) == []
    assert (await _get(store, task)).status is S.CANCELLED
    (attempt,) = await store.attempt_list(tenant_id, task.id)
    assert attempt.outcome is AttemptOutcome.FAILED


async def test_cancel_running_then_success_ends_succeeded(store: Store, clock: FakeClock) -> None:
    """task_cancel on running: a succeeding attempt makes it succeeded (the work was done)."""
    tenant_id = await _tenant(store)
    task, lease = await _running(store, tenant_id)
    child = await _create(store, tenant_id, depends_on=(task.id,))
    await store.task_cancel(tenant_id, task.id)
    result = await _succeed(store, lease)
    assert result.status is S.SUCCEEDED
    assert (await _get(store, task)).status is S.SUCCEEDED
    assert (await _get(store, child)).status is S.READY


async def test_cancel_running_then_lease_expiry_ends_cancelled(
    store: Store, clock: FakeClock
) -> None:
    """A cancel-requested task whose lease expires ends cancelled when the reaper completes it."""
    tenant_id = await _tenant(store)
    task, _ = await _running(store, tenant_id)
    await store.task_cancel(tenant_id, task.id)
    clock.advance(31)
    (expired,) = await store.task_expired_leases(10)
    result = await _complete(
        store, _completion(expired, AttemptOutcome.LEASE_EXPIRED, delay=1.0, error="expired")
    )
    assert result.accepted and result.status is S.CANCELLED
    assert (await _get(store, task)).status is S.CANCELLED


async def test_cancel_terminal_is_conflict(store: Store, clock: FakeClock) -> None:
    """task_cancel: Conflict on a terminal task; nothing changes."""
    tenant_id = await _tenant(store)
    for status in (S.SUCCEEDED, S.FAILED, S.CANCELLED):
        task = await _in_status(store, tenant_id, status)
        try:
            await store.task_cancel(tenant_id, task.id)
        except Conflict:
            pass
        else:
            raise AssertionError(f"cancelling a {status} task must raise Conflict")
        assert await _get(store, task) == task


async def test_cancel_not_found(store: Store, clock: FakeClock) -> None:
    """task_cancel: NotFound for an unknown id or another tenant's task."""
    a = await _tenant(store, "a")
    b = await _tenant(store, "b")
    task = await _create(store, a)
    for tenant_id, task_id in ((b, task.id), (a, new_id())):
        try:
            await store.task_cancel(tenant_id, task_id)
        except NotFound:
            pass
        else:
            raise AssertionError("must raise NotFound")
    assert (await _get(store, task)).status is S.READY


async def test_cancel_fails_dependents_transitively(store: Store, clock: FakeClock) -> None:
    """task_cancel: dependents of a task cancelled here fail, and theirs in turn."""
    tenant_id = await _tenant(store)
    a = await _create(store, tenant_id, run_at=clock.now() + _secs(60))
    b = await _create(store, tenant_id, depends_on=(a.id,))
    c = await _create(store, tenant_id, depends_on=(b.id,))
    other = await _create(store, tenant_id)
    d = await _create(store, tenant_id, depends_on=(other.id,))
    await store.task_cancel(tenant_id, a.id)
    assert (await _get(store, b)).status is S.FAILED
    assert (await _get(store, c)).status is S.FAILED
    assert (await _get(store, d)).status is S.BLOCKED


# -- retry (dead-letter replay) --------------------------------------------------------------------


async def test_retry_failed_task_starts_a_new_series(store: Store, clock: FakeClock) -> None:
    """task_retry: failed → ready now, series_start = attempts, errors cleared."""
    tenant_id = await _tenant(store)
    task = await _in_status(store, tenant_id, S.FAILED, retry=RetryPolicy(max_attempts=1))
    assert task.last_error == "boom" and task.attempts == 1
    clock.advance(100)
    replayed = await store.task_retry(tenant_id, task.id)
    assert replayed.status is S.READY
    assert replayed.series_start == 1 and replayed.attempts == 1
    assert replayed.attempts_in_series == 0
    assert replayed.last_error is None
    assert replayed.due_at <= clock.now()
    assert await _get(store, task) == replayed
    lease = await _claim_one(store, task)
    assert lease.attempt == 2
    claimed = await _get(store, task)
    assert claimed.attempts == 2 and claimed.series_start == 1 and claimed.attempts_in_series == 1
    await _succeed(store, lease)
    assert [a.number for a in await store.attempt_list(tenant_id, task.id)] == [1, 2]


async def test_retry_cancelled_task(store: Store, clock: FakeClock) -> None:
    """task_retry: a cancelled task is replayed too; a cancel requested before is not carried
    into the new series."""
    tenant_id = await _tenant(store)
    waiting = await _in_status(store, tenant_id, S.CANCELLED)
    assert (await store.task_retry(tenant_id, waiting.id)).status is S.READY
    task, lease = await _running(store, tenant_id)
    await store.task_cancel(tenant_id, task.id)
    await _fail(store, lease, delay=1.0)
    replayed = await store.task_retry(tenant_id, task.id)
    assert replayed.status is S.READY and replayed.series_start == 1
    lease2 = await _claim_one(store, task)
    result = await _fail(store, lease2, delay=5.0)
    assert result.status is S.RETRYING


async def test_retry_conflict_otherwise(store: Store, clock: FakeClock) -> None:
    """task_retry: Conflict unless failed or cancelled; nothing changes."""
    tenant_id = await _tenant(store)
    for status in (S.SCHEDULED, S.BLOCKED, S.READY, S.RUNNING, S.RETRYING, S.SUCCEEDED):
        task = await _in_status(store, tenant_id, status)
        try:
            await store.task_retry(tenant_id, task.id)
        except Conflict:
            pass
        else:
            raise AssertionError(f"retrying a {status} task must raise Conflict")
        assert await _get(store, task) == task


async def test_retry_not_found(store: Store, clock: FakeClock) -> None:
    """task_retry: NotFound for an unknown id or another tenant's task."""
    a = await _tenant(store, "a")
    b = await _tenant(store, "b")
    task = await _in_status(store, a, S.FAILED)
    for tenant_id, task_id in ((b, task.id), (a, new_id())):
        try:
            await store.task_retry(tenant_id, task_id)
        except NotFound:
            pass
        else:
            raise AssertionError("must raise NotFound")
    assert (await _get(store, task)).status is S.FAILED


async def test_retry_fires_ready_signal(store: Store, clock: FakeClock) -> None:
    """ready_signal fires when a retry makes a task ready."""
    tenant_id = await _tenant(store)
    task = await _in_status(store, tenant_id, S.FAILED)
    await _drain(store.ready_signal)
    await store.task_retry(tenant_id, task.id)
    assert await store.ready_signal.wait(5.0)


async def test_attempt_list_is_per_tenant(store: Store, clock: FakeClock) -> None:
    """attempt_list: NotFound if the task is not the tenant's; [] before any attempt."""
    a = await _tenant(store, "a")
    b = await _tenant(store, "b")
    task = await _create(store, a)
    assert await store.attempt_list(a, task.id) == []
    for tenant_id, task_id in ((b, task.id), (a, new_id())):
        try:
            await store.attempt_list(tenant_id, task_id)
        except NotFound:
            pass
        else:
            raise AssertionError("must raise NotFound")


# -- promote ---------------------------------------------------------------------------------------


async def test_promote_moves_only_due_earliest_first(store: Store, clock: FakeClock) -> None:
    """task_promote_due: only due scheduled tasks, earliest due_at first, at most limit; returns
    how many moved."""
    tenant_id = await _tenant(store)
    t0 = clock.now()
    offsets = [30, 10, 20, 40, 100]
    tasks = {o: await _create(store, tenant_id, run_at=t0 + _secs(o)) for o in offsets}
    assert await store.task_promote_due(100) == 0
    clock.advance(40)  # 10, 20, 30 are past; 40 is due exactly now; 100 is not
    assert await store.task_promote_due(2) == 2
    status = {o: (await _get(store, t)).status for o, t in tasks.items()}
    assert status == {10: S.READY, 20: S.READY, 30: S.SCHEDULED, 40: S.SCHEDULED, 100: S.SCHEDULED}
    assert await store.task_promote_due(100) == 2
    assert (await _get(store, tasks[40])).status is S.READY
    assert (await _get(store, tasks[100])).status is S.SCHEDULED
    assert await store.task_promote_due(100) == 0


async def test_promote_moves_retrying_after_backoff(store: Store, clock: FakeClock) -> None:
    """task_promote_due: retrying tasks too, once their due_at has come; not blocked/ready."""
    tenant_id = await _tenant(store)
    _, lease = await _running(store, tenant_id)
    await _fail(store, lease, delay=15)
    await _in_status(store, tenant_id, S.BLOCKED)  # its parent is scheduled an hour out
    await _create(store, tenant_id)
    clock.advance(14.5)
    assert await store.task_promote_due(100) == 0
    clock.advance(1)
    assert await store.task_promote_due(100) == 1
    assert (await _get(store, lease.task)).status is S.READY


async def test_promote_fires_ready_signal(store: Store, clock: FakeClock) -> None:
    """task_promote_due: fires ready_signal when any task moved."""
    tenant_id = await _tenant(store)
    await _create(store, tenant_id, run_at=clock.now() + _secs(5))
    clock.advance(5)
    await _drain(store.ready_signal)
    assert await store.task_promote_due(10) == 1
    assert await store.ready_signal.wait(5.0)


async def test_due_ids_and_promote_by_id(store: Store, clock: FakeClock) -> None:
    """task_due_ids: the ids task_promote_due would move, earliest first, at most limit, read
    only. task_promote: moves only the given tasks that are still due scheduled/retrying ones
    (unknown or malformed ids and others are left alone); returns how many; fires
    ready_signal."""
    tenant_id = await _tenant(store)
    t0 = clock.now()
    tasks = {o: await _create(store, tenant_id, run_at=t0 + _secs(o)) for o in (30, 10, 20, 100)}
    ready = await _create(store, tenant_id)
    clock.advance(40)
    assert await store.task_due_ids(2) == [tasks[10].id, tasks[20].id]
    assert await store.task_due_ids(100) == [tasks[10].id, tasks[20].id, tasks[30].id]
    assert (await _get(store, tasks[10])).status is S.SCHEDULED
    await _drain(store.ready_signal)
    wanted = [tasks[20].id, tasks[100].id, ready.id, new_id(), "not-an-id"]
    assert await store.task_promote(wanted) == 1
    assert await store.ready_signal.wait(5.0)
    status = {o: (await _get(store, t)).status for o, t in tasks.items()}
    assert status == {10: S.SCHEDULED, 20: S.READY, 30: S.SCHEDULED, 100: S.SCHEDULED}
    assert await store.task_promote([tasks[20].id]) == 0
    assert await store.task_promote([]) == 0
    assert await store.task_due_ids(100) == [tasks[10].id, tasks[30].id]


async def test_next_due_at(store: Store, clock: FakeClock) -> None:
    """task_next_due_at: earliest due_at among scheduled/retrying tasks, or None."""
    tenant_id = await _tenant(store)
    assert await store.task_next_due_at() is None
    await _create(store, tenant_id, run_at=clock.now() - _secs(50))  # ready: not counted
    assert await store.task_next_due_at() is None
    await _create(store, tenant_id, run_at=clock.now() + _secs(50))
    assert await store.task_next_due_at() == clock.now() + _secs(50)
    _, lease = await _running(store, tenant_id)
    await _fail(store, lease, delay=20)
    nxt = await store.task_next_due_at()
    assert nxt == clock.now() + _secs(20)
    _assert_utc(nxt)


# -- claim -----------------------------------------------------------------------------------------


async def test_claim_priority_then_due_order(store: Store, clock: FakeClock) -> None:
    """task_claim: highest priority first, then earliest due_at; up to limit."""
    tenant_id = await _tenant(store)
    t0 = clock.now()
    specs = {
        "p0-old": (0, -30),
        "p0-new": (0, -10),
        "p5-new": (5, -5),
        "p5-old": (5, -50),
        "p-1": (-1, -100),
        "p9": (9, 0),
    }
    for name, (priority, offset) in specs.items():
        await _create(store, tenant_id, name=name, priority=priority, run_at=t0 + _secs(offset))
    first = await _claim(store, 2)
    assert [lease.task.name for lease in first] == ["p9", "p5-old"]
    rest = await _claim(store, 10)
    assert [lease.task.name for lease in rest] == ["p5-new", "p0-old", "p0-new", "p-1"]
    assert await _claim(store, 10) == []


async def test_claim_only_takes_ready_tasks(store: Store, clock: FakeClock) -> None:
    """task_claim: only ready tasks; never scheduled, blocked, retrying or finished ones."""
    tenant_id = await _tenant(store)
    for status in (S.SCHEDULED, S.BLOCKED, S.RETRYING, S.SUCCEEDED, S.FAILED, S.CANCELLED):
        await _in_status(store, tenant_id, status)
    assert await _claim(store) == []
    ready = await _create(store, tenant_id)
    assert [lease.task.id for lease in await _claim(store)] == [ready.id]


async def test_claim_filters_target_types(store: Store, clock: FakeClock) -> None:
    """task_claim: target_types picks push deliveries or worker tasks."""
    tenant_id = await _tenant(store)
    worker = await _create(store, tenant_id, target=WORKER)
    push = [
        await _create(store, tenant_id, target=HTTP),
        await _create(store, tenant_id, target={"type": "amqp", "url": "amqp://127.0.0.1/",
                                                "exchange": "x", "routing_key": "k"}),
        await _create(store, tenant_id, target={"type": "nats", "url": "nats://127.0.0.1",
                                                "subject": "s"}),
        await _create(store, tenant_id, target={"type": "redis", "url": "redis://127.0.0.1",
                                                "stream": "s"}),
    ]  # fmt: skip
    only_http = await _claim(store, types=frozenset({TargetType.HTTP}))
    assert [lease.task.target_type for lease in only_http] == [TargetType.HTTP]
    pushed = await _claim(store, types=PUSH_TYPES)
    assert {lease.task.id for lease in pushed} | {only_http[0].task.id} == {t.id for t in push}
    leases = await _claim(store, types=frozenset({TargetType.WORKER}))
    assert [lease.task.id for lease in leases] == [worker.id]


async def test_claim_filters_queue_and_names(store: Store, clock: FakeClock) -> None:
    """task_claim: queue and names narrow the claim; None means any."""
    tenant_id = await _tenant(store)
    a = await _create(store, tenant_id, queue="q1", name="a")
    b = await _create(store, tenant_id, queue="q1", name="b")
    c = await _create(store, tenant_id, queue="q2", name="a")
    d = await _create(store, tenant_id, queue="q2", name="c")
    assert [x.task.id for x in await _claim(store, queue="q3")] == []
    assert [x.task.id for x in await _claim(store, queue="q1", names=["a"])] == [a.id]
    assert {x.task.id for x in await _claim(store, names=["a", "c"])} == {c.id, d.id}
    assert [x.task.id for x in await _claim(store, queue="q1")] == [b.id]


async def test_claim_sets_lease_fields(store: Store, clock: FakeClock) -> None:
    """task_claim: running, fresh lease_id, attempts+1, started_at = now, worker_id; the lease
    lasts lease_seconds."""
    tenant_id = await _tenant(store)
    task = await _create(store, tenant_id, run_at=clock.now() - _secs(5))
    clock.advance(3)
    (lease,) = await _claim(store, worker="worker-7", lease_seconds=45.5)
    _assert_utc(lease)
    assert lease.task.id == task.id
    assert lease.attempt == 1
    assert lease.lease_expires_at == clock.now() + _secs(45.5)
    got = await _get(store, task)
    assert got.status is S.RUNNING and got.attempts == 1
    assert got.lease_id == lease.lease_id and got.lease_expires_at == lease.lease_expires_at
    assert got.started_at == clock.now() and got.worker_id == "worker-7"
    assert lease.task.status is S.RUNNING and lease.task.attempts == 1
    assert lease.task.lease_id == lease.lease_id and lease.task.started_at == clock.now()
    assert lease.task.worker_id == "worker-7"


async def test_claim_default_lease_is_timeout_plus_grace(store: Store, clock: FakeClock) -> None:
    """task_claim: lease_seconds None → the task's timeout_seconds plus lease_grace_seconds."""
    tenant_id = await _tenant(store)
    await _create(store, tenant_id, timeout_seconds=12.5, priority=1)
    await _create(store, tenant_id, timeout_seconds=100)
    leases = await _claim(store, lease_seconds=None, grace=7)
    assert [x.lease_expires_at for x in leases] == [
        clock.now() + _secs(19.5),
        clock.now() + _secs(107),
    ]


async def test_claim_never_hands_out_a_task_twice(store: Store, clock: FakeClock) -> None:
    """task_claim: never a task another claimer holds, sequentially or concurrently; fresh lease
    ids."""
    tenant_id = await _tenant(store)
    ids = {
        r.task.id for r in await store.task_create_many([new_task(tenant_id) for _ in range(12)])
    }
    batches = await asyncio.gather(*(_claim(store, 3, worker=f"w{i}") for i in range(3)))
    claimed = [lease for batch in batches for lease in batch]
    assert all(len(batch) <= 3 for batch in batches)
    claimed += await _claim(store, 100)
    assert sorted(x.task.id for x in claimed) == sorted(ids)
    assert len({x.lease_id for x in claimed}) == len(claimed)
    assert await _claim(store, 100) == []


async def test_claim_gives_a_reclaimed_task_a_fresh_lease(store: Store, clock: FakeClock) -> None:
    """task_claim: a task claimed again (after a retry) gets a new lease_id and attempts+1."""
    tenant_id = await _tenant(store)
    task, first = await _running(store, tenant_id)
    await _fail(store, first, delay=0)
    assert await store.task_promote_due(10) == 1
    second = await _claim_one(store, task)
    assert second.lease_id != first.lease_id and second.attempt == 2
    assert (await _get(store, task)).attempts == 2


# -- complete --------------------------------------------------------------------------------------


async def test_complete_success(store: Store, clock: FakeClock) -> None:
    """complete_many: outcome succeeded → succeeded; one attempt row with the completion's data,
    finished at the store's now; the lease is gone."""
    tenant_id = await _tenant(store)
    task, lease = await _running(store, tenant_id)
    started = (await _get(store, task)).started_at
    clock.advance(2)
    completion = _completion(
        lease, result_json='{"answer": 42}', http_status=200, worker="w9", duration_ms=1999.5
    )
    (result,) = await store.task_complete_many([completion])
    assert (result.task_id, result.lease_id) == (task.id, lease.lease_id)
    assert result.accepted is True and result.status is S.SUCCEEDED
    done = await _get(store, task)
    _assert_utc(done)
    assert done.status is S.SUCCEEDED and done.result == {"answer": 42}
    assert done.lease_id is None and done.lease_expires_at is None
    assert done.finished_at is not None and done.attempts == 1
    (attempt,) = await store.attempt_list(tenant_id, task.id)
    _assert_utc(attempt)
    assert attempt.task_id == task.id and attempt.number == 1
    assert attempt.outcome is AttemptOutcome.SUCCEEDED
    assert attempt.started_at == started == completion.started_at
    assert attempt.finished_at == clock.now()
    assert (attempt.error, attempt.http_status, attempt.worker) == (None, 200, "w9")
    assert attempt.duration_ms == 1999.5


async def test_complete_retryable_failure_waits_the_delay(store: Store, clock: FakeClock) -> None:
    """complete_many: a failure with retry_delay_seconds → retrying, due_at = now + delay."""
    tenant_id = await _tenant(store)
    task, lease = await _running(store, tenant_id)
    clock.advance(1)
    result = await _complete(
        store,
        _completion(lease, AttemptOutcome.FAILED, delay=37.5, error="HTTP 503", http_status=503),
    )
    assert result.accepted and result.status is S.RETRYING
    waiting = await _get(store, task)
    assert waiting.status is S.RETRYING and waiting.due_at == clock.now() + _secs(37.5)
    assert waiting.last_error == "HTTP 503" and waiting.lease_id is None
    (attempt,) = await store.attempt_list(tenant_id, task.id)
    assert attempt.outcome is AttemptOutcome.FAILED and attempt.error == "HTTP 503"
    assert attempt.http_status == 503
    assert await store.task_next_due_at() == clock.now() + _secs(37.5)


async def test_complete_timed_out_can_retry(store: Store, clock: FakeClock) -> None:
    """complete_many: any non-success outcome with a delay retries; the row keeps the outcome."""
    tenant_id = await _tenant(store)
    task, lease = await _running(store, tenant_id)
    result = await _complete(
        store, _completion(lease, AttemptOutcome.TIMED_OUT, delay=5, error="timed out")
    )
    assert result.status is S.RETRYING
    (attempt,) = await store.attempt_list(tenant_id, task.id)
    assert attempt.outcome is AttemptOutcome.TIMED_OUT


async def test_complete_final_failure(store: Store, clock: FakeClock) -> None:
    """complete_many: a failure without a delay → failed (the dead-letter set)."""
    tenant_id = await _tenant(store)
    task, lease = await _running(store, tenant_id)
    result = await _complete(
        store, _completion(lease, AttemptOutcome.FAILED, error="HTTP 400", http_status=400)
    )
    assert result.accepted and result.status is S.FAILED
    dead = await _get(store, task)
    assert dead.status is S.FAILED and dead.last_error == "HTTP 400"
    assert dead.finished_at is not None and dead.lease_id is None
    assert [t.id for t in await _list(store, tenant_id, statuses=[S.FAILED])] == [task.id]


async def test_complete_with_stale_lease_changes_nothing(store: Store, clock: FakeClock) -> None:
    """complete_many: a lease that is not current gives accepted=False and changes nothing:
    an unknown lease id, an already-completed lease, a task that is not running."""
    tenant_id = await _tenant(store)
    task, lease = await _running(store, tenant_id)
    before = await _get(store, task)
    forged = dataclasses.replace(lease, lease_id=new_id())
    result = await _complete(store, _completion(forged, AttemptOutcome.FAILED, error="x"))
    assert result.accepted is False and (result.task_id, result.lease_id) == (
        task.id,
        forged.lease_id,
    )
    assert await _get(store, task) == before
    assert await store.attempt_list(tenant_id, task.id) == []
    await _succeed(store, lease)
    done = await _get(store, task)
    again = await _complete(store, _completion(lease, AttemptOutcome.FAILED, delay=1, error="x"))
    assert again.accepted is False
    assert await _get(store, task) == done
    assert len(await store.attempt_list(tenant_id, task.id)) == 1
    waiting = await _create(store, tenant_id, run_at=clock.now() + _secs(60))
    ghost = Completion(
        task_id=waiting.id,
        lease_id=new_id(),
        outcome=AttemptOutcome.SUCCEEDED,
        started_at=clock.now(),
        duration_ms=1,
        status=TaskStatus.SUCCEEDED,
    )
    assert (await _complete(store, ghost)).accepted is False
    assert await _get(store, waiting) == waiting


async def test_complete_many_mixes_good_and_stale_in_input_order(
    store: Store, clock: FakeClock
) -> None:
    """complete_many: results in input order; each completion fenced on its own (a repeat of the
    same lease inside one batch is stale)."""
    tenant_id = await _tenant(store)
    leases = [(await _running(store, tenant_id))[1] for _ in range(4)]
    stale = dataclasses.replace(leases[1], lease_id=new_id())
    completions = [
        _completion(leases[3], AttemptOutcome.FAILED, error="e3"),
        _completion(stale, AttemptOutcome.FAILED, error="stale"),
        _completion(leases[0], result_json="1"),
        _completion(leases[1], AttemptOutcome.FAILED, delay=9, error="e1"),
        _completion(leases[0], AttemptOutcome.FAILED, error="repeat"),
        _completion(leases[2], AttemptOutcome.LEASE_EXPIRED, delay=3, error="e2"),
    ]
    clock.set(max(lease.lease_expires_at for lease in leases))  # let the reaper's one count
    results = await store.task_complete_many(completions)
    assert [(r.task_id, r.lease_id) for r in results] == [
        (c.task_id, c.lease_id) for c in completions
    ]
    assert [r.accepted for r in results] == [True, False, True, True, False, True]
    accepted = [r.status for r in results if r.accepted]
    assert accepted == [S.FAILED, S.SUCCEEDED, S.RETRYING, S.RETRYING]
    statuses = [(await _get(store, x.task)).status for x in leases]
    assert statuses == [S.SUCCEEDED, S.RETRYING, S.RETRYING, S.FAILED]
    for lease, outcome in zip(
        leases,
        [AttemptOutcome.SUCCEEDED, AttemptOutcome.FAILED, AttemptOutcome.LEASE_EXPIRED,
         AttemptOutcome.FAILED],
        strict=True,
    ):  # fmt: skip
        (attempt,) = await store.attempt_list(tenant_id, lease.task.id)
        assert attempt.outcome is outcome and attempt.number == 1


async def test_attempt_rows_number_every_attempt(store: Store, clock: FakeClock) -> None:
    """attempt_list: every attempt, by number; numbers follow attempts."""
    tenant_id = await _tenant(store)
    task = await _create(store, tenant_id)
    outcomes = [AttemptOutcome.FAILED, AttemptOutcome.TIMED_OUT, AttemptOutcome.LEASE_EXPIRED]
    for n, outcome in enumerate(outcomes, start=1):
        lease = await _claim_one(store, task)
        assert lease.attempt == n
        if outcome is AttemptOutcome.LEASE_EXPIRED:  # only an expired lease can end so
            clock.set(lease.lease_expires_at)
        await _complete(store, _completion(lease, outcome, delay=0, error=f"e{n}"))
        assert await store.task_promote_due(10) == 1
    lease = await _claim_one(store, task)
    await _succeed(store, lease)
    attempts = await store.attempt_list(tenant_id, task.id)
    assert [a.number for a in attempts] == [1, 2, 3, 4]
    assert [a.outcome for a in attempts] == [*outcomes, AttemptOutcome.SUCCEEDED]
    assert [a.error for a in attempts] == ["e1", "e2", "e3", None]
    assert (await _get(store, task)).attempts == 4


async def test_success_releases_dependents_transitively(store: Store, clock: FakeClock) -> None:
    """complete_many: a child whose every parent succeeded is released (ready, or scheduled when
    not yet due); A→B→C moves one generation per success; ready_signal fires."""
    tenant_id = await _tenant(store)
    a = await _create(store, tenant_id)
    other = await _create(store, tenant_id)
    b = await _create(store, tenant_id, depends_on=(a.id,))
    c = await _create(store, tenant_id, depends_on=(b.id,))
    both = await _create(store, tenant_id, depends_on=(a.id, other.id))
    later = await _create(store, tenant_id, depends_on=(a.id,), run_at=clock.now() + _secs(90))
    await _drain(store.ready_signal)
    await _succeed(store, await _claim_one(store, a))
    assert await store.ready_signal.wait(5.0)
    assert (await _get(store, b)).status is S.READY
    assert (await _get(store, c)).status is S.BLOCKED
    assert (await _get(store, both)).status is S.BLOCKED
    assert (await _get(store, later)).status is S.SCHEDULED
    await _succeed(store, await _claim_one(store, b))
    assert (await _get(store, c)).status is S.READY
    await _succeed(store, await _claim_one(store, other))
    assert (await _get(store, both)).status is S.READY


async def test_failure_fails_dependents_transitively(store: Store, clock: FakeClock) -> None:
    """complete_many: a final failure fails blocked dependents and theirs (A→B→C); a retry does
    not."""
    tenant_id = await _tenant(store)
    a = await _create(store, tenant_id)
    b = await _create(store, tenant_id, depends_on=(a.id,))
    c = await _create(store, tenant_id, depends_on=(b.id,))
    await _fail(store, await _claim_one(store, a), delay=0)
    assert (await _get(store, b)).status is S.BLOCKED
    assert await store.task_promote_due(10) == 1
    await _fail(store, await _claim_one(store, a))
    for task in (b, c):
        dead = await _get(store, task)
        assert dead.status is S.FAILED and dead.finished_at is not None


async def test_cancelled_completion_fails_dependents(store: Store, clock: FakeClock) -> None:
    """complete_many: a parent that ends cancelled fails its dependents."""
    tenant_id = await _tenant(store)
    parent, lease = await _running(store, tenant_id)
    child = await _create(store, tenant_id, depends_on=(parent.id,))
    await store.task_cancel(tenant_id, parent.id)
    assert (await _get(store, child)).status is S.BLOCKED
    result = await _fail(store, lease)
    assert result.status is S.CANCELLED  # a requested cancel wins over a final failure
    assert (await _get(store, parent)).status is S.CANCELLED
    assert (await _get(store, child)).status is S.FAILED


async def test_racing_completions_of_one_lease_accept_one(store: Store, clock: FakeClock) -> None:
    """complete_many: a lease ends its attempt once; a racing completion (the holder against the
    reaper) is refused and changes nothing."""
    tenant_id = await _tenant(store)
    task, lease = await _running(store, tenant_id)
    clock.advance(31)
    (expired,) = await store.task_expired_leases(10)
    results = await asyncio.gather(
        _complete(store, _completion(lease, result_json='"holder"')),
        _complete(store, _completion(expired, AttemptOutcome.LEASE_EXPIRED, delay=5, error="x")),
        _complete(store, _completion(lease, AttemptOutcome.FAILED, error="again")),
    )
    assert sum(r.accepted for r in results) == 1
    (winner,) = [r for r in results if r.accepted]
    assert (await _get(store, task)).status is winner.status
    assert len(await store.attempt_list(tenant_id, task.id)) == 1


# -- heartbeat and expired leases ------------------------------------------------------------------


async def test_heartbeat_extends_current_leases_only(store: Store, clock: FakeClock) -> None:
    """task_heartbeat: lease_expires_at = now + extend for current leases; stale ones absent."""
    tenant_id = await _tenant(store)
    t1, l1 = await _running(store, tenant_id)
    _, l2 = await _running(store, tenant_id)
    _, l3 = await _running(store, tenant_id)
    await _succeed(store, l3)
    clock.advance(20)
    extended = await store.task_heartbeat([l1.lease_id, l2.lease_id, l3.lease_id, new_id()], 60)
    assert extended == {
        l1.lease_id: clock.now() + _secs(60),
        l2.lease_id: clock.now() + _secs(60),
    }
    _assert_utc(*extended.values())
    assert (await _get(store, t1)).lease_expires_at == clock.now() + _secs(60)
    clock.advance(45)  # past the original 30 s lease, inside the extension
    assert await store.task_expired_leases(10) == []
    assert (await _complete(store, _completion(l1))).accepted
    assert await store.task_heartbeat([l1.lease_id], 60) == {}


async def test_expired_leases_oldest_first(store: Store, clock: FakeClock) -> None:
    """task_expired_leases: running tasks whose lease expired by now, oldest expiry first, up to
    limit; live ones are not listed."""
    tenant_id = await _tenant(store)
    tasks = [await _create(store, tenant_id, priority=-i) for i in range(4)]
    for lease_seconds, task in zip((30, 10, 20, 100), tasks, strict=True):
        await _claim_one(store, task, lease_seconds=lease_seconds)
    assert await store.task_expired_leases(10) == []
    clock.advance(25)
    expired = await store.task_expired_leases(10)
    _assert_utc(expired)
    assert [x.task.id for x in expired] == [tasks[1].id, tasks[2].id]
    clock.advance(10)
    assert [x.task.id for x in await store.task_expired_leases(2)] == [tasks[1].id, tasks[2].id]
    expired = await store.task_expired_leases(10)
    assert [x.task.id for x in expired] == [tasks[1].id, tasks[2].id, tasks[0].id]
    current = {t.id: (await _get(store, t)).lease_id for t in tasks}
    for lease in expired:
        assert lease.lease_id == current[lease.task.id]
        assert lease.lease_expires_at == (await _get(store, lease.task)).lease_expires_at
        assert lease.lease_expires_at < clock.now()


async def test_reaping_an_expired_lease(store: Store, clock: FakeClock) -> None:
    """An expired lease completed as lease_expired → retrying (attempt row lease_expired), and the
    old holder is fenced out; with no retry it fails."""
    tenant_id = await _tenant(store)
    task, lease = await _running(store, tenant_id)
    clock.advance(31)
    (expired,) = await store.task_expired_leases(10)
    result = await _complete(
        store, _completion(expired, AttemptOutcome.LEASE_EXPIRED, delay=4, error="expired")
    )
    assert result.accepted and result.status is S.RETRYING
    assert (await _get(store, task)).due_at == clock.now() + _secs(4)
    assert await store.task_expired_leases(10) == []
    assert (await _complete(store, _completion(lease))).accepted is False
    assert await store.task_heartbeat([lease.lease_id], 30) == {}
    (attempt,) = await store.attempt_list(tenant_id, task.id)
    assert attempt.outcome is AttemptOutcome.LEASE_EXPIRED and attempt.error == "expired"
    clock.advance(4)
    assert await store.task_promote_due(10) == 1
    second = await _claim_one(store, task)
    assert (await _complete(store, _completion(lease))).accepted is False
    clock.advance(31)
    (expired,) = await store.task_expired_leases(10)
    assert expired.lease_id == second.lease_id
    final = await _complete(store, _completion(expired, AttemptOutcome.LEASE_EXPIRED))
    assert final.status is S.FAILED
    assert [a.outcome for a in await store.attempt_list(tenant_id, task.id)] == [
        AttemptOutcome.LEASE_EXPIRED,
        AttemptOutcome.LEASE_EXPIRED,
    ]


# -- leadership ------------------------------------------------------------------------------------


async def test_leadership_one_holder_renew_takeover_resign(
    store: Leadership, clock: FakeClock
) -> None:
    """leader_attempt_elect: one holder at a time; the holder renews; another takes over after
    the ttl; leader_resign frees it (only for the holder)."""
    assert await store.leader_attempt_elect("engine", "n1", 10) is True
    assert await store.leader_attempt_elect("engine", "n2", 10) is False
    assert await store.leader_attempt_elect("other", "n2", 10) is True
    clock.advance(5)
    assert await store.leader_attempt_elect("engine", "n1", 10) is True  # renewed to t=15
    clock.advance(6)
    assert await store.leader_attempt_elect("engine", "n2", 10) is False
    clock.advance(4.5)  # t=15.5: n1's lease lapsed
    assert await store.leader_attempt_elect("engine", "n2", 10) is True
    assert await store.leader_attempt_elect("engine", "n1", 10) is False
    await store.leader_resign("engine", "n1")  # not the holder: no effect
    assert await store.leader_attempt_elect("engine", "n1", 10) is False
    await store.leader_resign("engine", "n2")
    assert await store.leader_attempt_elect("engine", "n1", 10) is True
    assert await store.leader_attempt_elect("other", "n1", 10) is True  # n2 let it lapse


async def test_leadership_contenders_elect_one(store: Leadership, clock: FakeClock) -> None:
    """leader_attempt_elect: concurrent candidates, exactly one wins."""
    wins = await asyncio.gather(
        *(store.leader_attempt_elect("race", f"n{i}", 10) for i in range(5))
    )
    assert sum(wins) == 1


# -- metrics ---------------------------------------------------------------------------------------


async def test_task_count_by_status(store: Store, clock: FakeClock) -> None:
    """task_count_by_status: counts per (tenant, queue, status), every tenant."""
    a = await _tenant(store, "a")
    b = await _tenant(store, "b")
    await _create(store, a, queue="q1")
    await _create(store, b, queue="q1")
    await _create(store, b, queue="q2", run_at=clock.now() + _secs(60))
    await _in_status(store, a, S.FAILED, queue="q2")
    counts = await store.task_count_by_status()
    table = {(c.tenant_id, c.queue, c.status): c.count for c in counts}
    assert table == {
        (a, "q1", S.READY): 1,
        (b, "q1", S.READY): 1,
        (b, "q2", S.SCHEDULED): 1,
        (a, "q2", S.FAILED): 1,
    }
    assert all(isinstance(c.status, TaskStatus) for c in counts)


async def test_reaper_ending_loses_to_a_heartbeat(store: Store, clock: FakeClock) -> None:
    """complete_many: a ``lease_expired`` completion of a lease that a heartbeat extended (after
    the reaper read it as expired) is refused; an actually expired one is accepted."""
    tenant_id = await _tenant(store)
    task = await _create(store, tenant_id)
    lease = await _claim_one(store, task, lease_seconds=10)
    [seen_expired] = await _expired_after(store, clock, lease)
    clock.set(lease.lease_expires_at - timedelta(seconds=1))
    extended = await store.task_heartbeat([lease.lease_id], 30)
    assert lease.lease_id in extended
    clock.set(lease.lease_expires_at)  # the reaper's view was read at the old expiry
    [late] = await store.task_complete_many(
        [_completion(seen_expired, AttemptOutcome.LEASE_EXPIRED, delay=1, error="expired")]
    )
    assert not late.accepted
    assert (await _get(store, task)).status is S.RUNNING
    clock.set(extended[lease.lease_id])
    [due] = await store.task_complete_many(
        [_completion(seen_expired, AttemptOutcome.LEASE_EXPIRED, delay=1, error="expired")]
    )
    assert due.accepted and due.status is S.RETRYING


async def _expired_after(store: Store, clock: FakeClock, lease: Lease) -> list[Lease]:
    """The reaper's read of ``lease`` once it expired, then time rewound to before the expiry."""
    before = clock.now()
    clock.set(lease.lease_expires_at)
    expired = [x for x in await store.task_expired_leases(100) if x.lease_id == lease.lease_id]
    clock.set(before)
    return expired


__all__ = sorted(name for name in dir() if name.startswith("test_"))
