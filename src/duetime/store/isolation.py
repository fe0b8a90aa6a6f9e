"""Poison-row isolation for batch writes (SPEC §7 "Bounded by construction").

Engine loops and the lease API write many items in one call. If a call fails for anything but a
store outage, one item is usually to blame (a row the store refuses); without isolation the
whole batch would be retried forever and every healthy item in it with it. The rule, for every
batch write:

1. Write the batch. The usual case costs nothing more.
2. On ``StoreUnavailable``, re-raise: the caller keeps the batch and retries after the outage.
3. On any other error, split the batch in two and write each half the same way (a batch is one
   transaction, all or nothing, so nothing of the failed call was recorded); a healthy half is
   written once, a bad one split again, until the bad item is alone.
4. The bad item alone is written once more (a passing fault gets a second chance); if it fails
   again, record it as a failure (for a completion, a failed, non-retryable attempt
   with the reason ``could not record <outcome>: <error class>: <message>``); if even that
   cannot be written, log it and skip it. The loop goes on.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, TypeVar

from duetime.errors import StoreUnavailable
from duetime.states import after_attempt
from duetime.store.protocols import CompletionStore
from duetime.types import AttemptOutcome, Completion, CompletionResult

log = logging.getLogger("duetime.engine")

T = TypeVar("T")
R = TypeVar("R")

_REASON_CHARS = 300


def reason(what: str, exc: BaseException) -> str:
    """``"<what>: <class>: <first line of the message>"``, short enough for an error column."""
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    text = (
        f"{what}: {type(exc).__name__}: {message}" if message else f"{what}: {type(exc).__name__}"
    )
    return text if len(text) <= _REASON_CHARS else text[: _REASON_CHARS - 1] + "…"


async def bisect(
    items: Sequence[T],
    write: Callable[[Sequence[T]], Awaitable[list[R]]],
    alone: Callable[[T, Exception], Awaitable[R]],
) -> list[R]:
    """``write(items)``, or on failure (but ``StoreUnavailable``) the results of writing each
    half the same way; an item that fails alone gets ``alone(item, error)``. Results in input
    order, one per item."""
    try:
        return await write(items)
    except StoreUnavailable:
        raise
    except Exception as exc:
        if len(items) == 1:
            # Once more before blaming it: a passing fault the store did not report as an
            # outage (a connection killed mid-statement) must not fail a healthy task.
            try:
                return await write(items)
            except StoreUnavailable:
                raise
            except Exception as again:
                return [await alone(items[0], again)]
        if not items:
            raise
        log.warning(
            "a batch of %d failed (%s: %s); splitting it to find the item to blame",
            len(items),
            type(exc).__name__,
            exc,
        )
        mid = len(items) // 2
        first = await bisect(items[:mid], write, alone)
        return first + await bisect(items[mid:], write, alone)


async def complete_isolated(
    store: CompletionStore,
    completions: Sequence[Completion],
    *,
    on_skipped: Callable[[Completion], None] | None = None,
) -> list[CompletionResult]:
    """``store.task_complete_many(completions)`` with poison-row isolation (see the module).

    A completion that cannot be recorded is replaced by a failed, non-retryable one under the same
    lease, whose error says why (a reaper's ``lease_expired`` keeps its outcome, so a lease that a
    heartbeat extended meanwhile still wins). If that cannot be recorded either, it is logged
    and answered as not accepted (and given to ``on_skipped``); its lease expires and the
    reaper tries again."""
    if not completions:
        return []

    async def alone(c: Completion, exc: Exception) -> CompletionResult:
        why = reason(f"could not record {c.outcome.value}", exc)
        log.error("task %s: %s; recording the attempt as failed", c.task_id, why)
        outcome = c.outcome if c.outcome is AttemptOutcome.LEASE_EXPIRED else AttemptOutcome.FAILED
        failed = Completion(
            task_id=c.task_id,
            lease_id=c.lease_id,
            outcome=outcome,
            started_at=c.started_at,
            duration_ms=c.duration_ms,
            error=why,
            worker=c.worker,
            status=after_attempt(False, None),
        )
        try:
            (result,) = await store.task_complete_many([failed])
        except StoreUnavailable:
            raise
        except Exception as again:
            log.error(
                "task %s: could not record its failure either (%s); skipped: its lease expires "
                "and the reaper retries it",
                c.task_id,
                reason("error", again),
            )
            if on_skipped is not None:
                on_skipped(c)
            return CompletionResult(c.task_id, c.lease_id, False, None)
        return result

    return await bisect(completions, store.task_complete_many, alone)


def readable(rows: Iterable[Any], convert: Callable[[Any], R], what: str) -> list[R]:
    """``convert`` each row; a row that cannot be converted (a value no release of duetime
    writes, left by a hand edit or a bug) is logged and left out, so one row never makes a read
    that serves every tenant fail. Both stores read the engine's batches through this."""
    out: list[R] = []
    for row in rows:
        try:
            out.append(convert(row))
        except Exception as exc:
            row_id = _row_id(row)
            log.error("%s %s cannot be read; skipped: %s", what, row_id, reason("error", exc))
    return out


def _row_id(row: Any) -> str:
    try:
        return str(row["id"])
    except Exception:
        return "(unknown id)"
