"""Group commit (duetime.store.postgres.batching.InsertBatcher) over a recording runner: a lone
call runs in its caller's task, calls that arrive while statements run share the next one (and
its result), and a merged statement the database refuses is retried call by call, so only the
bad input fails. No database: the runner stands in for the statement, which is all the batcher
sees."""

from __future__ import annotations

import asyncio
from collections.abc import Hashable
from typing import Any

import pytest

from duetime.errors import StoreUnavailable
from duetime.store.postgres.batching import InsertBatcher

Record = tuple[Any, ...]


Result = tuple[Hashable, frozenset[str]]


class Runner:
    """Records each statement's records; a statement's result is ``(key, its record ids)``. A
    statement holding a record whose id starts with ``bad`` raises ValueError; ``gate`` (when
    set) holds every statement until it opens."""

    def __init__(self) -> None:
        self.statements: list[list[str]] = []
        self.tasks: list[asyncio.Task[Any] | None] = []
        self.gate: asyncio.Event | None = None

    async def __call__(self, key: Hashable, records: list[Record]) -> Result:
        self.statements.append([r[0] for r in records])
        self.tasks.append(asyncio.current_task())
        if self.gate is not None:
            await self.gate.wait()
        if any(str(r[0]).startswith("bad") for r in records):
            raise ValueError("refused")
        return key, frozenset(r[0] for r in records)


def batcher(runner: Runner, slots: int = 1) -> InsertBatcher[Record, Result]:
    return InsertBatcher(runner, slots=slots)


def ran(key: str, *ids: str) -> Result:
    return key, frozenset(ids)


async def test_a_lone_call_runs_in_its_own_task_and_gets_its_statements_result() -> None:
    runner = Runner()
    b = batcher(runner)
    assert await b.insert("k", [("a",), ("b",), ("c",)]) == ran("k", "a", "b", "c")
    assert runner.statements == [["a", "b", "c"]]
    assert runner.tasks == [asyncio.current_task()]
    assert b._lanes == {}  # nothing left behind


async def test_calls_arriving_while_a_statement_runs_share_the_next_one_and_its_result() -> None:
    runner = Runner()
    runner.gate = asyncio.Event()
    b = batcher(runner, slots=1)
    first = asyncio.create_task(b.insert("k", [("a",)]))
    await asyncio.sleep(0)  # the first statement is running, held at the gate
    rest = [asyncio.create_task(b.insert("k", [(name,)])) for name in ("b", "c", "d")]
    await asyncio.sleep(0)
    assert runner.statements == [["a"]]
    runner.gate.set()
    assert await first == ran("k", "a")
    assert [await t for t in rest] == [ran("k", "b", "c", "d")] * 3
    assert runner.statements == [["a"], ["b", "c", "d"]]
    assert b._lanes == {}


async def test_each_key_has_its_own_lane() -> None:
    runner = Runner()
    runner.gate = asyncio.Event()
    b = batcher(runner, slots=1)
    calls = [asyncio.create_task(b.insert(key, [(f"{key}1",)])) for key in ("k", "j")]
    await asyncio.sleep(0)
    assert sorted(runner.statements) == [["j1"], ["k1"]]  # neither waited for the other
    runner.gate.set()
    assert [await c for c in calls] == [ran("k", "k1"), ran("j", "j1")]


async def test_a_refused_merged_statement_fails_only_the_bad_call() -> None:
    runner = Runner()
    runner.gate = asyncio.Event()
    b = batcher(runner, slots=1)
    first = asyncio.create_task(b.insert("k", [("a",)]))
    await asyncio.sleep(0)
    good = asyncio.create_task(b.insert("k", [("b",)]))
    bad = asyncio.create_task(b.insert("k", [("bad1",)]))
    also_good = asyncio.create_task(b.insert("k", [("c",), ("d",)]))
    await asyncio.sleep(0)
    runner.gate.set()
    assert await first == ran("k", "a")
    assert await good == ran("k", "b")  # each retried alone: its own statement's result
    with pytest.raises(ValueError, match="refused"):
        await bad
    assert await also_good == ran("k", "c", "d")
    merged, *alone = runner.statements[1:]
    assert merged == ["b", "bad1", "c", "d"]
    assert alone == [["b"], ["bad1"], ["c", "d"]]


async def test_a_lone_refused_call_raises_what_the_statement_raised() -> None:
    b = batcher(Runner())
    with pytest.raises(ValueError, match="refused"):
        await b.insert("k", [("bad",)])
    assert b._lanes == {}


async def test_an_unreachable_store_fails_every_call_of_the_statement_without_retries() -> None:
    statements: list[list[str]] = []
    gate = asyncio.Event()

    async def down(key: Hashable, records: list[Record]) -> Result:
        statements.append([r[0] for r in records])
        await gate.wait()
        raise StoreUnavailable("down")

    b: InsertBatcher[Record, Result] = InsertBatcher(down, slots=1)
    first = asyncio.create_task(b.insert("k", [("a",)]))
    await asyncio.sleep(0)
    rest = [asyncio.create_task(b.insert("k", [(n,)])) for n in ("b", "c")]
    await asyncio.sleep(0)
    gate.set()
    for call in (first, *rest):
        with pytest.raises(StoreUnavailable):
            await call
    assert statements == [["a"], ["b", "c"]]  # the merged call was not retried one by one
