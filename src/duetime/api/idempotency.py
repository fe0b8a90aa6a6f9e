"""Idempotent creates (SPEC §3): the same ``idempotency_key`` again with the same fields is the
existing task (200); with different fields it is a 409 naming the existing task.

"The same fields" is decided on a fingerprint of the create request that made the task, stored
with it (``tasks.request_hash``), not on the task as it is now: a task PATCHed since, or one that
has run, still matches a repeat of its original request. Fields are compared as validated (a
default left out equals the default given), so ``{"priority": 0}`` repeats ``{}``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import orjson

from duetime.api.schemas import TaskCreate
from duetime.errors import Conflict
from duetime.types import NewTask, TaskCreated


def request_hash(body: TaskCreate) -> str | None:
    """The fingerprint of a create request with an idempotency key (None without one)."""
    if body.idempotency_key is None:
        return None
    canonical = orjson.dumps(body.model_dump(mode="json"), option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(canonical).hexdigest()[:32]


def check_repeats(new: Sequence[NewTask], made: Sequence[TaskCreated], prefix: bool) -> None:
    """Raise ``Conflict`` for the first idempotent hit whose original request differs (tasks
    made before fingerprints were kept have none and are accepted, as before). For a single
    create only: a batch's other tasks are made by then, and a batch returns hits as they are."""
    for i, (asked, result) in enumerate(zip(new, made, strict=True)):
        existing = result.task.request_hash
        if result.created or existing is None or existing == asked.request_hash:
            continue
        where = f"tasks.{i}: " if prefix else ""
        raise Conflict(
            f"{where}idempotency_key {asked.idempotency_key!r} was used for task "
            f"{result.task.id} with different fields; repeat that request exactly, or use "
            f"another key"
        )
