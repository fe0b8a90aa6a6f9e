"""Bulk replay and cancel by filter (SPEC §3: ``POST /v1/tasks/replay``, ``POST /v1/tasks/cancel``).

An operator recovering from an outage replays the dead-letter set by filter, not one id at a time.
Both calls walk the tasks matching the list filters (newest first, the order of ``GET /v1/tasks``),
at most ``max_tasks`` of them, and change each through the single-task store call
(:meth:`~duetime.store.protocols.Store.task_retry` / ``task_cancel``), so every rule of the life
cycle — fencing, dependents failing, audit — is the one those calls keep. A task that moved on
between the read and the write (a race lost) counts as matched, not changed.

Throttling: the ``n``-th change is not made before ``n / rate_per_second`` seconds after the first,
so a replay of 10,000 tasks at 500/s releases them over 20 s instead of flooding the targets at
once. ``rate_per_second`` is at least :data:`MIN_BULK_RATE`: a walk lasts at most ``max_tasks``
seconds. The call answers when the walk is done: ``{"matched", "changed"}``.

A walk belongs to its caller: it stops when the caller disconnects, and when the node shuts down
(:class:`Walks`), so neither a vanished client nor a slow walk holds a node that is stopping.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, replace
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from duetime.api.fields import NO_CONTROL, CleanText, Rfc3339, Whole, rules
from duetime.api.schemas import Labels, Name, QueueName, StrictModel
from duetime.errors import Conflict, NotFound, ValidationError
from duetime.store.protocols import TaskStore
from duetime.types import TaskFilter, TaskStatus

MAX_BULK_TASKS = 100_000
MIN_BULK_RATE = 1.0
MAX_BULK_RATE = 100_000.0
_PAGE = 500
RUN_ORDER = "run_before must be later than run_after"

REPLAYABLE = (TaskStatus.FAILED, TaskStatus.CANCELLED)
"""What ``POST /v1/tasks/replay`` may touch; default: the dead-letter set (``failed``)."""
CANCELLABLE = tuple(s for s in TaskStatus if not s.terminal)
"""What ``POST /v1/tasks/cancel`` may touch; default: every one of them."""

Action = Literal["replay", "cancel"]
StatusWord = Literal[
    "scheduled", "blocked", "ready", "running", "retrying", "succeeded", "failed", "cancelled"
]


class BulkIn(StrictModel):
    """Which tasks (the filters of ``GET /v1/tasks``), how many at most, and how fast."""

    model_config = ConfigDict(json_schema_extra=rules(("run_before", RUN_ORDER)))

    status: Annotated[Sequence[StatusWord], Field(max_length=8)] | None = Field(
        default=None,
        description="Replay: `failed`/`cancelled` (default `failed`). Cancel: non-terminal "
        "statuses (default all of them).",
    )
    queue: QueueName | None = None
    name: Name | None = None
    schedule_id: (
        Annotated[str, Field(min_length=1, max_length=64, pattern=NO_CONTROL), CleanText] | None
    ) = None
    labels: Labels = Field(default_factory=dict)
    run_after: Rfc3339 | None = None
    run_before: Rfc3339 | None = None
    max_tasks: Annotated[int, Field(ge=1, le=MAX_BULK_TASKS), Whole] = 1000
    rate_per_second: Annotated[float, Field(ge=MIN_BULK_RATE, le=MAX_BULK_RATE)] = Field(
        default=100.0, description="Changes per second, at least 1."
    )


class ReplayIn(BulkIn):
    """:class:`BulkIn` of ``POST /v1/tasks/replay``: ``status`` among what a replay changes."""

    status: Annotated[Sequence[Literal["failed", "cancelled"]], Field(max_length=8)] | None = Field(
        default=None, description="`failed` and/or `cancelled` (default `failed`)."
    )


class CancelIn(BulkIn):
    """:class:`BulkIn` of ``POST /v1/tasks/cancel``: ``status`` among what a cancel changes."""

    status: (
        Annotated[
            Sequence[Literal["scheduled", "blocked", "ready", "running", "retrying"]],
            Field(max_length=8),
        ]
        | None
    ) = Field(default=None, description="Unfinished statuses (default all of them).")


class BulkOut(BaseModel):
    """What a bulk call did."""

    matched: int = Field(description="Tasks that matched the filter (at most max_tasks).")
    changed: int = Field(description="Tasks replayed or cancelled; the rest moved on meanwhile.")


@dataclass(slots=True)
class BulkResult:
    """``matched``: tasks found by the filter (≤ max_tasks); ``changed``: those changed. Counted
    as the walk goes, so a walk that is stopped still says what it did."""

    matched: int = 0
    changed: int = 0


class Walks:
    """The bulk walks running on one node: :meth:`close` (the node shutting down) cancels them
    and refuses new ones, so shutting down never waits for a walk."""

    def __init__(self) -> None:
        self._running: set[asyncio.Task[BulkResult]] = set()
        self.closed = False

    def start(self, walk: Coroutine[Any, Any, BulkResult]) -> asyncio.Task[BulkResult]:
        """Run ``walk`` as a task this registry cancels on :meth:`close`; a closed registry
        cancels it at once."""
        task = asyncio.ensure_future(walk)
        if self.closed:
            task.cancel()
            return task
        self._running.add(task)
        task.add_done_callback(self._running.discard)
        return task

    def close(self) -> None:
        """Cancel every running walk; later ones are cancelled as they start."""
        self.closed = True
        for task in list(self._running):
            task.cancel()


def bulk_statuses(action: Action, requested: Sequence[str] | None) -> tuple[TaskStatus, ...]:
    """The statuses a bulk ``action`` walks; ``ValidationError`` (field ``status``) for one the
    action cannot change, so a wrong filter changes nothing."""
    allowed = REPLAYABLE if action == "replay" else CANCELLABLE
    if not requested:
        return (TaskStatus.FAILED,) if action == "replay" else allowed
    chosen = tuple(dict.fromkeys(TaskStatus(word) for word in requested))
    refused = [s.value for s in chosen if s not in allowed]
    if refused:
        words = ", ".join(s.value for s in allowed)
        raise ValidationError(
            f"{action} cannot change {', '.join(refused)} tasks; status must be among {words}",
            field="status",
        )
    return chosen


def bulk_filter(tenant_id: str, action: Action, body: BulkIn) -> TaskFilter:
    """The store query of a bulk call (``ValidationError`` for an impossible status)."""
    if body.run_after and body.run_before and body.run_before <= body.run_after:
        raise ValidationError(RUN_ORDER, field="run_before")
    return TaskFilter(
        tenant_id=tenant_id,
        statuses=bulk_statuses(action, body.status),
        queue=body.queue,
        name=body.name,
        schedule_id=body.schedule_id,
        labels=dict(body.labels),
        run_after=body.run_after,
        run_before=body.run_before,
        limit=_PAGE,
    )


async def change_task(store: TaskStore, action: Action, tenant_id: str, task_id: str) -> bool:
    """Replay or cancel one task through its single-task store call; False when it moved on
    (its status no longer allows the change) or is not the tenant's: a race lost, not an
    error."""
    try:
        if action == "replay":
            await store.task_retry(tenant_id, task_id)
        else:
            await store.task_cancel(tenant_id, task_id)
    except (Conflict, NotFound):
        return False
    return True


async def bulk_change(
    store: TaskStore,
    action: Action,
    query: TaskFilter,
    *,
    max_tasks: int,
    rate_per_second: float,
    monotonic: Callable[[], float],
    sleep: Callable[[float], Awaitable[None]],
    done: BulkResult | None = None,
) -> BulkResult:
    """Replay or cancel up to ``max_tasks`` tasks matching ``query`` (newest first, below
    ``query.cursor`` when it is set), at most ``rate_per_second`` changes per second (see the
    module docstring). Counts into ``done`` (a new result when None) as it goes."""
    done = BulkResult() if done is None else done
    started = monotonic()
    cursor = query.cursor
    while done.matched < max_tasks:
        page = await store.task_list(
            replace(query, limit=min(_PAGE, max_tasks - done.matched), cursor=cursor)
        )
        if not page:
            break
        for task in page:
            delay = started + done.changed / rate_per_second - monotonic()
            if delay > 0:
                await sleep(delay)
            done.matched += 1
            # A task that moved on (or was retired) since the page was read is not changed.
            done.changed += await change_task(store, action, query.tenant_id, task.id)
        cursor = page[-1].id
    return done
