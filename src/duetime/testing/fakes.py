"""Public fakes for tests of code built on duetime: a deliverer driven by a function, so engine
tests run without a network (the way httpx's MockTransport serves its tests)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from duetime.delivery.base import Delivery, Outcome
from duetime.types import AttemptOutcome

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
