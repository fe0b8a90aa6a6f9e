"""Fire times of a :class:`ScheduleSpec`: pure functions over explicit instants (no clock)."""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from duetime.errors import ValidationError
from duetime.schedule.cron_expr import CronExpr, parse_cron
from duetime.schedule.dst import DstPolicy, Event, earliest_wall, local_wall, note, resolve
from duetime.schedule.every_expr import Every, parse_every
from duetime.schedule.rrule_expr import RRuleExpr, parse_rrule
from duetime.schedule.spec import ScheduleSpec

_ONE_MICROSECOND = timedelta(microseconds=1)
# A run of this many dropped (DST-skipped) instants without a single run ends the search: a
# schedule whose every occurrence falls in a gap must not scan to year 9999.
_MAX_SKIPPED_IN_A_ROW = 500


@dataclass(frozen=True, slots=True)
class Occurrence:
    """One fire time.

    ``nominal`` is the UTC instant that becomes the task's ``scheduled_for`` (before jitter).
    ``note`` says why it moved or repeats (a DST gap or fold), else ``None``. ``kind`` is ``None``
    for a plain run, ``"dst_shifted"`` for a wall time in a DST gap that runs right after the
    jump (tick outcome ``dst_shifted``), or ``"dst_repeat"`` for the second run of a wall time
    that occurs twice under ``dst.ambiguous = "both"`` (an ordinary ``fired`` tick).
    """

    nominal: datetime
    note: str | None = None
    kind: str | None = None


@dataclass(frozen=True)
class Compiled:
    """A spec with its expression parsed and its DST policy decided (package-internal)."""

    spec: ScheduleSpec
    policy: DstPolicy
    cron: CronExpr | None
    every: Every | None
    rrule: RRuleExpr | None
    end: datetime | None  # end_at, or the rrule's UNTIL if earlier


@functools.lru_cache(maxsize=8192)
def compile_spec(spec: ScheduleSpec) -> Compiled:
    """Parse ``spec``'s expression once (cached); raises :class:`ValidationError`."""
    zone = spec.zone
    cron = every = rule = None
    real_time = False
    end = spec.end_at
    if spec.kind == "cron":
        cron = parse_cron(spec.expression)
        real_time = not cron.fixed_time
    elif spec.kind == "every":
        every = parse_every(spec.expression)
        real_time = not every.is_calendar
    else:
        start = spec.start_at or spec.anchor
        if start is None:
            raise ValidationError("rrule needs start_at or an anchor", field="start_at")
        dtstart = local_wall(start, zone)
        if spec.start_at is None:
            dtstart = dtstart.replace(hour=0, minute=0, second=0, microsecond=0)
        rule = parse_rrule(spec.expression, zone, dtstart)
        real_time = rule.real_time
        if rule.until is not None and (end is None or rule.until < end):
            end = rule.until
    policy = DstPolicy(zone, real_time, spec.dst_nonexistent, spec.dst_ambiguous)
    return Compiled(spec, policy, cron, every, rule, end)


