"""A small thread pool for the worker's sync handlers, with daemon threads.

:class:`concurrent.futures.ThreadPoolExecutor` joins its threads at interpreter exit, so one
handler stuck past its timeout (or still running when a shutdown failed its task back) would keep
a stopped worker process alive forever. These threads are daemons: the process exits when the
worker is done, and what a stray handler was doing is abandoned — its task was already failed
back and will run again elsewhere.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import queue
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["DaemonThreadPool"]

_Work = tuple[
    asyncio.AbstractEventLoop, "asyncio.Future[Any]", contextvars.Context, Callable[[Any], Any], Any
]


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.cancelled():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


class DaemonThreadPool:
    """Runs ``fn(arg)`` in up to ``size`` daemon threads, started on demand and reused."""

    def __init__(self, size: int, *, name: str = "duetime-worker") -> None:
        self._size = size
        self._name = name
        self._queue: queue.SimpleQueue[_Work | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._idle = 0  # threads waiting for work and not yet promised to a submit

    def submit(
        self, loop: asyncio.AbstractEventLoop, fn: Callable[[Any], Any], arg: Any
    ) -> asyncio.Future[Any]:
        """Run ``fn(arg)`` (in a copy of the caller's context); the returned future of ``loop``
        gets its result or exception. Cancelling the future does not stop the thread."""
        future: asyncio.Future[Any] = loop.create_future()
        self._queue.put((loop, future, contextvars.copy_context(), fn, arg))
        with self._lock:
            if self._idle:
                self._idle -= 1
            elif len(self._threads) < self._size:
                thread = threading.Thread(
                    target=self._work, name=f"{self._name}-{len(self._threads)}", daemon=True
                )
                self._threads.append(thread)
                thread.start()
        return future

    def shutdown(self) -> None:
        """Let every thread exit once its current call returns; returns at once."""
        for _ in self._threads:
            self._queue.put(None)

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            loop, future, context, fn, arg = item
            result: Any = None
            error: BaseException | None = None
            try:
                result = context.run(fn, arg)
            except BaseException as exc:
                error = exc if isinstance(exc, Exception) else RuntimeError(repr(exc))
            # A closed loop raises RuntimeError: nobody waits for this result any more.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(_settle, future, result, error)
            del item, future, result, error
            with self._lock:
                self._idle += 1
