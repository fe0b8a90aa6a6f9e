"""The overview's charts as pure geometry: events in, SVG rectangles out (no I/O, no clock).

The dashboard draws its charts server-side as inline SVG, so it needs no chart library and no
JavaScript. :func:`bucket_edges` splits a window into equal buckets, :func:`count_in_buckets` and
:func:`lag_in_buckets` fold timestamped events into them, and :func:`bar_chart` turns per-bucket
series into :class:`Bar` rectangles (stacked when there are several series) in a fixed
``WIDTH`` by ``HEIGHT`` view box that the template scales to the page.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

WIDTH = 420
"""Width of a chart's view box, in SVG user units."""
HEIGHT = 110
"""Height of the plot area; axis labels live outside it (see ``MARGIN_*``)."""
MARGIN_LEFT = 52
MARGIN_BOTTOM = 18
MARGIN_TOP = 8

WINDOWS: dict[str, timedelta] = {
    "15m": timedelta(minutes=15),
    "1h": timedelta(hours=1),
    "6h": timedelta(hours=6),
    "24h": timedelta(hours=24),
}
"""The time windows the overview offers, by their query value."""
BUCKETS = 30
"""Buckets per chart, whatever the window."""


@dataclass(frozen=True, slots=True)
class Series:
    """One named series: a value per bucket. ``css`` names its colour class in style.css."""

    name: str
    css: str
    values: Sequence[float]


@dataclass(frozen=True, slots=True)
class Bar:
    """One rectangle of a chart, in view-box units, with its hover text."""

    x: float
    y: float
    width: float
    height: float
    css: str
    title: str


@dataclass(frozen=True, slots=True)
class Chart:
    """What the chart macro draws: bars, the y-axis top label, the x-axis end labels and a
    legend."""

    title: str
    bars: tuple[Bar, ...]
    y_max_label: str
    x_start_label: str
    x_end_label: str
    legend: tuple[tuple[str, str], ...]
    empty: bool
    view_box: str = f"0 0 {MARGIN_LEFT + WIDTH} {MARGIN_TOP + HEIGHT + MARGIN_BOTTOM}"
    plot_left: int = MARGIN_LEFT
    plot_top: int = MARGIN_TOP
    plot_bottom: int = MARGIN_TOP + HEIGHT
    plot_right: int = MARGIN_LEFT + WIDTH


def bucket_edges(end: datetime, window: timedelta, buckets: int = BUCKETS) -> list[datetime]:
    """``buckets + 1`` instants from ``end - window`` to ``end``, equally spaced."""
    step = window / buckets
    start = end - window
    return [start + step * i for i in range(buckets + 1)]


def _index(edges: Sequence[datetime], at: datetime) -> int | None:
    """The bucket holding ``at`` (``[edge_i, edge_i+1)``, the last one closed), or None."""
    start, end = edges[0], edges[-1]
    if at < start or at > end:
        return None
    step = (end - start) / (len(edges) - 1)
    return min(int((at - start) / step), len(edges) - 2)


def count_in_buckets(edges: Sequence[datetime], times: Iterable[datetime]) -> list[int]:
    """How many of ``times`` fall in each bucket; times outside the window are ignored."""
    counts = [0] * (len(edges) - 1)
    for at in times:
        i = _index(edges, at)
        if i is not None:
            counts[i] += 1
    return counts


def percentile(values: Sequence[float], fraction: float) -> float:
    """The nearest-rank percentile of ``values`` (not empty), ``fraction`` in [0, 1]."""
    ordered = sorted(values)
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]


def lag_in_buckets(
    edges: Sequence[datetime], samples: Iterable[tuple[datetime, float]], fraction: float = 0.95
) -> list[float]:
    """Per bucket, the ``fraction`` percentile of the lags (seconds) whose instant falls in it;
    0 for an empty bucket."""
    found: list[list[float]] = [[] for _ in range(len(edges) - 1)]
    for at, lag in samples:
        i = _index(edges, at)
        if i is not None:
            found[i].append(lag)
    return [percentile(lags, fraction) if lags else 0.0 for lags in found]


def nice_ceiling(value: float) -> float:
    """The smallest 1, 2 or 5 times 10^k at or above ``value`` (1 for nothing), so the y axis
    ends on a round number."""
    if value <= 0:
        return 1.0
    magnitude = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 5, 10):
        if step * magnitude >= value:
            return float(step * magnitude)
    return float(10 * magnitude)


def _label(value: float, unit: str) -> str:
    if unit == "s":
        return format_seconds(value)
    return f"{value:g}"


def format_seconds(seconds: float) -> str:
    """A duration for people: ``850 ms``, ``12.5 s``, ``4m 10s``, ``3h 5m``, ``2d 4h``."""
    if seconds < 0.01:
        return f"{seconds * 1000:.1f} ms"
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.3g} s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m {secs}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours}h {minutes}m"
    days, hours = divmod(hours, 24)
    return f"{days}d {hours}h"


def bar_chart(
    title: str, edges: Sequence[datetime], series: Sequence[Series], unit: str = ""
) -> Chart:
    """Bars per bucket, the series stacked bottom-up in the given order. ``unit`` ``"s"`` labels
    values as durations; anything else as plain numbers."""
    buckets = len(edges) - 1
    totals = [sum(s.values[i] for s in series) for i in range(buckets)]
    top = nice_ceiling(max(totals, default=0.0))
    slot = WIDTH / buckets
    gap = min(2.0, slot * 0.2)
    bars: list[Bar] = []
    for i in range(buckets):
        base = 0.0
        when = f"{edges[i]:%H:%M}-{edges[i + 1]:%H:%M} UTC"
        for s in series:
            value = s.values[i]
            if value <= 0:
                continue
            height = value / top * HEIGHT
            y = MARGIN_TOP + HEIGHT - (base + value) / top * HEIGHT
            bars.append(
                Bar(
                    x=round(MARGIN_LEFT + i * slot + gap / 2, 2),
                    y=round(y, 2),
                    width=round(slot - gap, 2),
                    height=round(max(height, 0.5), 2),
                    css=s.css,
                    title=f"{when}: {s.name} {_label(value, unit)}",
                )
            )
            base += value
    return Chart(
        title=title,
        bars=tuple(bars),
        y_max_label=_label(top, unit),
        x_start_label=f"{edges[0]:%H:%M}",
        x_end_label=f"{edges[-1]:%H:%M} UTC",
        legend=tuple((s.name, s.css) for s in series),
        empty=not bars,
    )
