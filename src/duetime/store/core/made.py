"""The rows of tasks the store makes in a plan (``graph_task_insert``): a graph create's, a
callback's, a notification's; and the ``task_follow`` row of a task that has one."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from duetime.store.core import hot
from duetime.store.core.dependencies import DEPENDENCY_FAILED
from duetime.store.core.plan import Json
from duetime.types import NewTask, RetryPolicy, TaskStatus


@functools.lru_cache(maxsize=256)
def _retry(policy: RetryPolicy) -> Json:
    return Json(policy.to_json())


def task_row(
    task_id: str,
    new: NewTask,
    status: TaskStatus,
    *,
    parents: Sequence[str] = (),
    pending: int = 0,
    has_dependents: bool = False,
) -> dict[str, Any]:
    """The parameters of ``graph_task_insert`` for ``new`` under ``task_id``, starting in
    ``status`` (``ready`` means due now; a ``failed`` or ``cancelled`` one ended for its
    parents)."""
    dead = status in (TaskStatus.FAILED, TaskStatus.CANCELLED)
    return {
        "id": task_id, "tenant_id": new.tenant_id, "name": new.name, "queue": new.queue,
        "status": status.value, "target_type": hot.target_type(new), "target": Json(new.target),
        "payload": new.payload_json, "idempotency_key": new.idempotency_key,
        "priority": new.priority, "retry": _retry(new.retry),
        "timeout_seconds": float(new.timeout_seconds), "depends_on": Json(list(parents)),
        "pending_parents": pending, "has_dependents": has_dependents,
        "concurrency_key": new.concurrency_key, "labels": Json(dict(new.labels)),
        "run_at": new.run_at, "last_error": DEPENDENCY_FAILED if dead else None,
        "traceparent": new.traceparent, "request_hash": new.request_hash,
        "payload_ref": new.payload_ref, "flow_key": new.flow_key,
    }  # fmt: skip


def follow_row(task_id: str, new: NewTask) -> dict[str, Any]:
    """The parameters of ``follow_insert`` for a task with a :class:`~duetime.types.Follow`."""
    f = new.follow
    assert f is not None
    callbacks = {str(kind): cb.to_json() for kind, cb in f.callbacks.items()}
    return {
        "task_id": task_id, "tenant_id": new.tenant_id,
        "on_parent_failure": f.on_parent_failure.value, "parents_in_body": f.parents_in_body,
        "callbacks": Json(callbacks) if callbacks else None, "workflow_id": f.workflow_id,
        "ref": f.ref, "spawned_by": f.spawned_by,
    }  # fmt: skip
