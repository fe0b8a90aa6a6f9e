"""Dispatcher processes: one node delivers push tasks on several cores.

A delivery costs CPU in Python (framing, signing, parsing, bookkeeping), and one process runs
on one core. With ``dispatch_processes`` = N, the node process (API, leader services and one
dispatcher) starts N - 1 more processes that each run only a :class:`Dispatcher` against the
same PostgreSQL store. Nothing new is needed to keep them apart: every claim is a
``FOR UPDATE SKIP LOCKED`` lease, exactly as between nodes, and each process claims under its
own worker id (``<node id>/<n>``), so attempts say which process made them.

The node process supervises them: a process that dies is started again (after a pause that
grows to 10 s while they keep dying); on shutdown each gets SIGTERM and drains like the node's
own dispatcher (in-flight deliveries get the grace, then completions are flushed). A dispatcher
process dies with the node: Linux delivers SIGKILL to it when the node process ends
(``PR_SET_PDEATHSIG``), and elsewhere it notices within a second that its parent changed.
Their metric updates are shipped to the node process twice a second and counted in its
``/metrics`` (see :func:`duetime.metrics.forward`).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import functools
import logging
import multiprocessing
import os
import signal
import sys
import time
from collections.abc import MutableSequence
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess

from duetime import metrics
from duetime.clock import SystemClock
from duetime.config import Settings

log = logging.getLogger("duetime.engine")

_FLUSH_SECONDS = 0.5
_RESTART_PAUSE_MAX = 10.0
_STABLE_SECONDS = 60.0


def for_process(settings: Settings, index: int) -> Settings:
    """The settings of dispatcher process ``index`` (the node's own is 0): its part of the
    node's ``dispatch_concurrency`` and ``max_connections_per_origin``."""
    count = settings.dispatch_process_count

    def share(total: int) -> int:
        base, extra = divmod(total, count)
        return base + (1 if index < extra else 0)

    return settings.model_copy(
        update={
            "dispatch_concurrency": share(settings.dispatch_concurrency),
            "max_connections_per_origin": share(settings.max_connections_per_origin),
        }
    )


class _Child:
    def __init__(self, index: int) -> None:
        self.index = index
        self.process: BaseProcess | None = None
        self.conn: Connection | None = None
        self.failures = 0  # deaths in a row, each within _STABLE_SECONDS of its start
        self.started_at = 0.0
        self.restart_at = 0.0


class DispatchProcesses:
    """Starts, watches and stops a node's extra dispatcher processes."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._ctx = multiprocessing.get_context("spawn")
        self._children = [_Child(i) for i in range(1, settings.dispatch_process_count)]
        # Each process's dispatcher writes when its busy spell ends (time.monotonic(), the same
        # clock in every process of the machine): the node's background work reads them.
        self._busy_until = self._ctx.Array("d", settings.dispatch_process_count, lock=False)
        self._watch: asyncio.Task[None] | None = None
        self._stopping = False

    def busy(self) -> bool:
        """Whether one of these processes' dispatchers is delivering in earnest
        (:meth:`duetime.engine.dispatcher.Dispatcher.busy`, at most a claim old)."""
        now = time.monotonic()
        return any(until > now for until in self._busy_until)

    @property
    def pids(self) -> list[int]:
        return [c.process.pid for c in self._children if c.process and c.process.pid]

    def start(self) -> None:
        for child in self._children:
            self._spawn(child)
        if self._children:
            self._watch = asyncio.create_task(self._supervise(), name="duetime-dispatch-procs")
            log.info("started %d dispatcher processes: %s", len(self._children), self.pids)

    def _spawn(self, child: _Child) -> None:
        parent_end, child_end = self._ctx.Pipe(duplex=False)
        process = self._ctx.Process(
            target=child_main,
            args=(self._settings, child.index, os.getpid(), child_end, self._busy_until),
            name=f"duetime-dispatch-{child.index}",
            daemon=False,
        )
        process.start()
        child.started_at = time.monotonic()
        child_end.close()
        child.process, child.conn = process, parent_end

    async def _supervise(self) -> None:
        loop = asyncio.get_running_loop()
        while not self._stopping:
            for child in self._children:
                self._drain_metrics(child)
                process = child.process
                if process is None or process.is_alive() or self._stopping:
                    continue
                if child.restart_at == 0.0:
                    if time.monotonic() - child.started_at > _STABLE_SECONDS:
                        child.failures = 0  # it ran well: this death starts a new series
                    child.failures += 1
                    pause = min(_RESTART_PAUSE_MAX, 0.5 * 2 ** (child.failures - 1))
                    child.restart_at = loop.time() + pause
                    log.error(
                        "dispatcher process %d (pid %s) exited with %s; restarting in %.1fs",
                        child.index,
                        process.pid,
                        process.exitcode,
                        pause,
                    )
                elif loop.time() >= child.restart_at:
                    child.restart_at = 0.0
                    self._spawn(child)
            await asyncio.sleep(_FLUSH_SECONDS)

    def _drain_metrics(self, child: _Child) -> None:
        conn = child.conn
        if conn is None:
            return
        try:
            while conn.poll():
                metrics.apply(conn.recv())
        except (EOFError, OSError):
            child.conn = None
            conn.close()

    async def stop(self, grace: float) -> None:
        """SIGTERM every process, give them ``grace`` seconds (plus time to flush), then kill."""
        self._stopping = True
        if self._watch is not None:
            self._watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watch
        for child in self._children:
            if child.process is not None and child.process.is_alive():
                child.process.terminate()  # SIGTERM: it drains like the node's dispatcher
        deadline = time.monotonic() + grace + 5.0
        for child in self._children:
            process = child.process
            if process is None:
                continue
            while process.is_alive() and time.monotonic() < deadline:
                self._drain_metrics(child)
                await asyncio.sleep(0.05)
            if process.is_alive():
                log.warning("dispatcher process %d did not stop in time; killing it", child.index)
                process.kill()
            await asyncio.to_thread(process.join, 5.0)
            self._drain_metrics(child)
            if child.conn is not None:
                child.conn.close()


def _die_with_parent(parent_pid: int) -> None:
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent_pid:  # the parent died before prctl took effect
        os._exit(1)


def child_main(
    settings: Settings, index: int, parent_pid: int, conn: Connection, busy: MutableSequence[float]
) -> None:
    """Entry point of a dispatcher process."""
    _die_with_parent(parent_pid)
    from duetime.node.wiring import prepare_process

    prepare_process(settings)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_run_child(settings, index, parent_pid, conn, busy))


async def _run_child(
    settings: Settings, index: int, parent_pid: int, conn: Connection, busy: MutableSequence[float]
) -> None:
    from duetime.engine.dispatcher import Dispatcher
    from duetime.node.wiring import GRACE_SECONDS, build_deliverers, open_node_store

    events = metrics.forward()

    def flush() -> None:
        if events:
            batch = list(events)
            events.clear()
            with contextlib.suppress(OSError, ValueError):
                conn.send(batch)

    settings = for_process(settings, index)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with open_node_store(settings, migrate=False) as store:
        deliverers = build_deliverers(settings, store)
        dispatcher = Dispatcher.from_settings(
            store, deliverers, SystemClock(), settings, node_id=f"{settings.node_id}/{index}"
        )
        dispatcher.on_busy = functools.partial(busy.__setitem__, index)
        await dispatcher.start()
        running = asyncio.create_task(dispatcher.run(), name=f"duetime-dispatcher-{index}")
        log.info("dispatcher process %d (pid %d) running", index, os.getpid())
        try:
            while not stop.is_set():
                if os.getppid() != parent_pid:
                    log.error("dispatcher process %d: the node process is gone; stopping", index)
                    break
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), _FLUSH_SECONDS)
                flush()
        finally:
            await dispatcher.drain(GRACE_SECONDS)
            for job in (running,):
                job.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await job
            for deliverer in deliverers.values():
                await deliverer.close()
    flush()
    conn.close()
