"""Schedule expressions evaluated off the event loop, fairly between tenants.

Finding fire times is pure-Python CPU work, bounded per call by the evaluation budget
(:mod:`duetime.schedule.budget`: about 0.2 s of CPU). On the event loop even a bounded call
stalls everything else the node does: twelve parallel ``upcoming?count=1000`` of a sparse RRULE
kept ``/healthz`` from answering for ~4 s. So every evaluation made for a tenant (create, PATCH
and declare checks, ``upcoming``, backfill, the next run of a listed schedule) and the
materializer's planning run in :class:`EvaluationPool`: a few worker processes, fed fairly.

Processes, not threads: the evaluation holds the GIL, and with two evaluation threads busy the
event loop got the GIL back only every few switch intervals — ``/healthz`` stayed under 100 ms,
but the median task create went from 2 ms to 50 ms (p99 430 ms) while they ran. With two worker
processes the loop keeps its interpreter: the median create stayed at 3-9 ms (p99 30-50 ms) under
the same load (2-core machine, ``docs/security.md``, "Schedule evaluation").

Fairness: a tenant has at most ``per_tenant`` evaluations waiting or running on a node; one more
is :class:`~duetime.errors.TooManyRequests` naming the limit ``schedule_evaluations``, with
``Retry-After``. Waiting evaluations start round-robin by tenant, so one tenant's backlog delays
another's evaluation by at most one evaluation per worker. The engine's planning (``key=None``)
takes its turn in the same ring, without a cap.

Each job is a module-level function of this module (it must pickle by name) that applies the
budget itself, in the worker: a refusal (``BudgetExceeded``, any ``ValidationError``) comes back
as the same exception. A worker process exits when the node process is gone.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import multiprocessing
import os
import signal
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Sequence
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

from duetime.errors import TooManyRequests
from duetime.schedule.budget import Budget, BudgetExceeded, within_budget
from duetime.schedule.occurrences import Occurrence, occurrences_after, occurrences_between
from duetime.schedule.parse import parse_spec
from duetime.schedule.plan import PlanLimits, plan_advance
from duetime.schedule.spec import ScheduleSpec
from duetime.types import ScheduleAdvance, ScheduleDue

T = TypeVar("T")

DEFAULT_WORKERS = 2
DEFAULT_PER_TENANT = 16
RETRY_AFTER_SECONDS = 1.0
"""What a tenant over its share is asked to wait: about the longest one evaluation may run."""
LIMIT = "schedule_evaluations"


@dataclass(eq=False)
class _Waiter:
    key: str | None
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[None]
    granted: bool = False


@dataclass
class _State:
    busy: int = 0
    in_flight: Counter[str | None] = field(default_factory=Counter)
    queues: dict[str | None, deque[_Waiter]] = field(default_factory=dict)
    ring: deque[str | None] = field(default_factory=deque)


class EvaluationPool:
    """At most ``workers`` evaluations at once, in as many processes; ``per_tenant`` waiting or
    running per tenant (see the module docstring). Thread-safe; usable from any event loop.
    Processes start on first use (or :meth:`warm`)."""

    def __init__(
        self, workers: int = DEFAULT_WORKERS, per_tenant: int = DEFAULT_PER_TENANT
    ) -> None:
        if workers < 1 or per_tenant < 1:
            raise ValueError("workers and per_tenant must be at least 1")
        self.workers = workers
        self.per_tenant = per_tenant
        self._lock = threading.Lock()
        self._state = _State()
        self._executor: concurrent.futures.ProcessPoolExecutor | None = None
        self.jobs = 0
        """Jobs run so far (tests read it to tell whether an answer needed a search)."""

    async def run(self, key: str | None, job: Callable[..., T], *args: Any) -> T:
        """``job(*args)`` in a worker process, on behalf of tenant ``key`` (None: the engine,
        never refused). ``TooManyRequests`` when the tenant has ``per_tenant`` in flight."""
        waiter = self._admit(key)
        submitted = False
        try:
            if waiter is not None:
                try:
                    await waiter.future
                except asyncio.CancelledError:
                    self._abandon(waiter)
                    raise
            future = self._submit(job, args)
            submitted = True
            future.add_done_callback(lambda _: self._release(key))
            try:
                return await asyncio.wrap_future(future)
            except BrokenProcessPool:  # a worker died (killed from outside): once more, afresh
                return await asyncio.wrap_future(self._submit(job, args))
        finally:
            if not submitted:
                self._release(key, slot=waiter is None or waiter.granted)

    def _admit(self, key: str | None) -> _Waiter | None:
        """Count the call in; None when it may start now, else its place in the queue."""
        with self._lock:
            state = self._state
            if key is not None and state.in_flight[key] >= self.per_tenant:
                raise TooManyRequests(
                    f"this tenant has {self.per_tenant} schedule evaluations waiting or running "
                    f"on this node ({LIMIT}); try again shortly",
                    limit=LIMIT,
                    retry_after=RETRY_AFTER_SECONDS,
                )
            state.in_flight[key] += 1
            if state.busy < self.workers and not state.ring:
                state.busy += 1
                return None
            loop = asyncio.get_running_loop()
            waiter = _Waiter(key, loop, loop.create_future())
            queue = state.queues.setdefault(key, deque())
            if not queue:
                state.ring.append(key)
            queue.append(waiter)
            return waiter

    def _abandon(self, waiter: _Waiter) -> None:
        """A waiting call was cancelled: leave the queue (its slot is released by ``run``)."""
        with self._lock:
            queue = self._state.queues.get(waiter.key)
            if not waiter.granted and queue is not None and waiter in queue:
                queue.remove(waiter)
                if not queue:
                    del self._state.queues[waiter.key]
                    self._state.ring.remove(waiter.key)

    def _release(self, key: str | None, *, slot: bool = True) -> None:
        """A call of ``key`` is over (and frees a worker when it held one): start the next
        waiting call, round-robin by tenant."""
        grants: list[_Waiter] = []
        with self._lock:
            state = self._state
            state.in_flight[key] -= 1
            if state.in_flight[key] <= 0:
                del state.in_flight[key]
            if slot:
                state.busy -= 1
            while state.busy < self.workers and state.ring:
                next_key = state.ring.popleft()
                queue = state.queues[next_key]
                waiter = queue.popleft()
                if queue:
                    state.ring.append(next_key)
                else:
                    del state.queues[next_key]
                waiter.granted = True
                state.busy += 1
                grants.append(waiter)
        for waiter in grants:
            try:
                waiter.loop.call_soon_threadsafe(_grant, waiter.future)
            except RuntimeError:  # its event loop is closed: nobody waits for the slot
                self._release(waiter.key)

    def _submit(self, job: Callable[..., T], args: Sequence[Any]) -> concurrent.futures.Future[T]:
        with self._lock:
            self.jobs += 1
            for attempt in (1, 2):
                if self._executor is None:
                    self._executor = concurrent.futures.ProcessPoolExecutor(
                        max_workers=self.workers,
                        mp_context=multiprocessing.get_context("spawn"),
                        initializer=_worker_start,
                        initargs=(os.getpid(),),
                    )
                try:
                    return self._executor.submit(job, *args)
                except BrokenProcessPool:
                    self._executor.shutdown(wait=False, cancel_futures=True)
                    self._executor = None
                    if attempt == 2:
                        raise
        raise AssertionError("unreachable")

    async def warm(self) -> None:
        """Start the worker processes now (a node does at start), so the first evaluation does
        not wait for them."""
        await asyncio.gather(*(self.run(None, _nothing) for _ in range(self.workers)))

    def close(self) -> None:
        """Stop the worker processes (running jobs are abandoned)."""
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)


def _grant(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


_NODE_POOL: EvaluationPool | None = None


def node_pool() -> EvaluationPool:
    """This process's pool (made with the defaults on first use): what the API and the
    materializer share unless given another."""
    global _NODE_POOL
    if _NODE_POOL is None:
        _NODE_POOL = EvaluationPool()
    return _NODE_POOL


def configure_node_pool(workers: int, per_tenant: int) -> EvaluationPool:
    """Make this process's pool (``duetime serve``, from its settings) before anything uses
    it; an earlier one is closed."""
    global _NODE_POOL
    if _NODE_POOL is not None:
        _NODE_POOL.close()
    _NODE_POOL = EvaluationPool(workers, per_tenant)
    return _NODE_POOL


# -- in the worker process -------------------------------------------------------------------


WORKER_NICENESS = 10
"""How much lower a worker's CPU priority is than the node's: where the workers and the node's
event loop want the same core, the loop gets it about nine times in ten (Linux's weights), so
a flood of evaluations slows the evaluations, not the node's other calls."""


def _worker_start(parent: int) -> None:
    """A worker's start: a lower CPU priority than the node's (:data:`WORKER_NICENESS`), Ctrl-C
    is the node's to handle, and the worker goes when the node process is gone (killed, it
    cannot say so)."""
    os.nice(WORKER_NICENESS)
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(0)

    threading.Thread(target=watch, name="duetime-parent-watch", daemon=True).start()


def _nothing() -> None:
    return None


def checked_first(
    timing: dict[str, Any], field: str, count: int, now: datetime
) -> tuple[ScheduleSpec, datetime | None]:
    """A new or changed schedule's timing (``parse_spec`` keywords) accepted, and its first fire
    time after ``now``: ``ValidationError`` naming the field, or ``BudgetExceeded`` naming
    ``field`` when its next ``count`` fire times cannot be found within the budget."""
    with within_budget(field, f"the next {count} fire times of this {field}"):
        spec = parse_spec(**timing)
        found = occurrences_after(spec, now, count)
    return spec, found[0].nominal if found else None


def upcoming_times(spec: ScheduleSpec, after: datetime, count: int) -> list[Occurrence]:
    """The next ``count`` fire times after ``after`` (``BudgetExceeded`` naming ``count``)."""
    with within_budget("count", f"{count} fire times after {after.isoformat()}"):
        return occurrences_after(spec, after, count)


def times_between(
    spec: ScheduleSpec, start: datetime, end: datetime, limit: int
) -> list[Occurrence]:
    """Fire times in ``(start, end]``, at most ``limit`` (``BudgetExceeded`` naming
    ``start``)."""
    with within_budget("start", "the occurrences between start and end"):
        return occurrences_between(spec, start, end, limit)


def next_times(specs: Sequence[ScheduleSpec], now: datetime) -> list[tuple[bool, datetime | None]]:
    """Each spec's (found, first fire time after ``now``; None: there is none), on one budget
    for all (a list page never searches longer than one read may): ``found`` is False for those
    the budget did not reach."""
    budget = Budget()
    found: list[tuple[bool, datetime | None]] = []
    for spec in specs:
        try:
            with budget.spend("next_run_at", "next_run_at"):
                items = occurrences_after(spec, now, 1)
        except BudgetExceeded:
            found.append((False, None))
            continue
        found.append((True, items[0].nominal if items else None))
    return found


class PlanFailure(Exception):
    """A schedule that could not be planned: the error's class and message, as text (the
    exception itself may not survive the trip back from the worker)."""


def plan_batch(
    items: Sequence[ScheduleDue], now: datetime, limits: PlanLimits
) -> list[ScheduleAdvance | PlanFailure]:
    """:func:`~duetime.schedule.plan.plan_advance` for each item; a schedule that cannot be
    planned is its :class:`PlanFailure`, and the others are planned still."""
    plans: list[ScheduleAdvance | PlanFailure] = []
    for item in items:
        try:
            plans.append(plan_advance(item, now, limits))
        except Exception as exc:  # one broken schedule must not stop the others
            message = ""
            with contextlib.suppress(Exception):
                message = str(exc)
            plans.append(PlanFailure(f"{type(exc).__name__}: {message}"))
    return plans
