"""Group commit (duetime.store.postgres.batching.InsertBatcher) over a recording runner: a lone
call runs in its caller's task, calls that arrive while statements run share the next one,
and a merged statement the database refuses is retried call by call, so only the bad input
fails. No database: the runner stands in for the statement, which is all the batcher sees."""

from __future__ import annotations

import asyncio
from collections.abc import Hashable
from typing import Any

import pytest

from duetime.errors import StoreUnavailable
from duetime.store.postgres.batching import InsertBatcher

Record = tuple[Any, ...]


class Runner:
    """Records each statement's records; rows are ``(id, key)``. A statement holding a record
    whose id starts with ``bad`` raises ValueError; ``gate`` (when set) holds every statement
    until it opens."""

    def __init__(self) -> None:
        self.statements: list[list[str]] = []
        self.tasks: list[asyncio.Task[Any] | None] = []
        self.gate: asyncio.Event | None = None

    async def __call__(self, key: Hashable, records: list[Record]) -> list[tuple[str, Hashable]]:
        self.statements.append([r[0] for r in records])
        self.tasks.append(asyncio.current_task())
        if self.gate is not None:
            await self.gate.wait()
        if any(str(r[0]).startswith("bad") for r in records):
            raise ValueError("refused")
        # Rows come back in no particular order, as from a database.
        return [(r[0], key) for r in reversed(records)]


def batcher(runner: Runner, slots: int = 1) -> InsertBatcher[tuple[str, Hashable]]:
    return InsertBatcher(runner, row_id=lambda row: row[0], record_id=lambda r: r[0], slots=slots)


async def test_a_lone_call_runs_in_its_own_task_and_gets_its_rows_in_input_order() -> None:
    runner = Runner()
    b = batcher(runner)
    rows = await b.insert("k", [("a",), ("b",), ("c",)])
    assert rows == [("a", "k"), ("b", "k"), ("c", "k")]
    assert runner.statements == [["a", "b", "c"]]
    assert runner.tasks == [asyncio.current_task()]
    assert b._lanes == {}  # nothing left behind


async def test_calls_arriving_while_a_statement_runs_share_the_next_one() -> None:
    runner = Runner()
    runner.gate = asyncio.Event()
    b = batcher(runner, slots=1)
    first = asyncio.create_task(b.insert("k", [("a",)]))
    await asyncio.sleep(0)  # the first statement is running, held at the gate
    rest = [asyncio.create_task(b.insert("k", [(name,)])) for name in ("b", "c", "d")]
    await asyncio.sleep(0)
    assert runner.statements == [["a"]]
    runner.gate.set()
    assert await first == [("a", "k")]
    assert [await t for t in rest] == [[("b", "k")], [("c", "k")], [("d", "k")]]
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
    assert [await c for c in calls] == [[("k1", "k")], [("j1", "j")]]


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
    assert await first == [("a", "k")]
    assert await good == [("b", "k")]
    with pytest.raises(ValueError, match="refused"):
        await bad
    assert await also_good == [("c", "k"), ("d", "k")]
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

    async def down(key: Hashable, records: list[Record]) -> list[tuple[str, Hashable]]:
        statements.append([r[0] for r in records])
        await gate.wait()
        raise StoreUnavailable("down")

    b: InsertBatcher[tuple[str, Hashable]] = InsertBatcher(
        down, row_id=lambda row: row[0], record_id=lambda r: r[0], slots=1
    )
    first = asyncio.create_task(b.insert("k", [("a",)]))
    await asyncio.sleep(0)
    rest = [asyncio.create_task(b.insert("k", [(n,)])) for n in ("b", "c")]
    await asyncio.sleep(0)
    gate.set()
    for call in (first, *rest):
        with pytest.raises(StoreUnavailable):
            await call
    assert statements == [["a"], ["b", "c"]]  # the merged call was not retried one by one
