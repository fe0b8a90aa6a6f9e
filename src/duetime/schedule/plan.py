"""What one materializer round does to one schedule: a pure plan (no clock, no I/O).

Given a schedule (its cursor ``materialized_until``), the store's now and the limits, the plan
says which occurrences become tasks, which instants the tick ledger records and why, and where the
cursor moves. The store applies it all or nothing (:class:`~duetime.types.ScheduleAdvance`).

The instants after the cursor fall into three parts, in order:

1. **Paused time** ``(cursor, resumed_at]`` (only right after a resume): every occurrence is
   ``skipped_paused``, unless the resume call asked for a catch-up (``latest`` or ``all``, within
   the catch-up window and ``catchup_max_runs``), whose chosen occurrences are ``caught_up``.
2. **Downtime** ``(cursor, now - late]``: occurrences nobody made in time (every node was down, or
   the schedule was resumed long ago and no materializer ran). The schedule's ``catchup`` picks
   what still runs (``caught_up``); the others are ``missed``. ``late`` is
   :attr:`PlanLimits.late_seconds` (capped by ``catchup_window_seconds``): an occurrence less late
   than that (a fail-over, a slow round) still fires as usual.
3. **Due** ``(.., now + horizon]`` for ``overlap = allow`` (made ahead of time, so a fail-over
   loses nothing) or ``(.., now]`` for ``skip`` and ``buffer_one`` (their overlap check needs the
   present): ``fired``, or ``dst_shifted`` when a DST gap moved it.

Overlap (``skip``/``buffer_one``) is decided here, at the occurrence's due time, against the task
of the latest occurrence the materializer made (``last_task_id``): if that task is not terminal,
``skip`` records ``skipped_overlap``; ``buffer_one`` keeps the first such occurrence waiting
(``buffered_at``) and skips the rest until the task ends, then the waiting one fires (late, at
once). Trigger and backfill runs are explicit user requests: they are neither checked nor counted.

Ledger rows for one gap are capped (:attr:`PlanLimits.ledger_cap`); the last row listed says so
when more instants were not listed.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypeVar

from duetime.schedule.budget import within_budget
from duetime.schedule.config import occurrence_task, schedule_spec
from duetime.schedule.occurrences import (
    Occurrence,
    jitter_for,
    next_after,
    occurrences_between,
    skipped_between,
)
from duetime.schedule.spec import ScheduleSpec
from duetime.types import (
    TERMINAL_STATUSES,
    CatchupPolicy,
    NewTask,
    NewTick,
    OverlapPolicy,
    Schedule,
    ScheduleAdvance,
    ScheduleDue,
    TickOutcome,
)

_MICRO = timedelta(microseconds=1)
T = TypeVar("T")


def _search(find: Callable[..., T], spec: ScheduleSpec, *args: Any) -> T:
    """``find(spec, *args)`` on the evaluation budget (:mod:`duetime.schedule.budget`): a
    schedule whose occurrences take too long to find raises ``BudgetExceeded`` here, which the
    materializer reports for that schedule alone, instead of stalling every schedule's round.
    Only searches run under it (and the cached ones only on a miss): the hook slows what it
    watches, and planning a herd of schedules is a hot loop."""
    with within_budget(spec.kind, f"the occurrences of this {spec.kind}"):
        return find(spec, *args)


@dataclass(frozen=True, slots=True)
class PlanLimits:
    """How far ahead, how late, and how much per schedule per round."""

    horizon_seconds: float = 60.0
    """``overlap = allow`` occurrences are made this far ahead of their time."""
    late_seconds: float = 60.0
    """An occurrence at most this late fires as usual; a later one is a catch-up case."""
    max_per_round: int = 1000
    """Due occurrences made per schedule per round (the rest wait for the next round)."""
    ledger_cap: int = 1000
    """Missed / skipped / DST-skipped ledger rows written per gap."""


@dataclass(slots=True)
class _Run:
    occurrence: Occurrence
    outcome: TickOutcome
    detail: str | None


def plan_advance(due: ScheduleDue, now: datetime, limits: PlanLimits) -> ScheduleAdvance:
    """The round's work for one schedule (see the module docstring)."""
    s = due.schedule
    cfg = s.config
    spec = schedule_spec(s)
    gated = cfg.overlap is not OverlapPolicy.ALLOW
    upper = now if gated else now + timedelta(seconds=limits.horizon_seconds)
    window_start = now - timedelta(seconds=cfg.catchup_window_seconds)
    late_edge = now - timedelta(seconds=min(limits.late_seconds, cfg.catchup_window_seconds))
    position = s.materialized_until
    runs: list[_Run] = []
    ticks: list[NewTick] = []

    if s.resumed_at is not None and position < s.resumed_at:
        policy = s.resume_catchup or CatchupPolicy.NONE
        chosen, others = _gap(
            spec, position, s.resumed_at, policy, cfg.catchup_max_runs, window_start,
            TickOutcome.SKIPPED_PAUSED, limits.ledger_cap,
        )  # fmt: skip
        runs += [_Run(o, TickOutcome.CAUGHT_UP, _caught_up("the pause", o)) for o in chosen]
        ticks += others
        position = s.resumed_at
    if position < late_edge:
        chosen, others = _gap(
            spec, position, late_edge, cfg.catchup, cfg.catchup_max_runs, window_start,
            TickOutcome.MISSED, limits.ledger_cap,
        )  # fmt: skip
        runs += [_Run(o, TickOutcome.CAUGHT_UP, _caught_up("downtime", o)) for o in chosen]
        ticks += others
        position = late_edge

    cursor = max(position, s.materialized_until)
    if upper > cursor:
        due_now = _between(spec, cursor, upper, limits.max_per_round)
        for o in due_now:
            outcome = TickOutcome.DST_SHIFTED if o.kind == "dst_shifted" else TickOutcome.FIRED
            runs.append(_Run(o, outcome, o.note))
        cursor = due_now[-1].nominal if len(due_now) >= limits.max_per_round else upper
    for instant, note in _search(
        skipped_between, spec, s.materialized_until, cursor, limits.ledger_cap
    ):
        ticks.append(NewTick(instant, TickOutcome.DST_SKIPPED, note))

    tasks, run_ticks, buffered, last_for = _apply_overlap(s, due, runs, now)
    return ScheduleAdvance(
        schedule_id=s.id,
        expected_version=s.version,
        expected_cursor=s.materialized_until,
        expected_buffered_at=s.buffered_at,
        materialized_until=cursor,
        next_run_at=_next_after(spec, cursor),
        buffered_at=buffered,
        tasks=tasks,
        ticks=[*ticks, *run_ticks],
        last_task_for=last_for,
        clear_resume=s.resumed_at is not None,
    )


