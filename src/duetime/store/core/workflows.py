"""Workflows as the API reads and changes them (create, read, list, cancel, replay), once for
both backends. A workflow's nodes are tasks (``task_follow.workflow_id``); its status is
folded from theirs on every read (:func:`duetime.graph.workflow_status`): nothing on the hot
path writes it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from duetime.errors import NotFound
from duetime.ids import is_uuid
from duetime.store.core import rows
from duetime.store.core.follow import settle
from duetime.store.core.graph import GraphMade, graph_create
from duetime.store.core.plan import Decode, Plan, Row, Wake, all_, execute, one, wake_for
from duetime.store.core.runner import Runs
from duetime.types import (
    NewTask,
    NewWorkflow,
    Task,
    Workflow,
    WorkflowNode,
    WorkflowView,
)


def _listed(r: Row, d: type[Decode]) -> tuple[Workflow, dict[str, int]]:
    counts: Any = r["counts"]
    found = orjson.loads(counts) if isinstance(counts, str | bytes) else counts
    return rows.workflow(r, d), {str(k): int(v) for k, v in (found or {}).items()}


def _node(r: Row, d: type[Decode]) -> tuple[Task, str]:
    return rows.task(r, d), r["ref"]


def view(workflow: Workflow, nodes: Sequence[tuple[Task, str]]) -> WorkflowView:
    """A workflow with its nodes, each node's parents named by their refs."""
    refs = {task.id: ref for task, ref in nodes}
    return WorkflowView(
        workflow,
        tuple(
            WorkflowNode(ref, task, tuple(refs.get(p, p) for p in task.depends_on))
            for task, ref in nodes
        ),
    )


def workflow_get(tenant_id: str, workflow_id: str) -> Plan[WorkflowView | None]:
    if not is_uuid(workflow_id):
        return None
    found: Workflow | None = yield one(
        "workflow_get", rows.workflow, id=workflow_id, tenant_id=tenant_id
    )
    if found is None:
        return None
    nodes: list[tuple[Task, str]] = yield all_("workflow_nodes", _node, id=workflow_id)
    return view(found, nodes)


def _get_or_404(tenant_id: str, workflow_id: str) -> Plan[WorkflowView]:
    found = yield from workflow_get(tenant_id, workflow_id)
    if found is None:
        raise NotFound(f"no workflow {workflow_id!r}")
    return found


def workflow_create(
    new: NewWorkflow, ids: Sequence[str], tasks: Sequence[NewTask]
) -> Plan[tuple[WorkflowView, bool]]:
    """Create the workflow and its nodes (:func:`~duetime.store.core.graph.graph_create`),
    all or nothing; returns it and whether it was made (False: its idempotency key existed)."""
    made: GraphMade = yield from graph_create(ids, tasks, new)
    assert made.workflow is not None
    if not made.workflow_created:
        existing = yield from _get_or_404(new.tenant_id, made.workflow.id)
        return existing, False
    refs = [
        (new_task.follow.ref if new_task.follow and new_task.follow.ref else created.task.id)
        for new_task, created in zip(tasks, made.tasks, strict=True)
    ]
    return view(made.workflow, [(c.task, r) for c, r in zip(made.tasks, refs, strict=True)]), True


def workflow_list(
    tenant_id: str, limit: int, cursor: str | None
) -> Plan[list[tuple[Workflow, dict[str, int]]]]:
    """A page of the tenant's workflows, newest first, after ``cursor`` (a workflow id), each
    with its nodes' counts by status."""
    if cursor is not None and not is_uuid(cursor):
        return []
    found: list[tuple[Workflow, dict[str, int]]] = yield all_(
        "workflow_list", _listed, tenant_id=tenant_id, cursor=cursor, limit=limit
    )
    return found


def _cancelled(r: Row, d: type[Decode]) -> tuple[str, str, bool]:
    return d.ident(r["id"]), r["status"], d.flag(r["has_dependents"])


def workflow_cancel(tenant_id: str, workflow_id: str) -> Plan[WorkflowView]:
    """Cancel every node not ended: waiting ones at once, running ones with their attempts
    (``cancel_requested``). Callbacks of the nodes cancelled are made; ended nodes stay."""
    yield from _get_or_404(tenant_id, workflow_id)
    gone: list[tuple[str, str, bool]] = yield all_(
        "workflow_cancel_waiting", _cancelled, id=workflow_id
    )
    yield execute("workflow_cancel_running", id=workflow_id)
    followed = [(task_id, status) for task_id, status, has in gone if has]
    if followed:
        yield from settle(followed)
    if gone:
        yield Wake(ended=tuple(task_id for task_id, _, _ in gone))
    return (yield from _get_or_404(tenant_id, workflow_id))


def _moved(r: Row, d: type[Decode]) -> tuple[str, str]:
    return d.ident(r["id"]), r["status"]


def workflow_replay(tenant_id: str, workflow_id: str) -> Plan[WorkflowView]:
    """Replay the failed and cancelled nodes: each starts a new attempt series, ``ready`` when
    every parent succeeded, else ``blocked`` until they have (a replayed parent runs first)."""
    yield from _get_or_404(tenant_id, workflow_id)
    yield all_("workflow_lock_nodes", lambda r, d: d.ident(r["id"]), id=workflow_id)
    moved: list[tuple[str, str]] = yield all_("workflow_replay", _moved, id=workflow_id)
    yield wake_for(status for _, status in moved)
    return (yield from _get_or_404(tenant_id, workflow_id))


class WorkflowMethods(Runs):
    """The workflow methods of :class:`~duetime.store.protocols.WorkflowStore`."""

    async def workflow_create(
        self, new: NewWorkflow, ids: Sequence[str], tasks: Sequence[NewTask]
    ) -> tuple[WorkflowView, bool]:
        return await self._run(workflow_create(new, ids, tasks), write=True)

    async def workflow_get(self, tenant_id: str, workflow_id: str) -> WorkflowView | None:
        return await self._run(workflow_get(tenant_id, workflow_id), snapshot=True)

    async def workflow_list(
        self, tenant_id: str, limit: int = 100, cursor: str | None = None
    ) -> list[tuple[Workflow, dict[str, int]]]:
        return await self._run(workflow_list(tenant_id, limit, cursor))

    async def workflow_cancel(self, tenant_id: str, workflow_id: str) -> WorkflowView:
        return await self._run(workflow_cancel(tenant_id, workflow_id), write=True)

    async def workflow_replay(self, tenant_id: str, workflow_id: str) -> WorkflowView:
        return await self._run(workflow_replay(tenant_id, workflow_id), write=True)
