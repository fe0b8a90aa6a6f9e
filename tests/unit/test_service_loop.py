"""The loop every engine service runs (:class:`duetime.engine.service.Service`), with no store: an
outage in the wait after a round backs off and tries again instead of ending the loop."""

from __future__ import annotations

import asyncio

from duetime.clock import SystemClock
from duetime.engine.service import Service
from duetime.errors import StoreUnavailable


async def test_a_store_outage_in_a_services_wait_backs_off_instead_of_ending_it() -> None:
    """The promoter's wait reads the store (next due time): an outage there must not end the
    service's loop — it did once, and the node stopped promoting for good."""

    class Flaky(Service):
        name = "flaky"

        def __init__(self) -> None:
            super().__init__(SystemClock())
            self.rounds = 0
            self.waits = 0

        async def run_once(self) -> int:
            self.rounds += 1
            if self.rounds >= 3:
                self.stop()
            return 0

        async def wait(self, did: int) -> None:
            self.waits += 1
            if self.waits == 1:
                raise StoreUnavailable("the store went away while waiting")

    service = Flaky()
    await asyncio.wait_for(service.run(), timeout=5)
    assert service.rounds == service.waits == 3  # every round, the failed wait's included
