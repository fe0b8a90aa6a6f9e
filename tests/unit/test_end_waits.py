"""Waits for tasks' ends on one node (:class:`~duetime.lifecycle.waits.EndWatch`) over a fake
store: the tasks one commit ends are read in one query, asked as soon as the end is heard —
while the waits it ends are still waking — and a wait settled otherwise reads only its own."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from duetime.lifecycle.waits import EndWatch
from duetime.store.ended import EndedFeed
from duetime.testing.fakes import running_task
from duetime.types import Task, TaskStatus

WORKER = {"type": "worker"}


def _id(n: int) -> str:
    return f"0190f000-0000-7000-8000-{n:012d}"


class _Store:
    """Statuses and rows from a dict; each read of rows records its ids and how many waits
    were open when it was asked."""

    def __init__(self) -> None:
        self.ended = EndedFeed()
        self.status: dict[str, TaskStatus] = {}
        self.reads: list[tuple[list[str], int]] = []
        self.watch: EndWatch | None = None

    async def task_statuses(self, task_ids: Sequence[str]) -> dict[str, TaskStatus]:
        return {i: self.status[i] for i in task_ids if i in self.status}

    async def tasks_get(self, task_ids: Sequence[str]) -> dict[str, Task]:
        assert self.watch is not None
        self.reads.append((list(task_ids), self.watch.open))
        found = [i for i in task_ids if i in self.status]
        return {i: running_task(WORKER, id=i, status=self.status[i]) for i in found}


def _watch(store: _Store) -> EndWatch:
    store.watch = EndWatch(store, sweep_seconds=3600)  # no sweeps: only ends wake waits
    return store.watch


def _running(n: int) -> tuple[_Store, EndWatch, str]:
    """A store holding one running task (``_id(n)``), and a watch over it."""
    store = _Store()
    store.status[_id(n)] = TaskStatus.RUNNING
    return store, _watch(store), _id(n)


async def _until_open(watch: EndWatch, count: int) -> None:
    for _ in range(1000):
        if watch.open == count:
            return
        await asyncio.sleep(0)
    raise AssertionError(f"{watch.open} of {count} waits open")


async def test_the_ends_of_one_commit_are_read_in_one_query_before_their_waits_resume() -> None:
    store = _Store()
    watch = _watch(store)
    ids = [_id(n) for n in range(50)]
    store.status.update(dict.fromkeys(ids, TaskStatus.RUNNING))
    waits = [asyncio.create_task(watch.task("acme", i, 30)) for i in ids]
    await _until_open(watch, len(ids))
    store.status.update(dict.fromkeys(ids, TaskStatus.SUCCEEDED))
    store.ended.publish(ids)
    answers = await asyncio.gather(*waits)
    assert [a.status if a else None for a in answers] == [TaskStatus.SUCCEEDED] * len(ids)
    # One query for the commit's ends, asked while all of their waits were still open: the
    # read does not wait for each wait to wake first.
    assert store.reads == [(ids, len(ids))]
    assert watch.open == 0


async def test_a_wait_that_runs_out_reads_its_own_task_and_leaves_the_others_waiting() -> None:
    store, watch, task_id = _running(1)
    patient = asyncio.create_task(watch.task("acme", task_id, 30))
    brief = await watch.task("acme", task_id, 0.02)
    assert brief is not None and brief.status is TaskStatus.RUNNING
    assert watch.open == 1 and not patient.done()
    store.status[task_id] = TaskStatus.FAILED
    store.ended.publish([task_id])
    answer = await patient
    assert answer is not None and answer.status is TaskStatus.FAILED
    assert [ids for ids, _ in store.reads] == [[task_id], [task_id]]


async def test_a_wait_given_up_by_its_caller_is_not_read_for() -> None:
    store, watch, task_id = _running(2)
    gone = asyncio.create_task(watch.task("acme", task_id, 30))
    await _until_open(watch, 1)
    gone.cancel()
    await asyncio.gather(gone, return_exceptions=True)
    store.status[task_id] = TaskStatus.SUCCEEDED
    store.ended.publish([task_id])
    await asyncio.sleep(0)
    assert store.reads == [] and watch.open == 0
    # A later wait on the same task answers at once from its first read.
    answer = await watch.task("acme", task_id, 30)
    assert answer is not None and answer.status is TaskStatus.SUCCEEDED
