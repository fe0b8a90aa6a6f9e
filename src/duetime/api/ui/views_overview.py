"""The overview (counts by status, what is held after failing, open circuits, and charts of
recent activity) and workers (pull workers seen lately and the leases running).

Bounded reads only: counts and lag come from ``queue_stats`` (what ``GET /v1/queues`` shows);
the charts from the newest :data:`SAMPLE` tasks of each status that matters (``task_list`` over
the ``(tenant, status, id)`` index), binned by when they finished or started. A chart whose
sample does not reach back to the window's start says so ("partial").
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import Response

from duetime.api.routes.queues import queue_name
from duetime.api.ui import charts
from duetime.api.ui.pages import html, serve
from duetime.api.ui.session import UiCall
from duetime.api.ui.views_dead import circuits_holding, held_tasks
from duetime.api.ui.views_tasks import running_page
from duetime.errors import ValidationError
from duetime.types import Task, TaskFilter, TaskStatus

router = APIRouter(prefix="/ui")

SAMPLE = 400
"""Newest tasks read per status for the charts."""
HELD_COUNTED = SAMPLE
"""Tasks held after failing counted for the overview (beyond it: "400+")."""
RUNNING_PAGE = 50
WORKER_WINDOWS = {"1m": 60.0, "5m": 300.0, "1h": 3600.0, "24h": 86400.0}


async def _newest(call: UiCall, status: TaskStatus, queue: str | None) -> list[Task]:
    query = TaskFilter(tenant_id=call.tenant_id, statuses=(status,), queue=queue, limit=SAMPLE)
    return await call.store.task_list(query)


def _reaches(tasks: Sequence[Task], start: datetime, when: str) -> bool:
    """Whether a sample covers the window: it is not full, or its oldest item is older."""
    if len(tasks) < SAMPLE:
        return True
    oldest = getattr(tasks[-1], when) or tasks[-1].updated_at
    return bool(oldest < start)


async def activity(call: UiCall, now: datetime, window: str, queue: str | None) -> dict[str, Any]:
    """The overview's three charts over ``window`` ending ``now``, and the noisiest queues."""
    span = charts.WINDOWS[window]
    edges = charts.bucket_edges(now, span)
    succeeded, failed, retrying, running = await asyncio.gather(
        _newest(call, TaskStatus.SUCCEEDED, queue),
        _newest(call, TaskStatus.FAILED, queue),
        _newest(call, TaskStatus.RETRYING, queue),
        _newest(call, TaskStatus.RUNNING, queue),
    )
    done_ok = [t.finished_at for t in succeeded if t.finished_at]
    done_failed = [t.finished_at for t in failed if t.finished_at]
    # A retrying task's updated_at is when its last attempt failed.
    retry_failed = [t.updated_at for t in retrying]
    throughput = charts.bar_chart(
        "Finished tasks",
        edges,
        [
            charts.Series("succeeded", "c-ok", charts.count_in_buckets(edges, done_ok)),
            charts.Series("failed", "c-bad", charts.count_in_buckets(edges, done_failed)),
        ],
    )
    failures = charts.bar_chart(
        "Failures",
        edges,
        [
            charts.Series("retrying", "c-warn", charts.count_in_buckets(edges, retry_failed)),
            charts.Series("dead-lettered", "c-bad", charts.count_in_buckets(edges, done_failed)),
        ],
    )
    # Due lag: how late an attempt started after it was due (its task's due_at, which a
    # retrying task has already moved on to the next attempt, so those are left out).
    lags = [
        (t.started_at, max(0.0, (t.started_at - t.due_at).total_seconds()))
        for t in (*succeeded, *failed, *running)
        if t.started_at is not None
    ]
    due_lag = charts.bar_chart(
        "Due lag (p95 of attempts started)",
        edges,
        [charts.Series("p95 lag", "c-lag", charts.lag_in_buckets(edges, lags))],
        unit="s",
    )
    start = edges[0]
    noisy = Counter(
        t.queue for t in (*failed, *retrying) if (t.finished_at or t.updated_at) >= start
    )
    partial = not (
        _reaches(succeeded, start, "finished_at")
        and _reaches(failed, start, "finished_at")
        and _reaches(retrying, start, "updated_at")
    )
    return {
        "charts": [throughput, failures, due_lag],
        "noisy": noisy.most_common(5),
        "partial": partial,
        "sample": SAMPLE,
    }


@router.get("")
@router.get("/")
async def overview_page(request: Request, window: str = "1h", queue: str = "") -> Response:
    async def view(request: Request, call: UiCall) -> Response:
        if window not in charts.WINDOWS:
            raise ValidationError(f"window is one of {', '.join(charts.WINDOWS)}", field="window")
        picked = queue_name(queue) if queue else None
        now = await call.store.now()
        circuits = await call.store.circuit_list(call.tenant_id)
        holding = circuits_holding(call, circuits, now)
        stats, recent, held = await asyncio.gather(
            call.store.queue_stats(call.tenant_id),
            activity(call, now, window, picked),
            held_tasks(call, picked, None, HELD_COUNTED + 1, holding),
        )
        counts = dict.fromkeys((s.value for s in TaskStatus), 0)
        for s in stats:
            for status, n in s.counts.items():
                counts[status.value] += n
        lags = [s.oldest_due_lag_seconds for s in stats if s.oldest_due_lag_seconds is not None]
        return html(
            request,
            "overview.html",
            call=call,
            now=now,
            counts=counts,
            total=sum(counts.values()),
            oldest_lag=max(lags) if lags else None,
            queues=sorted(s.name for s in stats),
            window=window,
            windows=list(charts.WINDOWS),
            queue=queue,
            held=min(len(held), HELD_COUNTED),
            held_more=len(held) > HELD_COUNTED,
            open_circuits=[c for c in circuits if c.state != "closed"],
            **recent,
        )

    return await serve(request, view)


@router.get("/workers")
async def workers_page(request: Request, seen: str = "5m", cursor: str = "") -> Response:
    async def view(request: Request, call: UiCall) -> Response:
        if seen not in WORKER_WINDOWS:
            raise ValidationError(f"seen is one of {', '.join(WORKER_WINDOWS)}", field="seen")
        workers, (running, next_cursor) = await asyncio.gather(
            call.store.worker_list(call.tenant_id, WORKER_WINDOWS[seen]),
            running_page(call, cursor, RUNNING_PAGE),
        )
        return html(
            request,
            "workers.html",
            call=call,
            now=await call.store.now(),
            workers=workers,
            running=running,
            next_cursor=next_cursor,
            seen=seen,
            windows=list(WORKER_WINDOWS),
            paged=bool(cursor),
        )

    return await serve(request, view)
