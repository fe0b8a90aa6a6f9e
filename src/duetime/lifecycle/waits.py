"""Waiting for tasks to end (SPEC §3 "Waiting for a result"): ``GET /v1/tasks/{id}?wait=``, a
workflow's and a parent's children's waits, on one node.

Every wait shares the node's wake-ups, as the lease long polls share the ready signal
(:class:`~duetime.lifecycle.lease.ReadyWatch`): a wait is a future in a table keyed by the ids
it waits for — no thread, no database connection, no loop of its own. The store tells
:class:`EndWatch` the ids of tasks that ended, after each commit that ended them
(:class:`~duetime.store.ended.EndedFeed`; on PostgreSQL those ended on other nodes too, sent
only while some node waits), and each id settles the waits on it at once. A wait that
answers with its task (:meth:`EndWatch.task`) has the task read in the same moment, for every
id of that commit in one query, so the read runs while the waits wake rather than after.

A wait reads its tasks' statuses once after it is registered (a task that ended between the
caller's read and the registration is not slept through). One sweep per node, running only
while waits are open, reads every waited task's status each :data:`SWEEP_SECONDS` (one query
for all of them): a notification lost to a crash between a commit and its send, or a task
ended by another process on a SQLite file, costs at most that long. The sweep also tells the
other nodes that this one waits (:meth:`~duetime.store.ended.EndedFeed.waiting`).
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Collection, Sequence
from typing import Protocol

from duetime.errors import TooManyRequests
from duetime.store.ended import EndedFeed
from duetime.types import Task, TaskStatus

log = logging.getLogger("duetime.lifecycle")

SWEEP_SECONDS = 1.0
"""While waits are open, their tasks' statuses are read at least this often."""
MAX_WAITS_PER_TENANT = 10_000
"""Waits one tenant may hold open at once on one node; one more is a 429."""
MAX_WAIT_SECONDS = 60.0
"""The longest one wait call may wait (a client waits longer by calling again)."""
_SWEEP_CHUNK = 1000


class WaitStore(Protocol):
    """What waits use of a store."""

    @property
    def ended(self) -> EndedFeed: ...

    async def task_statuses(self, task_ids: Sequence[str]) -> dict[str, TaskStatus]: ...

    async def tasks_get(self, task_ids: Sequence[str]) -> dict[str, Task]: ...


class _Wait:
    __slots__ = ("done", "left", "tenant_id")

    def __init__(self, tenant_id: str, left: set[str], done: asyncio.Future[None]) -> None:
        self.tenant_id = tenant_id
        self.left = left
        self.done = done


