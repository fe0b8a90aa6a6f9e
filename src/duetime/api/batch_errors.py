"""Batch create errors name the task they are about (``tasks.N.depends_on``).

The stores check parents while inserting and know nothing of the request's framing: they say
``depends_on`` and name the missing parent. The batch route finds which body named it.
"""

from __future__ import annotations

from collections.abc import Sequence

from duetime.api.schemas import TaskCreate
from duetime.errors import ValidationError


def located(exc: ValidationError, bodies: Sequence[TaskCreate]) -> ValidationError:
    """``exc`` with its field prefixed ``tasks.N.`` when it is about one body's ``depends_on``
    (the first body naming the parent the error names); otherwise ``exc`` unchanged."""
    if exc.field != "depends_on":
        return exc
    for i, body in enumerate(bodies):
        if any(parent in exc.detail for parent in body.depends_on):
            return ValidationError(exc.detail, field=f"tasks.{i}.depends_on")
    return exc
