"""Public fakes for tests of code built on duetime: a deliverer driven by a function, so engine
tests run without a network (the way httpx's MockTransport serves its tests), and small fakes of
the thin store roles (:mod:`duetime.store.protocols`), so a service's unit test needs no database.

Only thin roles are faked. A fake either keeps no rule (:class:`FakeCounters` replays what the
test scripted) or keeps the rules of its role and passes that role's conformance checks like a
store (:class:`FakeSignal`, :class:`FakeLeadership`; ``tests/unit/test_fakes.py``). A role with
real rules — claims, completions, promotion, schedules — is served by :func:`memory_store`, the
SQLite store in memory, never by a second implementation of those rules.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from duetime.clock import Clock
from duetime.delivery.base import Delivery, Outcome
from duetime.store.counters import CountKey, Reconciled
from duetime.store.horizon import DueHorizon
from duetime.types import AttemptOutcome, RetryPolicy, StatusCount, Task, TaskStatus

if TYPE_CHECKING:
    from duetime.store.protocols import Store

Handler = Callable[[Delivery], Awaitable[Outcome] | Outcome]


def succeed(_: Delivery) -> Outcome:
    """The default handler: every delivery succeeds with result ``"ok"``."""
    return Outcome(AttemptOutcome.SUCCEEDED, retryable=False, http_status=200, result_json='"ok"')


class FakeDeliverer:
    """Records every :class:`Delivery` and answers it with ``handler`` (sync or async)."""

    def __init__(self, handler: Handler = succeed) -> None:
        self.handler = handler
        self.deliveries: list[Delivery] = []
        self.closed = False
        self.delivered = asyncio.Event()

    async def deliver(self, delivery: Delivery) -> Outcome:
        self.deliveries.append(delivery)
        self.delivered.set()
        answer = self.handler(delivery)
        if isinstance(answer, Outcome):
            return answer
        return await answer

    async def close(self) -> None:
        self.closed = True


def running_task(target: Mapping[str, Any], **changes: Any) -> Task:
    """A task as a claim hands it out (``running``, first attempt), to drive a deliverer without
    a store; ``changes`` override any field."""
    now = datetime(2030, 1, 1, tzinfo=UTC)
    task = Task(
        id="0190f000-0000-7000-8000-000000000001",
        tenant_id="default",
        name="send-report",
        queue="default",
        status=TaskStatus.RUNNING,
        version=1,
        target=dict(target),
        payload_json="{}",
        idempotency_key=None,
        priority=0,
        retry=RetryPolicy(),
        timeout_seconds=30.0,
        depends_on=(),
        concurrency_key=None,
        labels={},
        attempts=1,
        series_start=0,
        schedule_id=None,
        scheduled_for=None,
        run_at=now,
        due_at=now,
        created_at=now,
        updated_at=now,
    )
    return replace(task, **changes)


# -- store roles -------------------------------------------------------------------------------


class FakeSignal(DueHorizon):
    """A :class:`~duetime.store.protocols.Signal` for one event loop: ``notify()`` wakes every
    waiter, or makes the next ``wait`` return True at once; ``wait_after`` consumes nothing.
    Held to :func:`duetime.testing.conformance.check_signal`."""

    def __init__(self) -> None:
        self.generation = 0
        self._flag = asyncio.Event()
        self._changed = asyncio.Event()

    def notify(self, pulls_only: bool = False) -> None:
        self.generation += 1
        if not pulls_only:
            self._flag.set()
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def wait(self, timeout: float) -> bool:
        if not self._flag.is_set():
            try:
                await asyncio.wait_for(self._flag.wait(), max(0.0, timeout))
            except TimeoutError:
                return False
        self._flag.clear()
        return True

    async def wait_after(self, generation: int, timeout: float) -> bool:
        if self.generation != generation:
            return True
        try:
            await asyncio.wait_for(self._changed.wait(), max(0.0, timeout))
        except TimeoutError:
            return self.generation != generation
        return True


class FakeLeadership:
    """:class:`~duetime.store.protocols.Leadership` in memory, timed by ``clock`` (a
    :class:`~duetime.clock.FakeClock` in tests): a holder keeps a name until its ttl has passed
    or it resigns. Held to the leadership conformance checks. While :attr:`outage` is set, every
    call raises it (a store that cannot be reached)."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._held: dict[str, tuple[str, datetime]] = {}
        self.outage: Exception | None = None

    def holder(self, name: str) -> str | None:
        """The node that holds ``name`` now, or None."""
        held = self._held.get(name)
        return held[0] if held is not None and held[1] > self._clock.now() else None

    async def leader_attempt_elect(self, name: str, node_id: str, ttl_seconds: float) -> bool:
        self._reachable()
        now = self._clock.now()
        held = self._held.get(name)
        if held is not None and held[0] != node_id and held[1] > now:
            return False
        self._held[name] = (node_id, now + timedelta(seconds=ttl_seconds))
        return True

    async def leader_resign(self, name: str, node_id: str) -> None:
        self._reachable()
        held = self._held.get(name)
        if held is not None and held[0] == node_id:
            del self._held[name]

    def _reachable(self) -> None:
        if self.outage is not None:
            raise self.outage


class FakeCounters:
    """A :class:`~duetime.store.protocols.CounterStore` that counts nothing: it answers what the
    test scripted, in order (``folds``: 0 once used up; ``reconciles``: None once used up;
    ``counts``: every time) and records what it was asked, so a test sees what the counter
    keeper decided."""

    def __init__(
        self,
        *,
        folds: Iterable[int] = (),
        reconciles: Iterable[Reconciled | None] = (),
        counts: Iterable[StatusCount] = (),
    ) -> None:
        self.folds = list(folds)
        self.reconciles = list(reconciles)
        self.counts = list(counts)
        self.fold_calls: list[int] = []
        """The ``limit`` of every fold asked for."""
        self.reconcile_calls: list[tuple[CountKey | None, int]] = []
        """The ``(after, max_rows)`` of every reconcile asked for."""

    async def task_count_by_status(self) -> list[StatusCount]:
        return list(self.counts)

    async def task_counts_fold(self, limit: int) -> int:
        self.fold_calls.append(limit)
        return self.folds.pop(0) if self.folds else 0

    async def task_counts_reconcile(
        self, after: CountKey | None, max_rows: int
    ) -> Reconciled | None:
        self.reconcile_calls.append((after, max_rows))
        return self.reconciles.pop(0) if self.reconciles else None


@contextlib.asynccontextmanager
async def memory_store(clock: Clock | None = None) -> AsyncIterator[Store]:
    """An open, migrated SQLite store in memory (no file), closed on exit; its time is
    ``clock``'s when pinned. For unit tests of services whose roles have real rules."""
    from duetime.store import store_from_url

    store = store_from_url("sqlite:///:memory:", clock=clock)
    await store.open()
    try:
        await store.migrate()
        yield store
    finally:
        await store.close()


if TYPE_CHECKING:  # mypy checks that each fake has the shape of its role
    from duetime.clock import FakeClock
    from duetime.store.protocols import CounterStore, Leadership, Signal

    _ROLES: tuple[Signal, Leadership, CounterStore] = (
        FakeSignal(),
        FakeLeadership(FakeClock()),
        FakeCounters(),
    )
