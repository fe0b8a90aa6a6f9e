"""Group commit for creates: concurrent ``task_create_many`` calls share one INSERT.

Under load an API node makes many small creates at once (single POSTs). Each one alone costs a
statement, a commit and its WAL flush; merged, a few hundred cost about what one does. The merge
adds no waiting: a call that finds a free slot runs at once, and calls that arrive while every
slot is busy go out together as soon as one frees up (natural batching).

Every call of a merged statement gets the statement's one result (what the statement said of all
its records: the store's is the database clock it used and which records it did not insert), and
reads its own records' part from it. A merged statement is one transaction, so a row that the
database refuses would fail every call in it; when a merged statement fails for any reason other
than the store being unreachable, each call is retried alone, so only the bad input fails.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from duetime.errors import StoreUnavailable

Record = TypeVar("Record")
Result = TypeVar("Result")


@dataclass
class _Call(Generic[Record, Result]):
    records: list[Record]
    done: asyncio.Future[Result]


@dataclass
class _Lane(Generic[Record, Result]):
    calls: list[_Call[Record, Result]] = field(default_factory=list)
    running: int = 0


class InsertBatcher(Generic[Record, Result]):
    """Merges concurrent inserts that share a ``key`` (the pinned time) into one statement.

    ``run(key, records)`` executes one statement for the records and returns its result, which
    every call whose records it held receives. At most ``slots`` statements per key run at once,
    each with at most ``max_records`` records.
    """

    def __init__(
        self,
        run: Callable[[Hashable, list[Record]], Awaitable[Result]],
        *,
        slots: int = 2,
        max_records: int = 2000,
    ) -> None:
        self._run = run
        self._slots = slots
        self._max_records = max_records
        self._lanes: dict[Hashable, _Lane[Record, Result]] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    async def insert(self, key: Hashable, records: list[Record]) -> Result:
        """Insert ``records`` (possibly together with other calls); the result of the statement
        that held them. Raises what the statement raised."""
        lane = self._lanes.setdefault(key, _Lane())
        if lane.running < self._slots and not lane.calls:
            # Nobody is waiting: run the statement in the caller's own task (one create alone
            # then pays no drain task and no future: ~4 % of the node's CPU per create, issue
            # 15); calls that arrive meanwhile queue up and share the next statement.
            lane.running += 1
            try:
                return await self._run(key, records)
            finally:
                lane.running -= 1
                self._settle(key, lane)
        call: _Call[Record, Result] = _Call(records, asyncio.get_running_loop().create_future())
        lane.calls.append(call)
        if lane.running < self._slots:
            self._start(key, lane)
        return await call.done

    def _start(self, key: Hashable, lane: _Lane[Record, Result]) -> None:
        lane.running += 1
        task = asyncio.get_running_loop().create_task(self._drain(key, lane))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _settle(self, key: Hashable, lane: _Lane[Record, Result]) -> None:
        """After a statement: start a drain for calls still waiting on a free slot, or forget
        an idle lane."""
        if lane.calls and lane.running < self._slots:
            self._start(key, lane)
        elif not lane.calls and lane.running == 0 and self._lanes.get(key) is lane:
            del self._lanes[key]

    async def _drain(self, key: Hashable, lane: _Lane[Record, Result]) -> None:
        try:
            while lane.calls:
                batch: list[_Call[Record, Result]] = [lane.calls.pop(0)]
                size = len(batch[0].records)
                while lane.calls and size + len(lane.calls[0].records) <= self._max_records:
                    size += len(lane.calls[0].records)
                    batch.append(lane.calls.pop(0))
                try:
                    await self._execute(key, batch)
                except BaseException as exc:  # cancelled: no caller may wait forever
                    for call in [*batch, *lane.calls]:
                        _fail(call, StoreUnavailable(f"insert abandoned: {exc!r}"))
                    lane.calls.clear()
                    raise
        finally:
            lane.running -= 1
            self._settle(key, lane)

    async def _execute(self, key: Hashable, batch: list[_Call[Record, Result]]) -> None:
        records = [record for call in batch for record in call.records]
        try:
            result = await self._run(key, records)
        except StoreUnavailable as exc:
            for call in batch:
                _fail(call, exc)
            return
        except Exception as exc:
            if len(batch) == 1:
                _fail(batch[0], exc)
                return
            for call in batch:  # find the call whose input the database refused
                await self._execute(key, [call])
            return
        for call in batch:
            if not call.done.done():
                call.done.set_result(result)


def _fail(call: _Call[Any, Any], exc: BaseException) -> None:
    if not call.done.done():
        call.done.set_exception(exc)
