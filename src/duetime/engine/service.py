"""The one small shape every engine service has (after river's maintenance services):
a ``run_once()`` that works one batch and returns what it did, and a loop around it that sleeps,
wakes on a signal, and survives store outages by backing off and trying again."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from abc import ABC, abstractmethod

from duetime import metrics
from duetime.clock import Clock
from duetime.errors import StoreUnavailable

log = logging.getLogger("duetime.engine")

MAX_BACKOFF_SECONDS = 5.0


class Service(ABC):
    """A loop around :meth:`run_once`. Subclasses say how long to wait between rounds."""

    name = "service"

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._stopping = asyncio.Event()

    @abstractmethod
    async def run_once(self) -> int:
        """Work one round; return how much was done (0 = nothing to do)."""

    @abstractmethod
    async def wait(self, did: int) -> None:
        """Wait before the next round, given what the last one did."""

    def stop(self) -> None:
        self._stopping.set()

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    async def run(self) -> None:
        """Loop until :meth:`stop`; a store outage or a bug — in a round or in the wait after
        it (the promoter's wait reads the store) — backs off and tries again."""
        backoff = 0.1
        down = False
        while not self.stopping:
            try:
                did = await self.run_once()
                if down:
                    log.info("%s: store reachable again", self.name)
                    down = False
                backoff = 0.1
                await self.wait(did)
            except StoreUnavailable as exc:
                metrics.child(metrics.STORE_ERRORS, self.name).inc()
                if not down:
                    log.warning("%s: store unavailable, retrying: %s", self.name, exc.detail)
                down = True
                await self._pause(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF_SECONDS)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("%s: round failed; retrying", self.name)
                await self._pause(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF_SECONDS)

    async def _pause(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), timeout=seconds)
