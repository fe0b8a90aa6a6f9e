"""Store contracts for outside text and odd numbers in completions (SPEC §7 "Bounded by
construction": both stores accept and refuse exactly the same text).

Every store must record a completion whatever its error, result, worker, logs or response text
holds — NUL, other
control characters, lone surrogates, text far past the limits — and record exactly what
:func:`duetime.store.recorded.recordable` makes of it, so both stores answer alike. Run by
``tests/store/test_conformance_text.py`` against every backend; that module also compares the two
backends' answers side by side.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson

from duetime.clock import FakeClock
from duetime.store.protocols import Store
from duetime.store.recorded import (
    ERROR_LIMIT_BYTES,
    LOGS_LIMIT_BYTES,
    MAX_RETRY_DELAY_SECONDS,
    RESPONSE_LIMIT_BYTES,
    RESULT_LIMIT_BYTES,
    WORKER_LIMIT_BYTES,
    recordable,
)
from duetime.testing.conformance import (
    _claim_one,
    _completion,
    _create,
    _get,
    _tenant,
)
from duetime.text import REPLACEMENT, clean
from duetime.types import AttemptOutcome, Completion, TaskStatus

HOSTILE: dict[str, str] = {
    "nul": "before\x00after",
    "only-nul": "\x00",
    "controls": "".join(chr(c) for c in range(32)) + "\x7f",
    "c1-controls": "a\x80b\x9fc",
    "lone-high-surrogate": "x\ud800y",
    "lone-low-surrogate": "x\udc80y",
    "reversed-pair": "\udc00\ud800",
    "emoji": "ok \U0001f600 \u00e9",
    "long-ascii": "e" * (3 * ERROR_LIMIT_BYTES),
    "long-multibyte": "\u00e9\U0001f600" * ERROR_LIMIT_BYTES,
    "long-nul": "\x00" * (2 * ERROR_LIMIT_BYTES),
    "quotes-and-backslashes": '"\\' * 50,
    "empty": "",
}
"""Outside text for the completion contracts: what a database given it raw may refuse or keep
differently (NUL, other controls, lone surrogates, text past the limits), beside plain cases."""

LONG_LOGS: dict[str, str] = {
    "multiline": "line 1\n\tline 2\r\nline 3\x00 end\n",
    "just-under": "l" * (LOGS_LIMIT_BYTES - 1),
    "at-limit": "l" * LOGS_LIMIT_BYTES,
    "past-limit-ascii": "l" * (LOGS_LIMIT_BYTES + 10_000),
    "past-limit-multibyte": "\u00e9\U0001f600" * (LOGS_LIMIT_BYTES // 3),
    "past-limit-nul": "\x00" * (LOGS_LIMIT_BYTES + 1),
}
"""Logs around their 64 KiB limit (and hostile ones)."""

HOSTILE_RESULTS: dict[str, str] = {
    "json-with-escaped-nul": orjson.dumps({"a": "x\x00y"}).decode(),
    "json-with-escaped-lone-surrogate": '{"a": "\\ud800"}',
    "raw-nul-not-json": "res\x00ult",
    "raw-lone-surrogate": '"\ud800"',
    "not-json": "plain words",
    "too-long-json": orjson.dumps("j" * (RESULT_LIMIT_BYTES + 10)).decode(),
    "nan-literal": "NaN",
    "empty": "",
}
"""Result texts that are not (storable) JSON or are too long."""


@dataclass(frozen=True, slots=True)
class Recorded:
    """What a store answered about one completion, for comparing stores."""

    accepted: bool
    status: str | None
    last_error: str | None
    result: Any
    attempt_error: str | None
    attempt_worker: str | None
    http_status: int | None
    duration_ms: float
    retry_in_seconds: float | None
    attempt_logs: str | None = None
    attempt_response: str | None = None


async def record(store: Store, clock: FakeClock, **completion: Any) -> Recorded:
    """Create and claim a task, end it with a completion built from ``completion`` (see
    :func:`duetime.testing.conformance._completion`), and read back what was recorded."""
    tenant = await _tenant(store, f"t-{len(completion)}-{id(completion)}")
    task = await _create(store, tenant)
    lease = await _claim_one(store, task)
    outcome = completion.pop("outcome", AttemptOutcome.FAILED)
    (result,) = await store.task_complete_many([_completion(lease, outcome, **completion)])
    after = await _get(store, task)
    attempts = await store.attempt_list(tenant, task.id)
    assert len(attempts) == 1
    retry_in = None
    if after.finished_at is None:
        retry_in = (after.due_at - await store.now()).total_seconds()
    return Recorded(
        accepted=result.accepted,
        status=None if result.status is None else result.status.value,
        last_error=after.last_error,
        result=after.result,
        attempt_error=attempts[0].error,
        attempt_worker=attempts[0].worker,
        http_status=attempts[0].http_status,
        duration_ms=attempts[0].duration_ms,
        retry_in_seconds=retry_in,
        attempt_logs=attempts[0].logs,
        attempt_response=attempts[0].response,
    )


async def test_error_text_is_recorded_cleaned_and_bounded(store: Store, clock: FakeClock) -> None:
    """task_complete_many(): a failure's error, whatever it holds, is recorded as
    ``clean(error, ERROR_LIMIT_BYTES)`` in the attempt and in ``last_error``."""
    for name, text in HOSTILE.items():
        got = await record(store, clock, error=text)
        want = clean(text, ERROR_LIMIT_BYTES)
        assert got.accepted, name
        assert got.attempt_error == want, name
        assert got.last_error == want, name
        assert len(want.encode()) <= ERROR_LIMIT_BYTES
        assert "\x00" not in want


async def test_worker_text_is_recorded_cleaned_and_bounded(store: Store, clock: FakeClock) -> None:
    """task_complete_many(): the attempt's worker is recorded cleaned and cut."""
    for name, text in HOSTILE.items():
        got = await record(store, clock, error="e", worker=text)
        assert got.attempt_worker == clean(text, WORKER_LIMIT_BYTES), name


