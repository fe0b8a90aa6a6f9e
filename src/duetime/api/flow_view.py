"""Keyed flow control as the API and the dashboard show it: a queue's rules, its busiest keys,
and why a key's ready tasks wait — one wording for ``GET /v1/queues/{name}`` and the
dashboard's "why a task waits" (:mod:`duetime.api.ui.waiting`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from duetime.flow.rules import flow_document, rate_text
from duetime.types import KeyFigure, QueueSettings


def rules_json(settings: QueueSettings) -> dict[str, Any]:
    """The queue's keyed flow rules (``key_limit``, ``unique``, ``debounce``, ``throttle``;
    null when not set)."""
    return flow_document(settings.flow, settings.max_concurrency_per_key)


def _at(value: datetime) -> str:
    return f"{value:%Y-%m-%d %H:%M:%S}Z"


def key_holds(figure: KeyFigure, settings: QueueSettings) -> list[str]:
    """What keeps the key's ready tasks waiting now: ``rate`` (its bucket holds no whole
    token), ``max_concurrency`` (it runs its most already); empty when none wait or nothing
    holds them. The key ``""`` (no value) is held by neither."""
    if not figure.ready or not figure.key:
        return []
    held = []
    if settings.flow.key_rate is not None and figure.next_start_at is not None:
        held.append("rate")
    most = settings.max_concurrency_per_key
    if most is not None and figure.running >= most:
        held.append("max_concurrency")
    return held


def key_waiting(figure: KeyFigure, settings: QueueSettings, queue: str) -> str | None:
    """Why the key's ready tasks wait, in words (None: nothing holds them)."""
    held = key_holds(figure, settings)
    if not held:
        return None
    parts = []
    rate = settings.flow.key_rate
    if "rate" in held and rate is not None and figure.next_start_at is not None:
        parts.append(
            f"rate limit of key {figure.key} ({rate_text(rate)}) in queue {queue}: next start "
            f"at {_at(figure.next_start_at)}"
        )
    if "max_concurrency" in held:
        parts.append(
            f"key {figure.key} runs its max_concurrency of {settings.max_concurrency_per_key} "
            f"in queue {queue} already"
        )
    return "; ".join(parts)


def key_json(figure: KeyFigure, settings: QueueSettings, queue: str) -> dict[str, Any]:
    """One key of ``GET /v1/queues/{name}``'s ``keys``."""
    return {
        "key": figure.key,
        "ready": figure.ready,
        "running": figure.running,
        "tokens": None if figure.tokens is None else round(figure.tokens, 3),
        "next_start_at": figure.next_start_at,
        "held_by": key_holds(figure, settings),
        "waiting": key_waiting(figure, settings, queue),
    }


def keyed(settings: QueueSettings) -> bool:
    """Whether the queue has limits per key (its keys are worth showing)."""
    return settings.flow.key_rate is not None or settings.max_concurrency_per_key is not None
