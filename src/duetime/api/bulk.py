"""Bulk replay and cancel by filter (SPEC §3: ``POST /v1/tasks/replay``, ``POST /v1/tasks/cancel``).

An operator recovering from an outage replays the dead-letter set by filter, not one id at a time.
Both calls walk the tasks matching the list filters (newest first, the order of ``GET /v1/tasks``),
at most ``max_tasks`` of them, and change each through the single-task store call
(:meth:`~duetime.store.protocols.Store.task_retry` / ``task_cancel``), so every rule of the life
cycle — fencing, dependents failing, audit — is the one those calls keep. A task that moved on
between the read and the write (a race lost) counts as matched, not changed.

Throttling: the ``n``-th change is not made before ``n / rate_per_second`` seconds after the first,
so a replay of 10,000 tasks at 500/s releases them over 20 s instead of flooding the targets at
once. The call answers when the walk is done: ``{"matched", "changed"}``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Annotated, Literal

from pydantic import BaseModel, Field

from duetime.api.fields import Rfc3339
from duetime.api.schemas import Labels, Name, QueueName, StrictModel
from duetime.errors import Conflict, NotFound, ValidationError
from duetime.store.protocols import TaskStore
from duetime.types import TaskFilter, TaskStatus

MAX_BULK_TASKS = 100_000
MAX_BULK_RATE = 100_000.0
_PAGE = 500

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

    status: list[StatusWord] | None = Field(
        default=None,
        max_length=8,
        description="Replay: `failed`/`cancelled` (default `failed`). Cancel: non-terminal "
        "statuses (default all of them).",
    )
    queue: QueueName | None = None
    name: Name | None = None
    schedule_id: Annotated[str, Field(min_length=1, max_length=64)] | None = None
    labels: Labels = Field(default_factory=dict)
    run_after: Rfc3339 | None = None
    run_before: Rfc3339 | None = None
    max_tasks: Annotated[int, Field(ge=1, le=MAX_BULK_TASKS)] = 1000
    rate_per_second: Annotated[float, Field(gt=0, le=MAX_BULK_RATE)] = 100.0


class BulkOut(BaseModel):
    """What a bulk call did."""

    matched: int = Field(description="Tasks that matched the filter (at most max_tasks).")
    changed: int = Field(description="Tasks replayed or cancelled; the rest moved on meanwhile.")


@dataclass(frozen=True, slots=True)
class BulkResult:
    """``matched``: tasks found by the filter (≤ max_tasks); ``changed``: those changed."""

    matched: int
    changed: int


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
        raise ValidationError("run_before must be later than run_after", field="run_before")
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


async def bulk_change(
    store: TaskStore,
    action: Action,
    query: TaskFilter,
    *,
    max_tasks: int,
    rate_per_second: float,
    monotonic: Callable[[], float],
    sleep: Callable[[float], Awaitable[None]],
) -> BulkResult:
    """Replay or cancel up to ``max_tasks`` tasks matching ``query``, at most
    ``rate_per_second`` changes per second (see the module docstring)."""
    matched = changed = 0
    started = monotonic()
    cursor: str | None = None
    while matched < max_tasks:
        page = await store.task_list(
            replace(query, limit=min(_PAGE, max_tasks - matched), cursor=cursor)
        )
        if not page:
            break
        for task in page:
            delay = started + changed / rate_per_second - monotonic()
            if delay > 0:
                await sleep(delay)
            matched += 1
            try:
                if action == "replay":
                    await store.task_retry(query.tenant_id, task.id)
                else:
                    await store.task_cancel(query.tenant_id, task.id)
            except (Conflict, NotFound):
                continue  # it moved on (or was retired) since the page was read
            changed += 1
        cursor = page[-1].id
    return BulkResult(matched=matched, changed=changed)