async def test_logs_are_recorded_cleaned_and_cut_to_64_kib(store: Store, clock: FakeClock) -> None:
    """task_complete_many(): an attempt's logs, on success or failure, are recorded as
    ``clean(logs, LOGS_LIMIT_BYTES)``: tabs and newlines kept, other controls replaced, longer
    text cut on a character boundary (never refused); no logs are NULL."""
    for name, text in {**HOSTILE, **LONG_LOGS}.items():
        want = clean(text, LOGS_LIMIT_BYTES)
        for outcome in (AttemptOutcome.SUCCEEDED, AttemptOutcome.FAILED):
            got = await record(store, clock, outcome=outcome, error="e", logs=text)
            assert got.accepted, name
            assert got.attempt_logs == want, (name, outcome)
        assert len(want.encode()) <= LOGS_LIMIT_BYTES, name
    kept = clean(LONG_LOGS["multiline"], LOGS_LIMIT_BYTES)
    assert kept == f"line 1\n\tline 2\r\nline 3{REPLACEMENT} end\n"
    assert len(clean(LONG_LOGS["past-limit-ascii"], LOGS_LIMIT_BYTES)) == LOGS_LIMIT_BYTES
    cut = clean(LONG_LOGS["past-limit-multibyte"], LOGS_LIMIT_BYTES)
    assert LONG_LOGS["past-limit-multibyte"].startswith(cut)  # whole characters only
    assert LOGS_LIMIT_BYTES - 4 < len(cut.encode()) <= LOGS_LIMIT_BYTES
    got = await record(store, clock, outcome=AttemptOutcome.SUCCEEDED)
    assert (got.attempt_logs, got.attempt_response) == (None, None)


