"""Waiting for a task's result (SPEC §3 "Waiting for a result"): handles on tasks you started.

::

    run = await client.submit(target=worker_target(), name="resize", payload={"id": 7})
    thumbnail = await run.result(timeout=30)     # the result, once the task succeeded

    with Client() as client:
        run = client.submit(target=worker_target(), name="resize", payload={"id": 7})
        thumbnail = run.result(timeout=30)

A wait is ``GET /v1/tasks/{id}?wait=`` (at most 60 s a call, called again until ``timeout``):
the server answers the moment the task ends, woken by the end itself, so a wait costs the node
no thread, connection or poll of its own and costs the client one request a minute.
:meth:`TaskRun.result` returns the result of a task that ``succeeded``, raises
:class:`TaskFailed` for one that ``failed`` or was ``cancelled``, and ``TimeoutError`` when
``timeout`` runs out first (the task goes on).
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar, Unpack

from duetime import errors
from duetime.sdk._http import _Api, _segment
from duetime.sdk.models import Task, TaskSpec, TaskSpecFields
from duetime.types import TaskStatus

__all__ = ["SyncTaskRun", "TaskFailed", "TaskRun", "WaitCalls"]

MAX_WAIT_SECONDS = 60.0
"""The server answers one wait call within this long."""

T = TypeVar("T")


class TaskFailed(errors.DuetimeError):
    """The task ended without a result: ``failed`` (``error`` is its last error) or
    ``cancelled``. ``task`` is the task as it ended."""

    def __init__(self, task: Task) -> None:
        self.task = task
        self.status = task.status
        self.error = task.last_error
        super().__init__(f"task {task.id} {task.status.value}: {task.last_error or 'no error'}")


def _deadline(timeout: float | None) -> float:
    return math.inf if timeout is None else time.monotonic() + max(0.0, timeout)


class WaitCalls(_Api):
    """``GET /v1/tasks/{id}?wait=``: wait for a task's end; handles on tasks."""

    async def wait_task(self, task_id: str, timeout: float | None = None) -> Task:
        """The task once it has ended, or as it is when ``timeout`` seconds ran out (None:
        wait as long as it takes). Raises ``ApiNotFound``."""
        until = _deadline(timeout)
        while True:
            left = min(MAX_WAIT_SECONDS, until - time.monotonic())
            wait = max(0.0, left)
            response = await self._send(
                "GET",
                f"/v1/tasks/{_segment(task_id)}",
                params=[("wait", round(wait, 3))] if wait > 0 else None,
                extra_read_seconds=wait,
            )
            task = Task.model_validate_json(response.content)
            if task.status.terminal or time.monotonic() >= until:
                return task

    async def task_result(self, task_id: str, timeout: float | None = None) -> Any:
        """The result of the task once it succeeded; :class:`TaskFailed` when it failed or
        was cancelled; ``TimeoutError`` when ``timeout`` ran out first."""
        task = await self.wait_task(task_id, timeout)
        return outcome(task)

    def task_run(self, task_id: str) -> TaskRun:
        """A handle on the task ``task_id`` (no call is made)."""
        return TaskRun(self, task_id)

    async def submit(
        self, spec: TaskSpec | None = None, /, **fields: Unpack[TaskSpecFields]
    ) -> TaskRun:
        """Create a task (as :meth:`~duetime.sdk.client.AsyncClient.create_task`) and return a
        handle whose :meth:`TaskRun.result` waits for its result."""
        create: Callable[..., Awaitable[Task]] = self.create_task  # type: ignore[attr-defined]
        task = await (create(spec) if spec is not None else create(**fields))
        return TaskRun(self, task.id, task)


def outcome(task: Task) -> Any:
    """The result of an ended task; :class:`TaskFailed`; ``TimeoutError`` for one not ended."""
    if task.status is TaskStatus.SUCCEEDED:
        return task.result
    if task.status.terminal:
        raise TaskFailed(task)
    raise TimeoutError(f"task {task.id} is still {task.status.value}")


class TaskRun:
    """A handle on one task: wait for its end and its result (see the module).

    ``task`` is the task as last read (None until read)."""

    def __init__(self, api: WaitCalls, task_id: str, task: Task | None = None) -> None:
        self._api = api
        self.id = task_id
        self.task = task

    def __repr__(self) -> str:
        return f"TaskRun({self.id!r})"

    async def wait(self, timeout: float | None = None) -> Task:
        """The task once ended, or as it is after ``timeout`` seconds (None: no limit)."""
        self.task = await self._api.wait_task(self.id, timeout)
        return self.task

    async def result(self, timeout: float | None = None) -> Any:
        """The task's result once it succeeded (see :func:`outcome` for what it raises)."""
        return outcome(await self.wait(timeout))

    def __await__(self) -> Any:
        """``await run`` is ``await run.result()``."""
        return self.result().__await__()


class SyncTaskRun:
    """:class:`TaskRun` for the blocking :class:`~duetime.sdk.client.Client`."""

    def __init__(self, run: TaskRun, block: Callable[[Coroutine[Any, Any, Any]], Any]) -> None:
        self._run = run
        self._block = block
        self.id = run.id

    def __repr__(self) -> str:
        return f"SyncTaskRun({self.id!r})"

    @property
    def task(self) -> Task | None:
        return self._run.task

    def wait(self, timeout: float | None = None) -> Task:
        """See :meth:`TaskRun.wait`."""
        found: Task = self._block(self._run.wait(timeout))
        return found

    def result(self, timeout: float | None = None) -> Any:
        """See :meth:`TaskRun.result`."""
        return self._block(self._run.result(timeout))
