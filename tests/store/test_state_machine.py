"""Property-based test of the task life cycle against each real store.

Hypothesis drives random sequences of create / a create handed to a waiting lease poll / patch /
cancel / claim / complete (success, retryable and final failure, with live and stale leases) / the
ack by lease id alone (PostgreSQL) / release (live and stale leases) / heartbeat /
expire-and-reap / promote / retry against one store per backend, while a small model
predicts every task's status. After each step every task of the example is read back and checked:

- its status change since the last step is an edge of ``duetime.states`` (``is_legal``) and the
  status is the one the model predicts from the protocol's contracts;
- ``attempts`` equals the number of attempt rows, numbered 1..n (less the running one);
- a running task holds a lease and nothing else does; a terminal task has ``finished_at``.

Examples share one store per backend (a fresh database per example would be too slow): each
example works in its own tenant and queue, and the clock only moves forward.
"""

from __future__ import annotations

import asyncio
import itertools
import uuid
from collections.abc import Awaitable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, ClassVar, TypeVar

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)

from duetime.clock import FakeClock
from duetime.errors import Conflict, ValidationError
from duetime.ids import new_id
from duetime.lifecycle import finish
from duetime.lifecycle.release import release as lifecycle_release
from duetime.retry import next_retry_delay
from duetime.states import after_attempt, is_legal
from duetime.store import Store, store_from_url
from duetime.store.protocols import CreateHandoff, LeaseCompleter
from duetime.target_types import PULL_TYPES, PUSH_TYPES
from duetime.types import (
    TERMINAL_STATUSES,
    AttemptOutcome,
    ClaimRequest,
    Completion,
    NewTask,
    RetryPolicy,
    TargetType,
    Task,
    TaskFilter,
    TaskPatch,
    TaskStatus,
)

S = TaskStatus
T = TypeVar("T")
WAITING = (S.SCHEDULED, S.BLOCKED, S.READY, S.RETRYING)
TARGETS = {"worker": {"type": "worker"}, "http": {"type": "http", "url": "https://example.com/"}}
TIMEOUT = 5.25  # lease = timeout + grace = 15.25 s; with whole-second clock steps a lease never
GRACE = 10.0  # expires exactly "now", so the model need not guess the boundary.
LEASE_CHOICES = (None, 20.5)
EXTEND = 10.5
CLAIM_TYPES = {
    "worker": PULL_TYPES,
    "push": PUSH_TYPES,
    "all": frozenset(TargetType),
}


@dataclass
class Model:
    """What the protocol says one task must look like."""

    status: TaskStatus
    due_at: datetime | None  # None: the contract leaves it open (after a replay)
    parents: tuple[str, ...]
    retry: RetryPolicy
    target: str
    name: str
    priority: int
    attempts: int = 0
    lease_id: str | None = None
    lease_expires_at: datetime | None = None
    cancel_requested: bool = False


@dataclass
class Harness:
    loop: asyncio.AbstractEventLoop
    store: Store
    clock: FakeClock
    examples: int = 0
    steps: dict[str, int] = field(default_factory=dict)

    def run(self, coro: Awaitable[T]) -> T:
        return self.loop.run_until_complete(coro)


