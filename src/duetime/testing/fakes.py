"""Public fakes for tests of code built on duetime: a deliverer driven by a function, so engine
tests run without a network (the way httpx's MockTransport serves its tests)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from duetime.delivery.base import Delivery, Outcome
from duetime.types import AttemptOutcome, RetryPolicy, Task, TaskStatus

Handler = Callable[[Delivery], Awaitable[Outcome] | Outcome]


def succeed(_: Delivery) -> Outcome:
    """The default handler: every delivery succeeds with result ``"ok"``."""
    return Outcome(AttemptOutcome.SUCCEEDED, retryable=False, http_status=200, result_json='"ok"')


class FakeDeliverer:
    """Records every :class:`Delivery` and answers it with ``handler`` (sync or async)."""

    def __init__(self, handler: Handler = succeed) -> None:
        self.handler = handler
        self.deliveries: list[Delivery] = []
        self.closed = False
        self.delivered = asyncio.Event()

    async def deliver(self, delivery: Delivery) -> Outcome:
        self.deliveries.append(delivery)
        self.delivered.set()
        answer = self.handler(delivery)
        if isinstance(answer, Outcome):
            return answer
        return await answer

    async def close(self) -> None:
        self.closed = True


def running_task(target: Mapping[str, Any], **changes: Any) -> Task:
    """A task as a claim hands it out (``running``, first attempt), to drive a deliverer without
    a store; ``changes`` override any field."""
    now = datetime(2030, 1, 1, tzinfo=UTC)
    task = Task(
        id="0190f000-0000-7000-8000-000000000001",
        tenant_id="default",
        name="send-report",
        queue="default",
        status=TaskStatus.RUNNING,
        version=1,
        target=dict(target),
        payload_json="{}",
        idempotency_key=None,
        priority=0,
        retry=RetryPolicy(),
        timeout_seconds=30.0,
        depends_on=(),
        concurrency_key=None,
        labels={},
        attempts=1,
        series_start=0,
        schedule_id=None,
        scheduled_for=None,
        run_at=now,
        due_at=now,
        created_at=now,
        updated_at=now,
    )
    return replace(task, **changes)