# Schedules that share an expression and zone (a herd: thousands on "0 * * * *") and were last
# advanced together ask for the same window; the expression layer is pure, so one answer serves
# them all. Keys hold exact instants, so entries of past rounds just age out.
@functools.lru_cache(maxsize=4096)
def _between(
    spec: ScheduleSpec, start: datetime, end: datetime, limit: int
) -> tuple[Occurrence, ...]:
    return tuple(_search(occurrences_between, spec, start, end, limit))


@functools.lru_cache(maxsize=4096)
def _next_after(spec: ScheduleSpec, after: datetime) -> datetime | None:
    return _search(next_after, spec, after)


def _caught_up(after: str, o: Occurrence) -> str:
    text = f"caught up after {after}"
    return f"{text}; {o.note}" if o.note else text


def _apply_overlap(
    s: Schedule, due: ScheduleDue, runs: list[_Run], now: datetime
) -> tuple[list[NewTask], list[NewTick], datetime | None, datetime | None]:
    """Tasks and ticks for ``runs`` under the overlap policy; the new ``buffered_at`` and the
    nominal whose task becomes ``last_task_id`` (gated policies only)."""
    cfg = s.config
    tasks: list[NewTask] = []
    ticks: list[NewTick] = []

    def make(nominal: datetime, outcome: TickOutcome, detail: str | None) -> None:
        run_at = nominal + timedelta(seconds=jitter_for(s.id, nominal, cfg.jitter_seconds))
        tasks.append(occurrence_task(s, nominal, run_at))
        ticks.append(NewTick(nominal, outcome, detail, with_task=True))

    if cfg.overlap is OverlapPolicy.ALLOW:
        for run in runs:
            make(run.occurrence.nominal, run.outcome, run.detail)
        return tasks, ticks, None, None

    active = due.last_task_status is not None and due.last_task_status not in TERMINAL_STATUSES
    buffered = s.buffered_at
    last_for: datetime | None = None
    waited = "waited for the previous run to end (overlap=buffer_one)"

    def release() -> None:
        nonlocal buffered, active, last_for
        if buffered is not None and not active:
            make(buffered, TickOutcome.FIRED, waited)
            active, last_for, buffered = True, buffered, None

    for run in runs:
        release()
        nominal = run.occurrence.nominal
        if not active:
            make(nominal, run.outcome, run.detail)
            active, last_for = True, nominal
        elif cfg.overlap is OverlapPolicy.BUFFER_ONE and buffered is None:
            buffered = nominal
        else:
            previous = "the previous run had not finished"
            if cfg.overlap is OverlapPolicy.BUFFER_ONE:
                previous += " and another occurrence was already waiting"
            ticks.append(
                NewTick(nominal, TickOutcome.SKIPPED_OVERLAP, f"{previous} ({cfg.overlap})")
            )
    release()
    return tasks, ticks, buffered, last_for