async def test_a_response_is_recorded_cleaned_and_cut_to_4_kib(
    store: Store, clock: FakeClock
) -> None:
    """task_complete_many(): a webhook attempt's response (its answer's start) is recorded as
    ``clean(response, RESPONSE_LIMIT_BYTES)``, with either outcome."""
    for name, text in HOSTILE.items():
        got = await record(store, clock, error="HTTP 500", http_status=500, response=text)
        assert got.attempt_response == clean(text, RESPONSE_LIMIT_BYTES), name
        assert len((got.attempt_response or "").encode()) <= RESPONSE_LIMIT_BYTES, name
    got = await record(
        store, clock, outcome=AttemptOutcome.SUCCEEDED, http_status=200, response="fine"
    )
    assert (got.status, got.attempt_response) == ("succeeded", "fine")


async def test_hostile_text_inside_a_json_result_round_trips(
    store: Store, clock: FakeClock
) -> None:
    """task_complete_many(): a result that is JSON text is kept as it is, whatever its strings
    hold once escaped (a NUL, control characters, a non-BMP character)."""
    for name, text in HOSTILE.items():
        if any("\ud800" <= ch <= "\udfff" for ch in text):
            continue  # no JSON encoder of ours writes a lone surrogate; see the next test
        value = {"said": text}
        got = await record(
            store,
            clock,
            outcome=AttemptOutcome.SUCCEEDED,
            result_json=orjson.dumps(value).decode(),
        )
        assert got.status == "succeeded", name
        assert got.result == value, name


async def test_a_result_that_is_not_storable_json_is_kept_as_text(
    store: Store, clock: FakeClock
) -> None:
    """task_complete_many(): a result that is not JSON (or too long, or not valid UTF-8) is
    recorded as a JSON string of its cleaned first part, never refused."""
    for name, text in HOSTILE_RESULTS.items():
        got = await record(store, clock, outcome=AttemptOutcome.SUCCEEDED, result_json=text)
        assert got.status == "succeeded", name
        stored = recordable(_any_completion(result_json=text)).result_json
        assert stored is not None
        assert got.result == orjson.loads(stored), name
        assert len(stored.encode()) <= RESULT_LIMIT_BYTES, name
        if name == "raw-nul-not-json":
            assert got.result == f"res{REPLACEMENT}ult"


async def test_odd_numbers_in_a_completion_are_bounded(store: Store, clock: FakeClock) -> None:
    """task_complete_many(): an HTTP status outside 0-999 is dropped, a non-finite or negative
    duration is 0, and a retry delay is bounded to ``[0, MAX_RETRY_DELAY_SECONDS]``."""
    got = await record(store, clock, error="e", http_status=2**40, duration_ms=math.nan)
    assert (got.http_status, got.duration_ms) == (None, 0.0)
    got = await record(store, clock, error="e", http_status=-1, duration_ms=math.inf)
    assert (got.http_status, got.duration_ms) == (None, 0.0)
    got = await record(store, clock, error="e", http_status=503, duration_ms=-5.0)
    assert (got.http_status, got.duration_ms) == (503, 0.0)
    got = await record(store, clock, error="e", delay=1e300)
    assert got.status == "retrying"
    assert got.retry_in_seconds == MAX_RETRY_DELAY_SECONDS
    got = await record(store, clock, error="e", delay=math.inf)
    assert got.retry_in_seconds == MAX_RETRY_DELAY_SECONDS
    got = await record(store, clock, error="e", delay=math.nan)
    assert got.retry_in_seconds == 0.0
    got = await record(store, clock, error="e", delay=-3.0)
    assert got.retry_in_seconds == 0.0


def _any_completion(**fields: Any) -> Completion:
    base: dict[str, Any] = {
        "task_id": "t",
        "lease_id": "l",
        "outcome": AttemptOutcome.SUCCEEDED,
        "started_at": datetime(2030, 1, 1, tzinfo=UTC),
        "duration_ms": 1.0,
        "status": TaskStatus.SUCCEEDED,
    }
    return Completion(**(base | fields))