class LifecycleMachine(RuleBasedStateMachine):
    harness: ClassVar[Harness]

    def __init__(self) -> None:
        super().__init__()
        h = self.harness
        h.examples += 1
        self.store, self.clock = h.store, h.clock
        self.tenant = h.run(self.store.tenant_create(f"sm-{uuid.uuid4().hex[:8]}")).id
        self.queue = f"q-{uuid.uuid4().hex[:8]}"
        self.model: dict[str, Model] = {}
        self.seen: dict[str, Task] = {}
        self.idem: dict[str, str] = {}
        self.leases: dict[str, str] = {}  # every lease ever handed out → its task
        self.serial = itertools.count(1)

    # -- helpers ---------------------------------------------------------------------------------

    def run(self, coro: Awaitable[T]) -> T:
        return self.harness.run(coro)

    def count(self, step: str) -> None:
        self.harness.steps[step] = self.harness.steps.get(step, 0) + 1

    @property
    def now(self) -> datetime:
        return self.clock.now()

    def children(self, parent_id: str) -> Iterator[str]:
        return (tid for tid, m in self.model.items() if parent_id in m.parents)

    def settle_dependents(self, parent_id: str) -> None:
        """Apply a parent's end to its blocked children, transitively."""
        parent = self.model[parent_id].status
        for child_id in self.children(parent_id):
            child = self.model[child_id]
            if child.status is not S.BLOCKED:
                continue
            if parent in (S.FAILED, S.CANCELLED):
                child.status = S.FAILED
                self.settle_dependents(child_id)
            elif all(self.model[p].status is S.SUCCEEDED for p in child.parents):
                assert child.due_at is not None
                child.status = S.READY if child.due_at <= self.now else S.SCHEDULED

    def end_attempt(self, task_id: str, outcome: AttemptOutcome, delay: float | None) -> None:
        m = self.model[task_id]
        m.lease_id = m.lease_expires_at = None
        if outcome is AttemptOutcome.SUCCEEDED:
            m.status = S.SUCCEEDED
        elif m.cancel_requested:
            m.status = S.CANCELLED
        elif delay is not None:
            m.status, m.due_at = S.RETRYING, self.now + timedelta(seconds=delay)
        else:
            m.status = S.FAILED
        m.cancel_requested = False
        if m.status is not S.RETRYING:
            self.settle_dependents(task_id)

    def priority(self, rank: int) -> int:
        """A priority of the drawn rank that no other task of the example has.

        Claims order by priority, then due_at, then whatever the store picks; with ties broken by
        random ids, replays of an example would diverge and Hypothesis could not shrink it.
        Distinct priorities keep every claim deterministic (due_at order is in the suite).
        """
        return rank * 1000 + next(self.serial)

    @staticmethod
    def choose(data: st.DataObject, items: list[str]) -> str | None:
        """One of ``items`` (or None when empty).

        Every draw has the same shape whatever the store's state: ids are random and tie-breaks
        are the store's, so state-dependent draws would make Hypothesis's replays diverge.
        """
        index = data.draw(st.integers(0, 1023))
        return items[index % len(items)] if items else None

    def pick(
        self, data: st.DataObject, statuses: tuple[TaskStatus, ...] | None = None
    ) -> str | None:
        ids = [tid for tid, m in self.model.items() if statuses is None or m.status in statuses]
        return self.choose(data, ids)

    # -- rules -----------------------------------------------------------------------------------

    @initialize(data=st.data(), size=st.integers(2, 6))
    def populate(self, data: st.DataObject, size: int) -> None:
        """Every example starts with a few tasks, so the other rules have work to do."""
        self.create(data, size)

    @rule(data=st.data(), size=st.integers(1, 3))
    def create(self, data: st.DataObject, size: int) -> None:
        self.count("create")
        specs: list[NewTask] = []
        predicted: list[tuple[str | None, str | None]] = []  # (existing id, idempotency key)
        batch_keys: dict[str, int] = {}
        for i in range(size):
            offset = data.draw(st.sampled_from([None, -10, 0, 15, 60]))
            picks = [self.pick(data), self.pick(data)]
            parents = tuple(dict.fromkeys(p for p in picks if p is not None))
            parents = parents[: data.draw(st.integers(0, 2))]
            key = data.draw(st.sampled_from([None, None, None, "k1", "k2"]))
            target = data.draw(st.sampled_from(sorted(TARGETS)))
            spec = NewTask(
                tenant_id=self.tenant,
                target=TARGETS[target],
                name=data.draw(st.sampled_from(["a", "b"])),
                queue=self.queue,
                run_at=None if offset is None else self.now + timedelta(seconds=offset),
                idempotency_key=key,
                priority=self.priority(data.draw(st.integers(0, 2))),
                retry=RetryPolicy(
                    max_attempts=data.draw(st.integers(1, 3)),
                    initial_delay_seconds=data.draw(st.sampled_from([0.0, 3.0])),
                    multiplier=2,
                    jitter=0,
                ),
                timeout_seconds=TIMEOUT,
                depends_on=parents,
            )
            specs.append(spec)
            existing = self.idem.get(key) if key else None
            if key and existing is None and key in batch_keys:
                existing = f"batch:{batch_keys[key]}"
            if key and existing is None:
                batch_keys[key] = i
            predicted.append((existing, key))
        results = self.run(self.store.task_create_many(specs))
        assert len(results) == size
        for i, (spec, result, (existing, key)) in enumerate(
            zip(specs, results, predicted, strict=True)
        ):
            if existing is not None:
                assert result.created is False
                want = existing
                if existing.startswith("batch:"):
                    want = results[int(existing.split(":")[1])].task.id
                assert result.task.id == want, (i, key)
                assert result.task.status is self.model[want].status
                continue
            assert result.created is True
            if key:
                self.idem[key] = result.task.id
            parents_status = [self.model[p].status for p in spec.depends_on]
            run_at = spec.run_at or self.now
            if any(s in (S.FAILED, S.CANCELLED) for s in parents_status):
                status = S.FAILED
            elif any(s is not S.SUCCEEDED for s in parents_status):
                status = S.BLOCKED
            else:
                status = S.READY if run_at <= self.now else S.SCHEDULED
            assert spec.name is not None
            self.model[result.task.id] = Model(
                status=status,
                due_at=run_at,
                parents=spec.depends_on,
                retry=spec.retry,
                target="worker" if spec.target["type"] == "worker" else "push",
                name=spec.name,
                priority=spec.priority,
            )
            assert result.task.status is status

    @rule(data=st.data())
    def create_with_unknown_parent(self, data: st.DataObject) -> None:
        self.count("create_unknown_parent")
        good = NewTask(tenant_id=self.tenant, target=TARGETS["worker"], queue=self.queue)
        bad = NewTask(
            tenant_id=self.tenant,
            target=TARGETS["worker"],
            queue=self.queue,
            depends_on=(new_id(),),
        )
        batch = data.draw(st.sampled_from([[bad], [good, bad], [bad, good]]))
        with pytest.raises(ValidationError):
            self.run(self.store.task_create_many(batch))
        # the invariant checks that nothing was created

    @rule(data=st.data(), offset=st.sampled_from([-5, 0, 10, 40]), rank=st.integers(0, 2))
    def patch(self, data: st.DataObject, offset: int, rank: int) -> None:
        self.count("patch")
        task_id = self.pick(data)
        if task_id is None:
            return
        m = self.model[task_id]
        run_at = self.now + timedelta(seconds=offset)
        priority = self.priority(rank)
        patch = TaskPatch(run_at=run_at, priority=priority)
        if m.status not in WAITING:
            with pytest.raises(Conflict):
                self.run(self.store.task_update(self.tenant, task_id, patch))
            return
        task = self.run(self.store.task_update(self.tenant, task_id, patch))
        m.due_at, m.priority = run_at, priority
        due = run_at <= self.now
        if m.status is S.SCHEDULED and due:
            m.status = S.READY
        elif m.status is S.READY and not due:
            m.status = S.SCHEDULED
        elif m.status is S.RETRYING and due:
            m.status = S.READY
        elif m.status is S.RETRYING:
            # The protocol leaves it to the store whether it stays retrying or is scheduled.
            assert task.status in (S.RETRYING, S.SCHEDULED)
            m.status = task.status
        assert task.status is m.status and task.due_at == run_at

    @rule(data=st.data())
    def cancel(self, data: st.DataObject) -> None:
        self.count("cancel")
        task_id = self.pick(data)
        if task_id is not None:
            self.cancel_task(task_id)

    def cancel_task(self, task_id: str) -> None:
        m = self.model[task_id]
        if m.status in TERMINAL_STATUSES:
            with pytest.raises(Conflict):
                self.run(self.store.task_cancel(self.tenant, task_id))
            return
        task = self.run(self.store.task_cancel(self.tenant, task_id))
        if m.status is S.RUNNING:
            m.cancel_requested = True
        else:
            m.status = S.CANCELLED
            self.settle_dependents(task_id)
        assert task.status is m.status

    @rule(
        limit=st.integers(1, 3),
        kind=st.sampled_from(sorted(CLAIM_TYPES)),
        names=st.sampled_from([None, ("a",), ("a", "b")]),
        lease_seconds=st.sampled_from(LEASE_CHOICES),
    )
    def claim(
        self, limit: int, kind: str, names: tuple[str, ...] | None, lease_seconds: float | None
    ) -> None:
        self.count("claim")
        leases = self.run(
            self.store.task_claim(
                ClaimRequest(
                    worker_id="w",
                    limit=limit,
                    target_types=CLAIM_TYPES[kind],
                    lease_seconds=lease_seconds,
                    lease_grace_seconds=GRACE,
                    queue=self.queue,
                    names=names,
                )
            )
        )
        candidates = {
            tid
            for tid, m in self.model.items()
            if m.status is S.READY
            and (kind == "all" or m.target == kind)
            and (names is None or m.name in names)
        }
        claimed = [lease.task.id for lease in leases]
        assert len(claimed) == len(set(claimed)) == min(limit, len(candidates))
        assert set(claimed) <= candidates

        def rank(tid: str) -> tuple[int, datetime]:
            task = self.seen[tid]
            return (-task.priority, task.due_at)

        if claimed:
            worst = max(rank(tid) for tid in claimed)
            assert all(rank(tid) >= worst for tid in candidates - set(claimed))
        for lease in leases:
            m = self.model[lease.task.id]
            m.status, m.attempts, m.lease_id = S.RUNNING, m.attempts + 1, lease.lease_id
            m.lease_expires_at = self.now + timedelta(seconds=lease_seconds or TIMEOUT + GRACE)
            assert lease.attempt == m.attempts and lease.lease_expires_at == m.lease_expires_at
            assert lease.lease_id not in self.leases
            self.leases[lease.lease_id] = lease.task.id

    @rule(data=st.data(), how=st.sampled_from(["succeed", "retryable", "final"]))
    def complete(self, data: st.DataObject, how: str) -> None:
        """End an attempt under any lease ever handed out: current ones end it, stale ones are
        refused."""
        lease_id = self.choose(data, list(self.leases))
        if lease_id is not None:
            self.end(lease_id, how)

    @rule(data=st.data(), how=st.sampled_from(["succeed", "retryable", "final"]))
    def complete_running(self, data: st.DataObject, how: str) -> None:
        """End the attempt of a running task under its current lease."""
        task_id = self.pick(data, (S.RUNNING,))
        if task_id is not None:
            lease_id = self.model[task_id].lease_id
            assert lease_id is not None
            self.end(lease_id, how)

    @rule(how=st.sampled_from(["succeed", "retryable", "final"]), cancel_first=st.booleans())
    def work(self, how: str, cancel_first: bool) -> None:
        """Claim the best ready task and end its attempt: the common path, as two checked steps
        (three with a cancel while it runs)."""
        before = set(self.leases)
        self.claim(limit=1, kind="all", names=None, lease_seconds=LEASE_CHOICES[1])
        new = [lease_id for lease_id in self.leases if lease_id not in before]
        if not new:
            return
        (lease_id,) = new
        self.tasks_agree_with_the_model()
        if cancel_first:
            self.cancel_task(self.leases[lease_id])
            self.tasks_agree_with_the_model()
        self.end(lease_id, how)

    def end(self, lease_id: str, how: str) -> None:
        self.count(f"complete_{how}")
        task_id = self.leases[lease_id]
        m = self.model[task_id]
        current = m.status is S.RUNNING and m.lease_id == lease_id
        outcome = AttemptOutcome.SUCCEEDED if how == "succeed" else AttemptOutcome.FAILED
        delay = None
        if how == "retryable":
            delay = next_retry_delay(self.seen[task_id], retryable=True)
        completion = Completion(
            task_id=task_id,
            lease_id=lease_id,
            outcome=outcome,
            started_at=self.seen[task_id].started_at or self.now,
            duration_ms=1.0,
            error=None if how == "succeed" else f"{how} error",
            retry_delay_seconds=delay,
            status=after_attempt(outcome is AttemptOutcome.SUCCEEDED, delay),
        )
        (result,) = self.run(self.store.task_complete_many([completion]))
        assert result.accepted is current
        if current:
            self.end_attempt(task_id, outcome, delay)
            assert result.status is m.status

    @rule(data=st.data(), delay=st.sampled_from([0.0, 7.0]))
    def release(self, data: st.DataObject, delay: float) -> None:
        """Hand a task back under any lease ever handed out (:mod:`duetime.lifecycle.release`):
        a current lease of a task whose cancel was not requested gives it back without spending
        the attempt; a stale one, or a cancel requested, changes nothing."""
        self.count("release")
        lease_id = self.choose(data, list(self.leases))
        if lease_id is None:
            return
        task_id = self.leases[lease_id]
        m = self.model[task_id]
        current = m.status is S.RUNNING and m.lease_id == lease_id and not m.cancel_requested
        got = self.run(lifecycle_release(self.store, [lease_id], delay, self.tenant))
        if not current:
            assert got == {}
            return
        assert set(got) == {lease_id}
        m.status = S.SCHEDULED if delay else S.READY
        m.due_at = self.now + timedelta(seconds=delay)
        m.attempts -= 1
        m.lease_id = m.lease_expires_at = None
        assert got[lease_id].status is m.status

    @rule(rank=st.integers(0, 2))
    def create_handed_off(self, rank: int) -> None:
        """A worker task created due now while a lease poll of its queue waits
        (:class:`~duetime.store.protocols.CreateHandoff`): the claim in the create's transaction
        takes at most one ready worker task of the queue, the new one among them."""
        if not isinstance(self.store, CreateHandoff):
            return
        self.count("handoff")
        spec = NewTask(
            tenant_id=self.tenant,
            target=TARGETS["worker"],
            name="a",
            queue=self.queue,
            priority=self.priority(rank),
            retry=RetryPolicy(max_attempts=2, initial_delay_seconds=0.0, multiplier=2, jitter=0),
            timeout_seconds=TIMEOUT,
        )
        claim = ClaimRequest(
            worker_id="w",
            limit=1,
            target_types=PULL_TYPES,
            lease_seconds=LEASE_CHOICES[1],
            lease_grace_seconds=GRACE,
            queue=self.queue,
        )
        created, leases = self.run(self.store.task_create_claimed([spec], claim))
        (made,) = created
        assert made.created
        self.model[made.task.id] = Model(
            status=S.READY,
            due_at=self.now,
            parents=(),
            retry=spec.retry,
            target="worker",
            name="a",
            priority=spec.priority,
        )
        candidates = {
            tid for tid, m in self.model.items() if m.status is S.READY and m.target == "worker"
        }
        assert len(leases) <= 1
        for lease in leases:
            assert lease.task.id in candidates
            m = self.model[lease.task.id]
            m.status, m.attempts, m.lease_id = S.RUNNING, m.attempts + 1, lease.lease_id
            m.lease_expires_at = self.now + timedelta(seconds=LEASE_CHOICES[1])
            assert lease.attempt == m.attempts and lease.lease_expires_at == m.lease_expires_at
            self.leases[lease.lease_id] = lease.task.id
        assert made.task.status is self.model[made.task.id].status

    @rule(data=st.data())
    def ack_by_lease(self, data: st.DataObject) -> None:
        """The lease API's ack by lease id alone (:class:`~duetime.store.protocols.
        LeaseCompleter`) under any lease ever handed out: it ends a running task without
        dependents as succeeded; a stale lease, or a task with dependents, it leaves unchanged
        for the general path."""
        if not isinstance(self.store, LeaseCompleter):
            return
        self.count("ack_by_lease")
        lease_id = self.choose(data, list(self.leases))
        if lease_id is None:
            return
        task_id = self.leases[lease_id]
        m = self.model[task_id]
        current = m.status is S.RUNNING and m.lease_id == lease_id
        dependents = next(self.children(task_id), None) is not None
        got = self.run(self.store.task_complete_leased(self.tenant, [lease_id], ["null"]))
        if current and not dependents:
            assert set(got) == {lease_id} and got[lease_id].task_id == task_id
            assert got[lease_id].attempt == m.attempts
            self.end_attempt(task_id, AttemptOutcome.SUCCEEDED, None)
        else:
            assert got == {}

    @rule(data=st.data())
    def heartbeat(self, data: st.DataObject) -> None:
        self.count("heartbeat")
        lease_id = self.choose(data, list(self.leases))
        if lease_id is None:
            return
        m = self.model[self.leases[lease_id]]
        # Time moves only in ``expire``, which reaps what expired: a running task's lease is live.
        current = m.status is S.RUNNING and m.lease_id == lease_id
        got = self.run(self.store.task_heartbeat([lease_id], EXTEND))
        if current:
            assert got == {lease_id: self.now + timedelta(seconds=EXTEND)}
            m.lease_expires_at = got[lease_id]
        else:
            assert got == {}

    @rule(seconds=st.integers(1, 40))
    def expire(self, seconds: int) -> None:
        """Time passes; the reaper ends every expired lease of this example."""
        self.count("expire")
        self.clock.advance(seconds)
        expired = self.run(self.store.task_expired_leases(100_000))
        mine = [lease for lease in expired if lease.task.id in self.model]
        expected = {
            tid
            for tid, m in self.model.items()
            if m.status is S.RUNNING and m.lease_expires_at and m.lease_expires_at < self.now
        }
        assert {lease.task.id for lease in mine} == expected
        completions = []
        for lease in mine:
            assert lease.lease_id == self.model[lease.task.id].lease_id
            completions.append(finish.expired(lease, self.now))
        if not completions:
            return
        results = self.run(self.store.task_complete_many(completions))
        for completion, result in zip(completions, results, strict=True):
            assert result.accepted
            self.end_attempt(completion.task_id, completion.outcome, completion.retry_delay_seconds)

    @rule()
    def promote(self) -> None:
        self.count("promote")
        moved = self.run(self.store.task_promote_due(100_000))
        due = [
            tid
            for tid, m in self.model.items()
            if m.status in (S.SCHEDULED, S.RETRYING) and m.due_at and m.due_at <= self.now
        ]
        assert moved >= len(due)
        for tid in due:
            self.model[tid].status = S.READY

    @rule(data=st.data())
    def retry(self, data: st.DataObject) -> None:
        self.count("retry")
        task_id = self.pick(data)
        if task_id is None:
            return
        m = self.model[task_id]
        if m.status not in (S.FAILED, S.CANCELLED):
            with pytest.raises(Conflict):
                self.run(self.store.task_retry(self.tenant, task_id))
            return
        task = self.run(self.store.task_retry(self.tenant, task_id))
        m.status, m.due_at, m.cancel_requested = S.READY, None, False
        assert task.status is S.READY and task.series_start == m.attempts
        assert task.last_error is None

    # -- the invariant ---------------------------------------------------------------------------

    @invariant()
    def tasks_agree_with_the_model(self) -> None:
        tasks = self.run(self.store.task_list(TaskFilter(tenant_id=self.tenant, limit=1000)))
        by_id = {t.id: t for t in tasks}
        assert set(by_id) == set(self.model), "tasks appeared or vanished"
        for task_id, task in by_id.items():
            m = self.model[task_id]
            before = self.seen.get(task_id)
            previous = before.status if before else None
            assert is_legal(previous, task.status), f"{task_id}: {previous} -> {task.status}"
            assert task.status is m.status, f"{task_id}: store {task.status}, model {m.status}"
            assert task.attempts == m.attempts
            if m.due_at is not None and m.status in (S.SCHEDULED, S.READY, S.RETRYING):
                assert task.due_at == m.due_at
            if m.due_at is None:
                m.due_at = task.due_at  # learn what the store chose after a replay
            if task.status is S.RUNNING:
                assert task.lease_id == m.lease_id and task.lease_expires_at is not None
                assert task.lease_expires_at == m.lease_expires_at
                assert task.cancel_requested is m.cancel_requested
            else:
                assert task.lease_id is None and task.lease_expires_at is None
            if task.status in TERMINAL_STATUSES:
                assert task.finished_at is not None
            if before is None or before != task:
                rows = self.run(self.store.attempt_list(self.tenant, task_id))
                # An attempt's row is written when it ends: a running one has none yet.
                ended = task.attempts - (1 if task.status is S.RUNNING else 0)
                assert [a.number for a in rows] == list(range(1, ended + 1))
        self.seen = by_id


