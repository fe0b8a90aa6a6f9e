"""How busy a node's hot path is, for the background work that yields to it (the history round,
:mod:`duetime.engine.history`).

A node's dispatchers say it themselves (:meth:`duetime.engine.dispatcher.Dispatcher.busy`); the
API's share of the hot path — tasks created, leased to pull workers and acked — is counted here,
by a :class:`Pulse` the routes share (``Services.pulse``).
"""

from __future__ import annotations

import time
from collections.abc import Callable

BUSY_PER_SECOND = 200
"""Hot-path tasks a second from which a node counts as busy: a trickle does not."""


class Pulse:
    """Tasks counted in windows of ``window`` seconds; busy while the current window or the one
    before it counted the rate :data:`BUSY_PER_SECOND` (so a busy spell outlasts its last task
    by up to one window)."""

    def __init__(
        self,
        per_second: int = BUSY_PER_SECOND,
        window: float = 0.5,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._threshold = max(1, int(per_second * window))
        self._window = window
        self._clock = clock
        self._start = clock()
        self._count = 0
        self._before = 0

    def _roll(self) -> None:
        now = self._clock()
        if now - self._start >= self._window:
            self._before = self._count if now - self._start < 2 * self._window else 0
            self._start, self._count = now, 0

    def add(self, tasks: int) -> None:
        self._roll()
        self._count += tasks

    def busy(self) -> bool:
        self._roll()
        return max(self._count, self._before) >= self._threshold