def _gap(
    spec: ScheduleSpec,
    lo: datetime,
    hi: datetime,
    policy: CatchupPolicy,
    max_runs: int,
    window_start: datetime,
    other: TickOutcome,
    cap: int,
) -> tuple[list[Occurrence], list[NewTick]]:
    """Occurrences in ``(lo, hi]`` nobody made in time: the ones ``policy`` still runs (the
    latest ones inside the catch-up window, at most ``max_runs``) and ledger rows for the rest."""
    wanted = {CatchupPolicy.NONE: 0, CatchupPolicy.LATEST: 1, CatchupPolicy.ALL: max_runs}[policy]
    wanted = min(wanted, max_runs)
    chosen: list[Occurrence] = []
    start = max(lo, window_start)
    if wanted > 0 and start < hi:
        chosen = _last_n(spec, start, hi, wanted)
    others_hi = chosen[0].nominal - _MICRO if chosen else hi
    listed = _search(occurrences_between, spec, lo, others_hi, cap + 1) if others_hi > lo else []
    more = len(listed) > cap
    ticks = [
        NewTick(o.nominal, other, _why(other, policy, max_runs, o.nominal <= window_start))
        for o in listed[:cap]
    ]
    if more and ticks:
        last = ticks[-1]
        note = f"; later ones up to {others_hi.isoformat()} are not listed (at most {cap} a gap)"
        ticks[-1] = NewTick(last.nominal, last.outcome, (last.detail or "") + note)
    return chosen, ticks


def _why(other: TickOutcome, policy: CatchupPolicy, max_runs: int, outside: bool) -> str:
    prefix = (
        "the schedule was paused" if other is TickOutcome.SKIPPED_PAUSED else "not made in time"
    )
    if outside:
        return f"{prefix}; before the catch-up window (catchup_window_seconds)"
    if policy is CatchupPolicy.NONE:
        return prefix + ("" if other is TickOutcome.SKIPPED_PAUSED else "; catchup is none")
    if max_runs <= 0:
        return f"{prefix}; catchup_max_runs is 0"
    if policy is CatchupPolicy.LATEST:
        return f"{prefix}; catchup is latest: only the latest one runs"
    return f"{prefix}; over catchup_max_runs ({max_runs})"


def _last_n(spec: ScheduleSpec, lo: datetime, hi: datetime, n: int) -> list[Occurrence]:
    """The last ``n`` occurrences in ``(lo, hi]``, without walking the whole range: look back
    from ``hi`` over a growing span until it holds ``n`` (or reaches ``lo``)."""
    bound = 4 * n + 10_000
    short = timedelta(0)  # a span known to hold fewer than n
    span = timedelta(minutes=1)
    while True:
        start = max(lo, hi - span)
        found = _search(occurrences_between, spec, start, hi, bound)
        if len(found) < bound and (len(found) >= n or start == lo):
            return found[-n:]
        if len(found) < n:
            short, span = span, span * 4
            continue
        # Too many to list: narrow down between the short span and this one.
        while span - short > _MICRO:
            middle = short + (span - short) / 2
            found = _search(occurrences_between, spec, max(lo, hi - middle), hi, bound)
            if len(found) < n:
                short = middle
            elif len(found) >= bound:
                span = middle
            else:
                return found[-n:]
        return found[-n:]
