"""Workflows, their nodes and a task's parents as the API answers them (JSON-ready dicts; the
shapes of :mod:`duetime.api.workflow_schemas`), for the routes and the dashboard alike."""

from __future__ import annotations

import collections
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import orjson

from duetime.delivery.parents import INLINE_RESULT_BYTES, parents_json, result_ref
from duetime.graph import RUNNING, workflow_status
from duetime.types import ParentsOf, TaskStatus, Workflow, WorkflowNode, WorkflowView


def node(n: WorkflowNode) -> dict[str, Any]:
    """One node; a result over :data:`~duetime.delivery.parents.INLINE_RESULT_BYTES` is given
    by reference."""
    t = n.task
    item: dict[str, Any] = {
        "ref": n.ref,
        "task_id": t.id,
        "name": t.name,
        "queue": t.queue,
        "status": t.status.value,
        "depends_on": list(n.parents),
        "attempts": t.attempts,
        "result": None,
        "result_ref": None,
        "last_error": t.last_error,
        "started_at": t.started_at,
        "finished_at": t.finished_at,
    }
    if t.result is not None:
        encoded = orjson.dumps(t.result)
        if len(encoded) <= INLINE_RESULT_BYTES:
            item["result"] = orjson.Fragment(encoded)
        else:
            item["result_ref"] = result_ref(t.id)
    return item


def _summary(
    w: Workflow, status: str, counts: Mapping[str, int], finished: datetime | None
) -> dict[str, Any]:
    return {
        "id": w.id,
        "name": w.name,
        "status": status,
        "labels": dict(w.labels),
        "created_at": w.created_at,
        "finished_at": finished,
        "counts": dict(counts),
    }


def workflow(v: WorkflowView) -> dict[str, Any]:
    """A workflow with every node."""
    status = workflow_status(n.task.status for n in v.nodes)
    counts = collections.Counter(n.task.status.value for n in v.nodes)
    finished = None
    if status != RUNNING:
        ends = [n.task.finished_at for n in v.nodes if n.task.finished_at is not None]
        finished = max(ends, default=None)
    body = _summary(v.workflow, status, counts, finished)
    body["nodes"] = [node(n) for n in v.nodes]
    return body


def listed(w: Workflow, counts: Mapping[str, int]) -> dict[str, Any]:
    """A workflow in a list: its nodes' counts by status, no nodes (nor ``finished_at``)."""
    status = workflow_status(TaskStatus(s) for s in counts)
    return _summary(w, status, counts, None)


def parents(found: ParentsOf | None) -> list[dict[str, Any]]:
    """A task's parents (:func:`duetime.delivery.parents.parents_json`)."""
    return [] if found is None else parents_json(found.parents)
