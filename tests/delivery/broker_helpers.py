"""Helpers shared by the broker tests (imported as ``broker_helpers``; pytest puts this directory
on ``sys.path``)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from duetime.auth import new_signing_secret
from duetime.delivery.base import Deliverer, Delivery, Outcome
from duetime.testing.fakes import running_task
from duetime.types import AttemptOutcome

SECRET = new_signing_secret()
ALLOW_HINT = "set DUETIME_ALLOW_PRIVATE_TARGETS=true to allow"


def unique(prefix: str) -> str:
    """A queue, stream, subject or key name no other test (or test process) uses."""
    return f"duetime-test-{prefix}-{uuid.uuid4().hex[:10]}"


def deliveries(target: Mapping[str, Any], n: int, **changes: Any) -> list[Delivery]:
    """``n`` first attempts of distinct tasks to ``target``, payload ``{"n": i}``, signed."""
    out = []
    for i in range(n):
        task = running_task(
            target,
            id=str(uuid.uuid4()),
            payload_json=f'{{"n":{i}}}',
            idempotency_key=f"key-{i}-{uuid.uuid4().hex[:6]}",
            **changes,
        )
        out.append(Delivery(task, 1, (SECRET,)))
    return out


async def deliver_all(deliverer: Deliverer, items: Sequence[Delivery]) -> list[Outcome]:
    """Every item delivered at once (as a dispatcher round does), outcomes in order."""
    return list(await asyncio.gather(*(deliverer.deliver(d) for d in items)))


async def until_delivered(
    deliverer: Deliverer, failed: Sequence[Delivery], *, rounds: int = 20, pause: float = 0.2
) -> set[str]:
    """Retry ``failed`` (as the retry policy would: next attempt number) until every one
    succeeds; the task ids that needed a retry. Fails when a round makes no progress for long."""
    retried: set[str] = set()
    pending = list(failed)
    for _ in range(rounds):
        if not pending:
            return retried
        retried.update(d.task.id for d in pending)
        pending = [replace(d, attempt=d.attempt + 1) for d in pending]
        outcomes = await deliver_all(deliverer, pending)
        for d, o in zip(pending, outcomes, strict=True):
            assert o.retryable or o.succeeded, (d.task.id, o)
        pending = [d for d, o in zip(pending, outcomes, strict=True) if not o.succeeded]
        if pending:
            await asyncio.sleep(pause)
    raise AssertionError(f"{len(pending)} deliveries still failing after {rounds} rounds")


def failed(items: Sequence[Delivery], outcomes: Sequence[Outcome]) -> list[Delivery]:
    return [d for d, o in zip(items, outcomes, strict=True) if not o.succeeded]


def assert_failed(outcome: Outcome, *, retryable: bool, text: str) -> None:
    assert outcome.outcome is AttemptOutcome.FAILED, outcome
    assert outcome.retryable is retryable, outcome
    assert outcome.error is not None and text in outcome.error, outcome.error


async def burst_with_cut(
    deliverer: Deliverer, items: Sequence[Delivery], cut: Any, *, after: int
) -> list[Outcome]:
    """Deliver ``items`` at once and call ``cut()`` (drop the connection, then let the broker
    be reachable again) once ``after`` of them have been confirmed: a connection killed in the
    middle of a burst."""
    enough = asyncio.Event()
    done = 0

    def count(_: object) -> None:
        nonlocal done
        done += 1
        if done >= after:
            enough.set()

    jobs = [asyncio.ensure_future(deliverer.deliver(d)) for d in items]
    for job in jobs:
        job.add_done_callback(count)
    await enough.wait()
    cut()
    return [await j for j in jobs]
