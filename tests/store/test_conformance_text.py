"""Outside text and odd numbers in completions (:mod:`duetime.testing.conformance_text`), run
against every backend through the ``store`` fixture — and both backends side by side, fed the same
hostile strings, which must give identical answers."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator

import pytest

from duetime.clock import FakeClock
from duetime.store import Store, store_from_url
from duetime.testing.conformance_text import *  # noqa: F403
from duetime.testing.conformance_text import HOSTILE, HOSTILE_RESULTS, LONG_LOGS, record
from duetime.types import AttemptOutcome


@pytest.fixture
async def both(sqlite_url: str, pg_url: str, clock: FakeClock) -> AsyncIterator[list[Store]]:
    stores = [store_from_url(url, clock=clock) for url in (sqlite_url, pg_url)]
    for s in stores:
        await s.open()
        await s.migrate()
    try:
        yield stores
    finally:
        for s in stores:
            await s.close()


async def test_both_stores_record_hostile_text_identically(
    both: list[Store], clock: FakeClock
) -> None:
    cases: list[dict[str, object]] = []
    for text in HOSTILE.values():
        cases.append({"error": text, "worker": text, "logs": text, "response": text})
        cases.append({"outcome": AttemptOutcome.TIMED_OUT, "error": text, "delay": 5.0})
    for text in LONG_LOGS.values():
        cases.append({"outcome": AttemptOutcome.SUCCEEDED, "logs": text})
    for text in HOSTILE_RESULTS.values():
        cases.append({"outcome": AttemptOutcome.SUCCEEDED, "result_json": text})
    for case in cases:
        sqlite, postgres = [await record(s, clock, **dict(case)) for s in both]
        assert dataclasses.asdict(sqlite) == dataclasses.asdict(postgres), case