def _run_machine(url: str, max_examples: int, steps: int) -> Harness:
    loop = asyncio.new_event_loop()
    clock = FakeClock()
    store = store_from_url(url, clock=clock)
    harness = Harness(loop, store, clock)
    try:
        harness.run(store.open())
        harness.run(store.migrate())
        machine: Any = type("Lifecycle", (LifecycleMachine,), {"harness": harness})
        run_state_machine_as_test(
            machine,
            settings=settings(
                # The same examples every run: the coverage check below (every kind of step
                # taken) must not depend on the draw; random draws left one out once in ~4 runs.
                derandomize=True,
                max_examples=max_examples,
                stateful_step_count=steps,
                deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
            ),
        )
    finally:
        harness.run(store.close())
        loop.close()
    return harness


def test_life_cycle_state_machine(store_url: str) -> None:
    harness = _run_machine(store_url, max_examples=50, steps=30)
    assert harness.examples >= 50
    # The machine must really have exercised the life cycle, not just created tasks.
    steps = ("claim", "complete_succeed", "complete_retryable", "expire", "retry", "cancel")
    for step in (*steps, "release", "handoff"):
        assert harness.steps.get(step, 0) > 0, harness.steps
    if isinstance(harness.store, LeaseCompleter):
        assert harness.steps.get("ack_by_lease", 0) > 0, harness.steps
