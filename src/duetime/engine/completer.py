"""Completer: gathers ended attempts and writes them to the store many at a time."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence

from duetime import metrics
from duetime.errors import StoreUnavailable
from duetime.store.isolation import complete_isolated
from duetime.store.protocols import CompletionStore
from duetime.types import Completion, CompletionResult

log = logging.getLogger("duetime.engine")

ResultHook = Callable[[Sequence[Completion], Sequence[CompletionResult]], None]


class Completer:
    """Buffers completions and flushes them in one ``task_complete_many`` call when ``batch`` are
    waiting or ``linger`` seconds after the first one arrived, whichever comes first.

    The default ``linger`` is 0: a flush starts as soon as the loop turns, and what arrives while
    it runs waits for the next one, so batches grow with the load by themselves. A 2 ms linger
    added ~2.5 ms to every freed slot of a limited queue (its next task cannot start before the
    completion commits) and did not make the http burst faster (docs/benchmarks.md).

    A flush that finds the store unreachable keeps its completions and tries again with backoff;
    if the outage outlasts a lease, the reaper's fenced completion wins and the delivery is
    repeated — at-least-once, never lost. A flush that fails for any other reason is split until
    the completion to blame is found (:func:`~duetime.store.isolation.complete_isolated`): that
    one becomes a failed attempt, the others are recorded once, and flushing goes on.
    """

    def __init__(
        self,
        store: CompletionStore,
        *,
        batch: int = 500,
        linger: float = 0.0,
        on_results: ResultHook | None = None,
        source: str = "dispatcher",
    ) -> None:
        self._store = store
        self._batch = batch
        self._linger = linger
        self._on_results = on_results
        self._source = source
        self._buffer: list[Completion] = []
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closing = False

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"completer-{self._source}")

    def add(self, completion: Completion) -> None:
        self._buffer.append(completion)
        if len(self._buffer) == 1 or len(self._buffer) >= self._batch:
            self._wake.set()

    @property
    def pending(self) -> int:
        return len(self._buffer)

    async def close(self, grace: float | None = None) -> None:
        """Flush what is buffered (retrying while the store is down) and stop; after ``grace``
        seconds (None: no limit) stop anyway and log what is abandoned: those attempts' leases
        expire and the reaper retries them, so a node always stops and nothing is lost."""
        self._closing = True
        self._wake.set()
        task = self._task
        if task is None:
            return
        done, _ = await asyncio.wait({task}, timeout=grace)
        if done:
            return
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        abandoned, self._buffer = self._buffer, []
        log.warning(
            "completer: could not flush %d completions in %.1fs; abandoning them (their leases "
            "expire and the reaper retries the tasks): %s",
            len(abandoned),
            grace,
            ", ".join(c.task_id for c in abandoned[:20]) + (" ..." if len(abandoned) > 20 else ""),
        )

    async def _run(self) -> None:
        backoff = 0.05
        while True:
            if not self._buffer:
                if self._closing:
                    return
                self._wake.clear()
                await self._wake.wait()
                continue
            if len(self._buffer) < self._batch and not self._closing:
                await asyncio.sleep(self._linger)
            chunk, self._buffer = self._buffer[: self._batch], self._buffer[self._batch :]
            try:
                results = await complete_isolated(self._store, chunk)
            except asyncio.CancelledError:
                self._buffer[:0] = chunk  # close() gave up: report these as abandoned
                raise
            except StoreUnavailable as exc:
                self._buffer[:0] = chunk
                metrics.child(metrics.STORE_ERRORS, "completer").inc()
                log.warning("completer: store unavailable, %d waiting: %s", len(chunk), exc)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 5.0)
                continue
            except Exception:
                # Isolation records or skips every bad completion, so this is a bug in it: keep
                # the completions and retry slowly (close() still ends within its grace).
                self._buffer[:0] = chunk
                log.exception("completer: flush failed")
                await asyncio.sleep(1.0)
                continue
            backoff = 0.05
            stale = sum(1 for r in results if not r.accepted)
            if stale:
                metrics.child(metrics.STALE_COMPLETIONS, self._source).inc(stale)
            if self._on_results is not None:
                try:  # outside the flush: a failing hook must not write the chunk again
                    self._on_results(chunk, results)
                except Exception:
                    log.exception("completer: result hook failed")
