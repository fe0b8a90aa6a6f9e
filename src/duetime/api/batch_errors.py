"""Batch create errors name the task they are about (``tasks.N.depends_on``).

The stores check parents while inserting and know nothing of the request's framing: they say
``depends_on`` and name the missing parent. The batch route finds which body named it.
"""

from __future__ import annotations

from collections.abc import Sequence

from duetime.errors import ValidationError
from duetime.types import NewTask


def located(exc: ValidationError, tasks: Sequence[NewTask]) -> ValidationError:
    """``exc`` with its field prefixed ``tasks.N.`` when it is about one task's ``depends_on``
    (the first task naming the parent the error names); otherwise ``exc`` unchanged."""
    if exc.field != "depends_on":
        return exc
    for i, task in enumerate(tasks):
        if any(parent in exc.detail for parent in task.depends_on):
            return ValidationError(exc.detail, field=f"tasks.{i}.depends_on")
    return exc
