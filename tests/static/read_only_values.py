"""Checked by mypy, never run: the value types' fields are read-only for the type checker.

``duetime.types.value_type`` leaves instances writable at run time (a frozen dataclass's
``__init__`` is nearly half of decoding a task row), so this is where the read-only rule is
tested: each assignment below must be an error, and mypy's ``warn_unused_ignores`` (strict)
fails the check if one stops being one.
"""

from __future__ import annotations

from duetime.delivery.base import Outcome
from duetime.lifecycle.acks import AckResult
from duetime.lifecycle.finish import Ack
from duetime.types import Lease, RetryPolicy, Task, TaskStatus


def assignments(
    task: Task, lease: Lease, policy: RetryPolicy, ack: Ack, result: AckResult, outcome: Outcome
) -> None:
    task.status = TaskStatus.READY  # type: ignore[misc]
    lease.lease_id = "other"  # type: ignore[misc]
    policy.max_attempts = 1  # type: ignore[misc]
    ack.ok = False  # type: ignore[misc]
    result.task_id = None  # type: ignore[misc]
    outcome.retryable = False  # type: ignore[misc]