def _every_events(c: Compiled, every: Every, lower: datetime) -> Iterator[Event]:
    anchor = c.spec.start_at or c.spec.anchor
    if anchor is None:
        raise ValidationError("every needs start_at or an anchor", field="start_at")
    if not every.is_calendar:
        k = max(0, (lower - anchor) // every.exact + 1) if lower >= anchor else 0
        while True:
            try:
                yield Event(anchor + k * every.exact, False)
            except OverflowError:
                return
            k += 1
    # Step back a few steps from an estimate: month lengths and DST move a step's real length.
    k0 = max(0, (lower - anchor) // every.approx() - 3) if lower > anchor else 0
    anchor_wall = local_wall(anchor, c.policy.zone)

    def walls() -> Iterator[tuple[datetime, timedelta]]:
        k = k0
        while True:
            try:
                yield every.wall(anchor_wall, k), k * every.exact
            except (OverflowError, ValueError):
                return
            k += 1

    yield from resolve(walls(), c.policy)


def _events(c: Compiled, lower: datetime) -> Iterator[Event]:
    """Every event (runs and DST-skipped instants) after ``lower``, ascending, unbounded above."""
    if c.every is not None:
        events = _every_events(c, c.every, lower)
    else:
        start = earliest_wall(lower, c.policy.zone)
        source = c.cron if c.cron is not None else c.rrule
        assert source is not None
        events = resolve(((wall, timedelta()) for wall in source.walls_from(start)), c.policy)
    skipped_in_a_row = 0
    for event in events:
        if event.instant <= lower:
            continue
        skipped_in_a_row = skipped_in_a_row + 1 if event.skipped else 0
        if skipped_in_a_row > _MAX_SKIPPED_IN_A_ROW:
            return
        yield event


def _window(
    spec: ScheduleSpec, after: datetime, until: datetime | None
) -> tuple[Compiled, datetime, datetime | None]:
    if after.tzinfo is None or (until is not None and until.tzinfo is None):
        raise ValueError("instants must be timezone-aware")
    c = compile_spec(spec)
    lower = after.astimezone(UTC)
    if spec.start_at is not None and spec.start_at - _ONE_MICROSECOND > lower:
        lower = spec.start_at - _ONE_MICROSECOND  # at or after start_at
    upper = c.end
    if until is not None and (upper is None or until < upper):
        upper = until.astimezone(UTC)
    return c, lower, upper


def _occurrence(event: Event, c: Compiled) -> Occurrence:
    return Occurrence(event.instant, note(event, c.policy.zone), event.kind)


def occurrences_between(
    spec: ScheduleSpec, start: datetime, end: datetime | None, limit: int
) -> list[Occurrence]:
    """Fire times in ``(start, end]`` (``end=None``: no upper bound but ``end_at``), ascending.

    Also bounded by ``start_at``/``end_at`` (and an rrule's UNTIL); at most ``limit`` items.
    Wall times dropped by ``dst.nonexistent = "skip"`` are not included (see
    :func:`skipped_between`). Raises ``ValueError`` for naive instants.
    """
    c, lower, upper = _window(spec, start, end)
    found: list[Occurrence] = []
    if limit <= 0 or (upper is not None and upper <= lower):
        return found
    for event in _events(c, lower):
        if upper is not None and event.instant > upper:
            break
        if not event.skipped:
            found.append(_occurrence(event, c))
            if len(found) >= limit:
                break
    return found


def occurrences_after(spec: ScheduleSpec, after: datetime, count: int) -> list[Occurrence]:
    """The next ``count`` fire times strictly after ``after``, ascending, within
    ``[start_at, end_at]``. Fewer when the schedule ends. Raises ``ValueError`` for a naive
    ``after``."""
    return occurrences_between(spec, after, None, count)


def next_after(spec: ScheduleSpec, after: datetime) -> datetime | None:
    """The first fire time strictly after ``after`` (a schedule's ``next_run_at``), or None."""
    found = occurrences_between(spec, after, None, 1)
    return found[0].nominal if found else None


def skipped_between(
    spec: ScheduleSpec, start: datetime, end: datetime, limit: int = 1000
) -> list[tuple[datetime, str]]:
    """Instants in ``(start, end]`` whose wall times ``dst.nonexistent = "skip"`` dropped.

    Each is ``(instant, note)``: the instant the gap ended (when the run would have happened
    under ``run_after_gap``) and why, for a ``dst_skipped`` tick. Several wall times in one gap
    make one item. This instant can equal a real fire time (``0 2,3 * * *``: 02:00 is skipped at
    03:00, when 03:00 runs), so the tick ledger must tell them apart by outcome.
    """
    c, lower, upper = _window(spec, start, end)
    found: list[tuple[datetime, str]] = []
    if spec.dst_nonexistent != "skip" or c.policy.real_time or upper is None or upper <= lower:
        return found
    for event in _events(c, lower):
        if event.instant > upper:
            break
        if event.skipped:
            found.append((event.instant, note(event, c.policy.zone) or ""))
            if len(found) >= limit:
                break
    return found


def jitter_for(schedule_id: str, nominal: datetime, jitter_seconds: int) -> int:
    """Deterministic jitter in ``[0, jitter_seconds]`` for one occurrence.

    The same schedule and nominal instant always get the same value (so every node, and every
    retry of materialization, computes the same run time); different occurrences spread evenly.
    """
    if jitter_seconds <= 0:
        return 0
    stamp = nominal.astimezone(UTC).isoformat()
    digest = hashlib.sha256(f"{schedule_id}|{stamp}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % (jitter_seconds + 1)


def check_fires(spec: ScheduleSpec) -> None:
    """Parse the expression and make sure the schedule can fire at least once.

    Raises :class:`ValidationError` naming the expression's field when the syntax is wrong, the
    calendar never matches, nothing falls between ``start_at`` (or the anchor) and ``end_at``
    (or UNTIL, COUNT), or every time falls in a DST gap under ``dst.nonexistent = "skip"``.
    """
    c = compile_spec(spec)  # syntax and calendar errors
    reference = spec.start_at or spec.anchor
    if reference is None:
        return  # a cron expression whose calendar matches fires
    _, lower, upper = _window(spec, reference - _ONE_MICROSECOND, None)
    in_gaps = False
    for event in _events(c, lower):
        if upper is not None and event.instant > upper:
            break
        if not event.skipped:
            return
        in_gaps = True
    window = "after start_at" if spec.start_at else "after the schedule's creation"
    if upper is not None:
        window += " and before end_at" if upper == spec.end_at else " and before UNTIL"
    detail = f"{spec.kind} {spec.expression!r} never fires {window}"
    if in_gaps:
        detail += ": its times fall in DST gaps and dst.nonexistent is skip"
    raise ValidationError(detail, field=spec.kind)
