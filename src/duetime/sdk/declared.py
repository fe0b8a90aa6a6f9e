"""Schedules a worker declares (``worker.schedule(...)``), applied when it starts.

Each declaration is an :meth:`~duetime.AsyncClient.ensure_schedule` call by key, so starting
the worker again, or on N hosts at once, leaves exactly one schedule per key — changed to match
the code when the code changed. A server that is briefly unavailable at start is waited for (the
worker cannot do its job without it anyway); a declaration the server refuses (a bad cron, an
unknown zone) stops the worker with that error.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from duetime.sdk.errors import ApiUnavailable, TransportError

if TYPE_CHECKING:
    from duetime.sdk.client import AsyncClient

log = logging.getLogger("duetime.worker")

__all__ = ["DeclaredSchedule", "declare_all"]


@dataclass(frozen=True, slots=True)
class DeclaredSchedule:
    """One ``worker.schedule(...)``: the key and the ``ensure_schedule`` settings."""

    key: str
    settings: Mapping[str, Any] = field(default_factory=dict)


def declaration(
    key: str,
    *,
    name: str,
    queue: str | None,
    cron: str | None,
    every: str | None,
    rrule: str | None,
    tz: str | None,
    payload: Any,
    task: Mapping[str, Any] | None,
    settings: Mapping[str, Any],
) -> DeclaredSchedule:
    """A worker-target schedule whose occurrences are tasks named ``name`` on ``queue`` (None:
    the worker's first queue when it starts, after ``duetime worker --queue`` applied)."""
    if not key:
        raise ValueError("a declared schedule needs a key")
    if sum(x is not None for x in (cron, every, rrule)) != 1:
        raise ValueError(f"schedule {key!r}: give exactly one of cron, every or rrule")
    template: dict[str, Any] = {"name": name, "target": {"type": "worker"}}
    if queue is not None:
        template["queue"] = queue
    if payload is not None:
        template["payload"] = payload
    template.update(task or {})
    body: dict[str, Any] = {"cron": cron, "every": every, "rrule": rrule, "timezone": tz}
    body.update(settings)
    body["task"] = template
    return DeclaredSchedule(key, body)


async def declare_all(
    client: AsyncClient,
    declared: list[DeclaredSchedule],
    stopping: asyncio.Event,
    *,
    default_queue: str,
    backoff_seconds: float,
    max_backoff_seconds: float,
) -> None:
    """Ensure every declared schedule, waiting out an unavailable server until ``stopping``."""
    for item in declared:
        settings = dict(item.settings)
        settings["task"] = {"queue": default_queue, **settings["task"]}
        delay = backoff_seconds
        while not stopping.is_set():
            try:
                made = await client.ensure_schedule(item.key, **settings)
            except (ApiUnavailable, TransportError) as exc:
                log.warning("declaring schedule %r: %s; trying again", item.key, exc)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stopping.wait(), delay)
                delay = min(max_backoff_seconds, delay * 2)
                continue
            log.info(
                "schedule %r %s (%s)",
                item.key,
                "created" if made.created else "up to date",
                made.description or made.cron or made.every or made.rrule,
            )
            break
