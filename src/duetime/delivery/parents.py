"""A task's parents as its deliveries carry them (SPEC §3 "Workflows"): a worker's lease (the
SDK's ``job.parents``), ``GET /v1/tasks/{id}/parents``, and — for a task created with
``parents_in_body`` — the body of a webhook or broker message::

    {"payload": <the task's payload>,
     "parents": [{"id": "...", "ref": "extract", "name": "extract", "status": "succeeded",
                  "result": {...}, "error": null, "finished_at": "<RFC 3339>"}, ...]}

with the header ``duetime-body: parents`` (a body without it is the payload itself). The
signature covers this body as sent.

Bounded: a parent's result travels inline when it is at most :data:`INLINE_RESULT_BYTES` and
the parents sent so far stay within :data:`PARENTS_BUDGET_BYTES`; otherwise it travels by
reference, ``"result_ref": "/v1/tasks/<id>/result"`` (read it with the tenant's API key) and
``"result": null`` — never cut.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from duetime.types import ParentOutcome, ParentsOf, TaskStatus

INLINE_RESULT_BYTES = 64 * 1024
"""The largest result a parent carries inline (the store's read leaves larger ones out)."""
PARENTS_BUDGET_BYTES = 1024 * 1024
"""Inline results of one task's parents add up to at most this; the rest go by reference."""
HEADER_BODY = "duetime-body"
"""``parents``: the body is the envelope of the module, not the payload itself."""
BODY_PARENTS = "parents"


def result_ref(task_id: str) -> str:
    """Where a result too large to travel inline is read (``GET``, the tenant's API key)."""
    return f"/v1/tasks/{task_id}/result"


def parents_json(
    parents: Sequence[ParentOutcome], budget: int = PARENTS_BUDGET_BYTES
) -> list[dict[str, Any]]:
    """The parents as JSON-ready objects, in order (see the module for the bound)."""
    out: list[dict[str, Any]] = []
    left = budget
    for p in parents:
        item: dict[str, Any] = {
            "id": p.id,
            "ref": p.ref,
            "name": p.name,
            "status": p.status.value,
            "result": None,
            "error": None if p.status is TaskStatus.SUCCEEDED else p.error,
            "finished_at": p.finished_at,
        }
        if p.result_json is not None and len(p.result_json) <= left:
            item["result"] = orjson.Fragment(p.result_json)
            left -= len(p.result_json)
        elif p.result_bytes:
            item["result_ref"] = result_ref(p.id)
        out.append(item)
    return out


def envelope(payload_json: str, parents: ParentsOf) -> bytes:
    """The body of a delivery that carries its parents (see the module)."""
    body = {"payload": orjson.Fragment(payload_json), "parents": parents_json(parents.parents)}
    return orjson.dumps(body)
