"""A CPU budget for evaluating schedule expressions.

Finding the next fire time is a search, and some expressions make it long: dateutil expands
``FREQ=SECONDLY;BYMONTH=2;BYMONTHDAY=29;BYDAY=MO;BYHOUR=23`` by stepping through every second of
every day until a Monday 29 February comes round, minutes of CPU inside one call that never
returns to us. No check between occurrences can stop that, so the budget counts *work* instead:
while :func:`within_budget` is active, every Python function call and return in this thread (the
profiler hook, :func:`sys.setprofile`) spends one unit, and the search is abandoned when the units
run out. Counting calls rather than wall time makes the answer the same on a loaded machine as on
an idle one: an expression is accepted or refused deterministically.

The API evaluates under a budget whenever it evaluates on a tenant's behalf (create, PATCH,
``upcoming``, backfill, reads); a refused search is a 422 naming the field. The materializer's
plan (:mod:`duetime.schedule.plan`) runs its searches under one too. The hook slows the code it
watches (1.5x for a typical cron search, more for call-heavy code), so it wraps searches only,
never a whole hot loop.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from types import FrameType
from typing import Any

from duetime.errors import ValidationError

DEFAULT_BUDGET = 1_000_000
"""Work units (Python calls and returns) one evaluation may spend: about 0.2 s of CPU on a
current core under the hook; an ordinary expression needs a few thousand for 100 fire times."""


class BudgetExceeded(ValidationError):
    """An evaluation ran out of its budget; ``field`` names what the caller should change."""


class _Exhausted(BaseException):
    # A BaseException so that no ``except Exception`` inside the evaluated code swallows it.
    pass


class Budget:
    """Work units that several evaluations may share (e.g. every schedule of one list page)."""

    def __init__(self, units: int = DEFAULT_BUDGET) -> None:
        self.units = units
        self.left = units

    @contextmanager
    def spend(self, field: str, what: str) -> Iterator[None]:
        """Run the body on what is left of the budget; when it runs out, raise
        :class:`BudgetExceeded` (``field``; the detail says ``what`` could not be computed).

        Not reentrant: an inner budget replaces the outer one until it ends. Any profiler
        active in this thread is suspended meanwhile and restored afterwards.
        """
        if self.left <= 0:
            raise self._exceeded(field, what)
        previous = sys.getprofile()

        def count(frame: FrameType, event: str, arg: Any) -> None:
            self.left -= 1
            if self.left < 0:
                raise _Exhausted

        sys.setprofile(count)
        try:
            yield
        except _Exhausted:
            raise self._exceeded(field, what) from None
        finally:
            sys.setprofile(previous)

    def _exceeded(self, field: str, what: str) -> BudgetExceeded:
        return BudgetExceeded(
            f"{what} cannot be computed within the evaluation budget "
            f"({self.units:,} steps); use a simpler expression",
            field=field,
        )


def within_budget(
    field: str, what: str, units: int = DEFAULT_BUDGET
) -> AbstractContextManager[None]:
    """A context manager: the body may spend at most ``units`` (see :meth:`Budget.spend`)."""
    return Budget(units).spend(field, what)