class EndWatch:
    """The waits of one node on one store (see the module)."""

    def __init__(self, store: WaitStore, *, sweep_seconds: float = SWEEP_SECONDS) -> None:
        self._store = store
        self._feed = store.ended
        self._feed.listen(self._heard)
        self._sweep_seconds = sweep_seconds
        self._by_id: dict[str, set[_Wait]] = {}
        self._open: set[_Wait] = set()
        self._per_tenant: collections.Counter[str] = collections.Counter()
        self._sweeper: asyncio.Task[None] | None = None
        self._nudge = asyncio.Event()
        self._closed = False
        self._rows: dict[str, set[asyncio.Future[Task | None]]] = {}
        """Futures of :meth:`task` waits for their task's row, by task id, until it ends."""
        self._to_read: dict[str, list[asyncio.Future[Task | None]]] = {}
        self._readers: set[asyncio.Task[None]] = set()
        self.sweeps = 0
        """Sweeps run so far (a test's proof that a wait was settled by a wake-up, not a
        sweep)."""

    @property
    def open(self) -> int:
        """Waits open now."""
        return len(self._open)

    async def wait(self, tenant_id: str, task_ids: Collection[str], timeout: float) -> bool:
        """Return True once every task of ``task_ids`` has ended (``succeeded``, ``failed`` or
        ``cancelled``), False when ``timeout`` seconds passed first or the node is closing.
        The caller has checked the tasks are ``tenant_id``'s. ``TooManyRequests`` over
        :data:`MAX_WAITS_PER_TENANT`."""
        if not task_ids:
            return True
        if timeout <= 0 or self._closed:
            return await self._all_ended(task_ids)
        if self._per_tenant[tenant_id] >= MAX_WAITS_PER_TENANT:
            raise TooManyRequests(
                f"{MAX_WAITS_PER_TENANT} waits of this tenant are already open on this node; "
                "wait for fewer tasks at once",
                limit="waits_per_tenant",
                retry_after=1.0,
            )
        wait = _Wait(tenant_id, set(task_ids), asyncio.get_running_loop().create_future())
        self._register(wait)
        try:
            # Registered first, read second: an end between the two is seen by one of them.
            wanted = sorted(wait.left)
            statuses = await self._store.task_statuses(wanted)
            self._settle(wait, _ended(wanted, statuses))
            if wait.done.done():
                return True
            try:
                async with asyncio.timeout(timeout):
                    await wait.done
            except TimeoutError:
                return False
            return not self._closed or not wait.left
        finally:
            self._unregister(wait)

    async def _all_ended(self, task_ids: Collection[str]) -> bool:
        wanted = list(task_ids)
        return len(_ended(wanted, await self._store.task_statuses(wanted))) == len(wanted)

    async def task(self, tenant_id: str, task_id: str, timeout: float) -> Task | None:
        """:meth:`wait` for one task, then the task as it is (None: gone). The task is read as
        soon as its end is heard, while its waits are still waking; the ends one commit
        publishes share one read (:meth:`_heard`), so a burst of ends answering many waits
        costs the store one query, not one per wait. A wait settled otherwise (its first
        read, a sweep, its timeout, the node closing) reads its task then."""
        found: asyncio.Future[Task | None] = asyncio.get_running_loop().create_future()
        self._rows.setdefault(task_id, set()).add(found)
        try:
            await self.wait(tenant_id, [task_id], timeout)
        except BaseException:  # cancelled, or refused: a row read meanwhile is for nobody
            self._unwant(task_id, found)
            found.cancel()
            raise
        if self._unwant(task_id, found):
            self._read_soon(task_id, [found])
        return await found

    def _unwant(self, task_id: str, found: asyncio.Future[Task | None]) -> bool:
        """Forget ``found`` as a future for ``task_id``'s row; False: its read is under way."""
        waiting = self._rows.get(task_id)
        if waiting is None or found not in waiting:
            return False
        waiting.discard(found)
        if not waiting:
            del self._rows[task_id]
        return True

    def _read_soon(self, task_id: str, futures: Collection[asyncio.Future[Task | None]]) -> None:
        """Queue a read of ``task_id`` for ``futures``; the next reader takes every id queued
        before it starts (a reader already querying does not hold the next one up)."""
        if not self._to_read:
            reader = asyncio.get_running_loop().create_task(self._read())
            self._readers.add(reader)
            reader.add_done_callback(self._readers.discard)
        self._to_read.setdefault(task_id, []).extend(futures)

    async def _read(self) -> None:
        """Read every task queued since the last reader started, in one query."""
        wanted, self._to_read = self._to_read, {}
        try:
            tasks: dict[str, Task] = {}
            ids = list(wanted)
            for start in range(0, len(ids), _SWEEP_CHUNK):
                tasks.update(await self._store.tasks_get(ids[start : start + _SWEEP_CHUNK]))
        except Exception as exc:  # each wait answers with the store's error
            for futures in wanted.values():
                for future in futures:
                    if not future.done():
                        future.set_exception(exc)
            return
        for task_id, futures in wanted.items():
            for future in futures:
                if not future.done():
                    future.set_result(tasks.get(task_id))

    def close(self) -> None:
        """Answer every open wait now (server shutdown); later waits do not wait."""
        self._closed = True
        for wait in list(self._open):
            if not wait.done.done():
                wait.done.set_result(None)
        if self._sweeper is not None:
            self._sweeper.cancel()

    # -- the table ----------------------------------------------------------------------------

    def _register(self, wait: _Wait) -> None:
        self._open.add(wait)
        self._per_tenant[wait.tenant_id] += 1
        for task_id in wait.left:
            self._by_id.setdefault(task_id, set()).add(wait)
        self._feed.waits += 1
        self._feed.waiting()
        if self._sweeper is None or self._sweeper.done():
            self._sweeper = asyncio.get_running_loop().create_task(self._sweep_loop())

    def _unregister(self, wait: _Wait) -> None:
        if wait not in self._open:
            return
        self._open.discard(wait)
        self._feed.waits -= 1
        self._per_tenant[wait.tenant_id] -= 1
        if not self._per_tenant[wait.tenant_id]:
            del self._per_tenant[wait.tenant_id]
        for task_id in wait.left:
            waits = self._by_id.get(task_id)
            if waits is not None:
                waits.discard(wait)
                if not waits:
                    del self._by_id[task_id]
        if not self._open:
            self._nudge.set()  # the sweep ends now rather than after its next sleep

    def _settle(self, wait: _Wait, ended: Collection[str]) -> None:
        for task_id in ended:
            if task_id in wait.left:
                wait.left.discard(task_id)
                waits = self._by_id.get(task_id)
                if waits is not None:
                    waits.discard(wait)
                    if not waits:
                        del self._by_id[task_id]
        if not wait.left and not wait.done.done():
            wait.done.set_result(None)

    def _heard(self, ids: Sequence[str] | None) -> None:
        """The feed's listener: ``ids`` ended (None: any may have; sweep now)."""
        if ids is None:
            self._nudge.set()
            return
        by_id = self._by_id
        for task_id in ids:
            waits = by_id.pop(task_id, None)
            if waits is None:
                continue
            rows = self._rows.pop(task_id, None)
            if rows is not None:  # read now, while the waits wake
                self._read_soon(task_id, rows)
            for wait in waits:
                wait.left.discard(task_id)
                if not wait.left and not wait.done.done():
                    wait.done.set_result(None)

    # -- the sweep ----------------------------------------------------------------------------

    async def _sweep_loop(self) -> None:
        while self._open and not self._closed:
            try:
                async with asyncio.timeout(self._sweep_seconds):
                    await self._nudge.wait()
            except TimeoutError:
                pass
            self._nudge.clear()
            if not self._open:
                return
            self._feed.waiting()
            try:
                await self.sweep()
            except Exception as exc:  # an outage: the next sweep reads again
                log.debug("could not read the statuses of waited tasks: %s", exc)

    async def sweep(self) -> int:
        """Read every waited task's status once and settle those ended; returns how many."""
        self.sweeps += 1
        wanted = list(self._by_id)
        ended: list[str] = []
        for start in range(0, len(wanted), _SWEEP_CHUNK):
            chunk = wanted[start : start + _SWEEP_CHUNK]
            ended.extend(_ended(chunk, await self._store.task_statuses(chunk)))
        if ended:
            self._heard(ended)
        return len(ended)


def _ended(wanted: Sequence[str], statuses: dict[str, TaskStatus]) -> list[str]:
    """The ids of ``wanted`` that ended, or are gone (a finished task the retention removed)."""
    return [i for i in wanted if i not in statuses or statuses[i].terminal]
