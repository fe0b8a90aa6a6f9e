"""The only place that reads the wall clock.

Production code asks the *store* for "now" (the database clock is the time authority across nodes);
a :class:`Clock` is injected where a process needs time of its own (sleeping, measuring durations)
and where tests pin time with :class:`FakeClock`.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    """A source of time. ``pinned()`` returns the time a store must use, or ``None`` to let the
    store use its own clock (``now()`` in PostgreSQL)."""

    def now(self) -> datetime: ...

    def monotonic(self) -> float: ...

    def pinned(self) -> datetime | None: ...

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """Real time; stores use their own clock."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return time.monotonic()

    def pinned(self) -> datetime | None:
        return None

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class FakeClock:
    """A clock that moves only when told to; stores use its time instead of their own."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2030, 1, 1, tzinfo=UTC)
        self._mono = 0.0

    def now(self) -> datetime:
        return self._now

    def monotonic(self) -> float:
        return self._mono

    def pinned(self) -> datetime | None:
        return self._now

    def advance(self, seconds: float) -> datetime:
        self._now += timedelta(seconds=seconds)
        self._mono += seconds
        return self._now

    def set(self, when: datetime) -> None:
        self._mono += (when - self._now).total_seconds()
        self._now = when

    async def sleep(self, seconds: float) -> None:
        # Yield to the loop without passing real time; tests advance the clock themselves.
        await asyncio.sleep(0)


def utcnow() -> datetime:
    """Real UTC time, for code that must stamp something outside any store."""
    return datetime.now(UTC)
