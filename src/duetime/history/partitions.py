"""Time partitions of the history (pure rules both stores and the maintenance service use).

History is cut into calendar months (UTC). The hot store keeps the months of the last
``DUETIME_HOT_DAYS`` days and the ones ahead (PostgreSQL: one partition per month, created ahead
by the leader); a month that ended more than ``hot_days`` ago is due for export to the cold tier
and then leaves the store (a partition dropped, never a mass DELETE on PostgreSQL).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, date, datetime, timedelta

MONTHS_AHEAD = 2
"""Partitions made ahead of the current month, so the leader can be down for weeks."""


def month_of(when: datetime) -> date:
    """The first day of ``when``'s month (UTC)."""
    at = when.astimezone(UTC)
    return date(at.year, at.month, 1)


def next_month(month: date) -> date:
    """The first day of the month after ``month``."""
    return date(month.year + 1, 1, 1) if month.month == 12 else date(month.year, month.month + 1, 1)


def month_bounds(month: date) -> tuple[datetime, datetime]:
    """``[start, end)`` of ``month`` as UTC instants."""
    start = datetime(month.year, month.month, 1, tzinfo=UTC)
    end_day = next_month(month)
    return start, datetime(end_day.year, end_day.month, 1, tzinfo=UTC)


def months_ahead(now: datetime, ahead: int = MONTHS_AHEAD) -> list[date]:
    """The current month and the ``ahead`` after it."""
    months = [month_of(now)]
    for _ in range(ahead):
        months.append(next_month(months[-1]))
    return months


def hot_cutoff(now: datetime, hot_days: int) -> datetime:
    """Records before this instant belong to the cold tier."""
    return now - timedelta(days=hot_days)


def months_due_for_export(months: Iterable[date], now: datetime, hot_days: int) -> list[date]:
    """The months among ``months`` that ended before the hot cutoff, oldest first."""
    cutoff = hot_cutoff(now, hot_days)
    return sorted(m for m in set(months) if month_bounds(m)[1] <= cutoff)


def month_label(month: date) -> str:
    """``2026-01``: how the archive names a month."""
    return f"{month.year:04d}-{month.month:02d}"


def months_between(
    since: datetime | None, until: datetime | None, known: Iterable[date]
) -> list[date]:
    """The months among ``known`` that overlap ``[since, until)`` (None = unbounded): the
    partition pruning of cold reads."""
    chosen = []
    for month in known:
        start, end = month_bounds(month)
        if (since is None or end > since) and (until is None or start < until):
            chosen.append(month)
    return sorted(chosen)


def export_needed(manifest: Mapping[str, int] | None, hot: Mapping[str, int]) -> bool:
    """Whether a month must be (re)written to the archive before it may leave the store.

    No manifest: yes (never exported, or a node died before it finished — the files are simply
    written again). A manifest whose counts cover every hot count: no — the month was exported
    and verified, and a removal that was cut short (SQLite deletes in batches) just goes on.
    Otherwise (records the archive does not hold): yes.
    """
    if manifest is None:
        return True
    return any(n > manifest.get(tenant, 0) for tenant, n in hot.items())
