"""Run worker handlers in-process, in your own tests, without a server::

    from duetime.testing import run_handler

    def test_send_report() -> None:
        outcome = run_handler(send_report, {"day": "2026-12-01"})
        assert outcome.succeeded and outcome.result == {"pages": 3}

    def test_not_ready_yet() -> None:
        outcome = run_handler(send_report, {"day": "tomorrow"})
        assert outcome.status == "retry" and outcome.retry_after == 300

``run_handler`` takes a handler function or a ``@worker.task`` handle, builds the
:class:`~duetime.Job` a worker would pass (a task with that payload, name and attempt) and tells
how the worker would report it: ``succeeded`` with the result (checked to encode as JSON, as the
worker does), ``failed`` (retryable or not, with the error text the worker records) or
``retry`` (:class:`~duetime.Retry`). Only the SDK is imported: it works in a lean install.
"""

from __future__ import annotations

import asyncio
import inspect
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

import orjson

from duetime.sdk.handles import Retry, TaskHandle, _payload
from duetime.sdk.models import Task
from duetime.sdk.worker import Job, NonRetryable, _describe
from duetime.types import TaskStatus

__all__ = ["HandlerOutcome", "make_job", "run_handler", "run_handler_async"]


@dataclass(frozen=True, slots=True)
class HandlerOutcome:
    """How the worker would report one run of a handler."""

    status: Literal["succeeded", "failed", "retry"]
    result: Any = None
    error: str | None = None
    retryable: bool = True
    retry_after: float | None = None
    exception: BaseException | None = None
    logs: str | None = None
    """What the handler attached with :meth:`~duetime.Job.log` (the worker sends it along)."""

    @property
    def succeeded(self) -> bool:
        return self.status == "succeeded"


def make_job(
    payload: Any = None,
    *,
    name: str = "task",
    attempt: int = 1,
    queue: str = "default",
    **task_fields: Any,
) -> Job:
    """The :class:`~duetime.Job` a worker would hand a handler for a task with ``payload``
    (``task_fields``: any other :class:`~duetime.sdk.Task` field, e.g. ``labels``)."""
    now = datetime.now(UTC)
    task = Task.model_validate(
        {
            "id": str(uuid.uuid4()),
            "name": name,
            "queue": queue,
            "status": TaskStatus.RUNNING,
            "run_at": now,
            "target": {"type": "worker"},
            "payload": _payload(payload),
            "attempts": attempt,
            "created_at": now,
            "updated_at": now,
            "started_at": now,
            **task_fields,
        }
    )
    return Job(task, attempt, f"test-lease-{uuid.uuid4()}", "test-worker")


async def run_handler_async(
    handler: Callable[..., Any] | TaskHandle[Any], payload: Any = None, **job_fields: Any
) -> HandlerOutcome:
    """Run ``handler`` once on a job made by :func:`make_job` (async handlers awaited, sync
    ones called) and report the outcome."""
    fn = handler.fn if isinstance(handler, TaskHandle) else handler
    if isinstance(handler, TaskHandle):
        job_fields.setdefault("name", handler.name)
        job_fields.setdefault("queue", handler.defaults.get("queue", "default"))
    job = make_job(payload, **job_fields)
    try:
        value = fn(job)
        if inspect.isawaitable(value):
            value = await value
        orjson.dumps(value)  # the worker sends the result as JSON: fail here as it would
    except Retry as exc:
        return HandlerOutcome(
            "retry", error=exc.reason, retry_after=exc.after, exception=exc, logs=job.logs
        )
    except NonRetryable as exc:
        error = _describe(exc, 2000)
        return HandlerOutcome("failed", error=error, retryable=False, exception=exc, logs=job.logs)
    except Exception as exc:
        return HandlerOutcome("failed", error=_describe(exc, 2000), exception=exc, logs=job.logs)
    return HandlerOutcome("succeeded", result=value, logs=job.logs)


def run_handler(
    handler: Callable[..., Any] | TaskHandle[Any], payload: Any = None, **job_fields: Any
) -> HandlerOutcome:
    """:func:`run_handler_async` for plain (sync) tests; not from inside a running loop."""
    return asyncio.run(run_handler_async(handler, payload, **job_fields))
