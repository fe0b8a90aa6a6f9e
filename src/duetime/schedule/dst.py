"""Local wall times to real instants, under the daylight-saving rules of SPEC §3.

Every expression kind (cron, every, rrule) first produces *wall times*: naive local datetimes in
the schedule's zone. This module turns them into UTC instants, in order, and says why an instant
moved. Two modes:

* **fixed time** (a cron job at a fixed hour and minute, a calendar ``every``, a daily-or-coarser
  rrule): a wall time inside a DST gap runs right after the jump (``dst.nonexistent =
  "run_after_gap"``) or is dropped and reported (``"skip"``); a wall time that occurs twice runs at
  its first instant (``dst.ambiguous = "first"``) or at both (``"both"``). This is Debian (Vixie)
  cron's behaviour, as the cronsim library models it, plus the two knobs.
* **real time** (wildcard or stepped hours: ``0 * * * *``, ``*/15 * * * *``, sub-daily rrules): the
  job fires whenever the wall clock shows a matching time, so a wall time in a gap never happens
  and one in a fold happens twice: the rhythm in real time is kept. The knobs do not apply.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Final
from zoneinfo import ZoneInfo

SHIFTED: Final = "dst_shifted"  # a nonexistent wall time that runs right after the gap
REPEAT: Final = "dst_repeat"  # the second run of a wall time that occurs twice ("both")
SKIPPED: Final = "dst_skipped"  # a nonexistent wall time dropped by dst.nonexistent = "skip"

NONEXISTENT_CHOICES: Final = ("run_after_gap", "skip")
AMBIGUOUS_CHOICES: Final = ("first", "both")


@dataclass(frozen=True, slots=True)
class DstPolicy:
    """How wall times become instants: the mode and, for fixed times, the two knobs."""

    zone: ZoneInfo
    real_time: bool
    nonexistent: str = "run_after_gap"
    ambiguous: str = "first"


@dataclass(order=True, slots=True)
class Event:
    """One instant a schedule produced: a run (``skipped`` false) or a dropped DST-gap time.

    ``kind`` is ``None`` for a plain run, else :data:`SHIFTED`, :data:`REPEAT` or :data:`SKIPPED`.
    ``gap_walls`` are the nonexistent wall times that moved here (or were dropped here);
    ``repeat_of`` is the wall time this run repeats. Both feed :func:`note`.
    """

    instant: datetime
    skipped: bool
    kind: str | None = field(default=None, compare=False)
    gap_walls: tuple[datetime, ...] = field(default=(), compare=False)
    repeat_of: datetime | None = field(default=None, compare=False)


def fmt_wall(wall: datetime) -> str:
    """``HH:MM`` (or ``HH:MM:SS`` when the seconds matter) of a wall time."""
    return wall.strftime("%H:%M:%S" if wall.second else "%H:%M")


def to_instant(wall: datetime, zone: ZoneInfo, fold: int = 0) -> datetime:
    """The UTC instant of naive ``wall`` in ``zone`` (``fold`` picks the instant in a fold)."""
    return wall.replace(tzinfo=zone, fold=fold).astimezone(UTC)


def local_wall(instant: datetime, zone: ZoneInfo) -> datetime:
    """The naive wall time that ``instant`` shows in ``zone``."""
    return instant.astimezone(zone).replace(tzinfo=None)


def note(event: Event, zone: ZoneInfo) -> str | None:
    """Why ``event`` moved, repeats or was dropped, for people; ``None`` for a plain run.

    E.g. ``02:30 does not exist on 2026-03-08 in America/New_York (DST gap); runs at 03:00``.
    """
    if event.repeat_of is not None:
        wall = event.repeat_of
        tzname = event.instant.astimezone(zone).tzname()
        return (
            f"{fmt_wall(wall)} occurs twice on {wall:%Y-%m-%d} in {zone.key} (DST fold); "
            f"second run, at {fmt_wall(wall)} {tzname} (dst.ambiguous=both)"
        )
    if not event.gap_walls:
        return None
    walls = [fmt_wall(w) for w in event.gap_walls]
    names = walls[0] if len(walls) == 1 else ", ".join(walls[:-1]) + " and " + walls[-1]
    verb = "does" if len(walls) == 1 else "do"
    text = f"{names} {verb} not exist on {event.gap_walls[0]:%Y-%m-%d} in {zone.key} (DST gap)"
    if event.skipped:
        return text + "; skipped (dst.nonexistent=skip)"
    return text + f"; runs at {fmt_wall(local_wall(event.instant, zone))}"


def gap_end(before: datetime, after: datetime, zone: ZoneInfo) -> datetime:
    """The first instant after a DST jump lying in ``(before, after]`` (both UTC).

    ``before`` shows the offset in force before the jump, ``after`` the one after it; transitions
    fall on whole seconds, so a binary search over seconds finds the jump exactly.
    """
    target = after.astimezone(zone).utcoffset()
    lo, hi = 0, int((after - before).total_seconds())
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if (before + timedelta(seconds=mid)).astimezone(zone).utcoffset() == target:
            hi = mid
        else:
            lo = mid
    return before + timedelta(seconds=hi)


def _resolve_one(wall: datetime, extra: timedelta, policy: DstPolicy) -> list[Event]:
    zone = policy.zone
    first = to_instant(wall, zone, 0)
    second = to_instant(wall, zone, 1)
    if first == second:
        return [Event(first + extra, False)]
    if first < second:  # a fold: the wall time occurs twice
        if policy.real_time:
            return [Event(first + extra, False), Event(second + extra, False)]
        if policy.ambiguous == "first":
            return [Event(first + extra, False)]
        return [Event(first + extra, False), Event(second + extra, False, REPEAT, (), wall)]
    # A gap: fold=0 reads the wall time with the offset from before the jump, which lands after
    # it; fold=1 with the offset from after the jump, which lands before it.
    if policy.real_time:
        return []
    jump = gap_end(second, first, zone) + extra
    if policy.nonexistent == "skip":
        return [Event(jump, True, SKIPPED, (wall,))]
    return [Event(jump, False, SHIFTED, (wall,))]


def _merge(a: Event, b: Event) -> Event:
    # Two wall times reached the same instant (several gap times shifted to the end of the
    # gap, or a shifted one meeting a plain one): one run. A plain run wins the kind.
    kind = None if a.kind is None or b.kind is None else a.kind
    return Event(a.instant, a.skipped, kind, a.gap_walls + b.gap_walls, a.repeat_of or b.repeat_of)


def resolve(walls: Iterable[tuple[datetime, timedelta]], policy: DstPolicy) -> Iterator[Event]:
    """Turn ascending wall times into ascending, de-duplicated events.

    Each item is ``(wall, extra)``: a naive local wall time and an exact duration added after the
    wall time is resolved (used by ``every`` with a time part; usually zero). Wall times must be
    strictly ascending and ``extra`` non-decreasing. Events at equal instants merge. The second
    instant of a folded wall time can come after the first instants of later wall times, so
    events wait in a heap until no later wall time can produce anything earlier.
    """
    heap: list[Event] = []
    held: Event | None = None  # the last event popped, kept until the next one differs

    def pop_before(limit: datetime | None) -> Iterator[Event]:
        nonlocal held
        while heap and (limit is None or heap[0].instant < limit):
            event = heapq.heappop(heap)
            if held is not None and (held.instant, held.skipped) == (event.instant, event.skipped):
                held = _merge(held, event)
                continue
            if held is not None:
                yield held
            held = event

    for wall, extra in walls:
        events = _resolve_one(wall, extra, policy)
        for event in events:
            heapq.heappush(heap, event)
        if events:
            # Every later wall time resolves at or after this one's first instant.
            yield from pop_before(min(e.instant for e in events))
    yield from pop_before(None)
    if held is not None:
        yield held


def earliest_wall(after: datetime, zone: ZoneInfo) -> datetime:
    """A wall time at or before every wall time that can resolve to an instant after ``after``.

    An instant ``u > after`` shows the wall time ``u + offset(u)``; the smallest offset in force
    over the next day bounds that from below (a fold moves the wall clock back by at most that
    difference, and zones do not change offset twice within a day).
    """
    offsets = []
    for hours in (0, 6, 12, 18, 24, 30):
        probe = after + timedelta(hours=hours)
        offset = probe.astimezone(zone).utcoffset()
        assert offset is not None
        offsets.append(offset)
    return (after.astimezone(UTC) + min(offsets)).replace(tzinfo=None)
