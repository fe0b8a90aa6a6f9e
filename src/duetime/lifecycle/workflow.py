"""What a workflow create and a spawn mean (SPEC §3 "Workflows"): nodes become tasks that know
each other, made in one store transaction.

**A workflow** (:func:`create_workflow`): the graph is checked first (:func:`duetime.graph.
order`: a cycle, a ref used twice or a dependency on no node is a ``ValidationError`` naming the
node), every node becomes a task as a single create would make it (:class:`~duetime.lifecycle.
create.TaskBuilder`, under the tenant's quotas), its ``depends_on`` refs become its parents'
ids, and it carries the labels ``duetime.workflow`` (the workflow's id) and ``duetime.ref`` —
so the history of a workflow is its nodes' (``GET /v1/history?label=duetime.workflow:<id>``)
and its tasks list like any. The same ``idempotency_key`` again with the same request is the
existing workflow; with another request a ``Conflict`` — unless either was made through the SQL
API, whose fingerprint cannot be compared with the HTTP API's (then the existing workflow).

Nodes and children take their keys under their queues' keyed limits, as any create does
(:class:`~duetime.lifecycle.flow.FlowGate`, keys only: the graph create keeps no flow ledger, so no
uniqueness window, debounce or throttle applies to them).

**Children at run time** (:func:`spawn`): the task held under a current lease makes children,
fenced by that lease (a lease not current is ``StaleLease``). Each child's idempotency key is
``duetime.spawn/<parent id>/<call key>/<index>``, whatever the attempt: the handler run again
after its worker died, or a request retried, gets the children the first run made — a crash
never spawns them twice. Children carry the label ``duetime.parent`` and are listed by
``GET /v1/tasks/{id}/children``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from duetime.errors import Conflict, StaleLease
from duetime.graph import order
from duetime.ids import new_id, new_ids
from duetime.lifecycle.create import SQL_FINGERPRINT, Creator, TaskSpec
from duetime.store.protocols import (
    FollowStore,
    LeaseStore,
    QueueStore,
    StoreClock,
    WorkflowStore,
)
from duetime.types import Follow, NewTask, NewWorkflow, TaskCreated, WorkflowView

WORKFLOW_LABEL = "duetime.workflow"
REF_LABEL = "duetime.ref"
PARENT_LABEL = "duetime.parent"


class WorkflowNode(TaskSpec, Protocol):
    """A node as :func:`create_workflow` reads it: a task spec with a ``ref``, whose
    ``depends_on`` are refs (the API's ``WorkflowNodeIn``)."""

    @property
    def ref(self) -> str: ...


class CreateWorkflowStore(WorkflowStore, QueueStore, StoreClock, Protocol):
    """What a workflow create uses of the store."""


async def create_workflow(
    creator: Creator,
    store: CreateWorkflowStore,
    tenant_id: str,
    nodes: Sequence[WorkflowNode],
    *,
    name: str | None = None,
    labels: dict[str, str] | None = None,
    idempotency_key: str | None = None,
    fingerprint: str | None = None,
    workflow_id: str | None = None,
) -> tuple[WorkflowView, bool]:
    """Create the workflow (see the module); returns it and whether this call made it.
    ``workflow_id``: the id to give it (a request through the SQL API names it beforehand);
    a new one by default."""
    refs = [node.ref for node in nodes]
    order(refs, [node.depends_on for node in nodes])  # a cycle or a dangling ref: 422
    workflow = NewWorkflow(
        id=workflow_id or new_id(),
        tenant_id=tenant_id,
        name=name,
        labels=dict(labels or {}),
        idempotency_key=idempotency_key,
        request_hash=fingerprint if idempotency_key is not None else None,
    )
    ids = new_ids(len(nodes))
    id_of = dict(zip(refs, ids, strict=True))
    now = await store.now() if any(node.delay_seconds for node in nodes) else None
    tasks: list[NewTask] = []
    for i, node in enumerate(nodes):
        new = creator.builder.new_task(node, tenant_id, now, prefix=f"nodes.{i}.")
        follow = new.follow or Follow()
        tasks.append(
            dataclasses.replace(
                new,
                depends_on=tuple(id_of[p] for p in dict.fromkeys(node.depends_on)),
                labels={
                    **workflow.labels,
                    **new.labels,
                    WORKFLOW_LABEL: workflow.id,
                    REF_LABEL: node.ref,
                },
                follow=dataclasses.replace(follow, workflow_id=workflow.id, ref=node.ref),
            )
        )
    await creator.quotas.admit_tasks(tenant_id, len(tasks))
    made, created = await store.workflow_create(workflow, ids, await _keyed(creator, store, tasks))
    if not created and not _same_request(made.workflow.request_hash, workflow.request_hash):
        raise Conflict(
            f"idempotency_key {idempotency_key!r} was used for workflow {made.workflow.id} "
            "with a different request; repeat that request exactly, or use another key"
        )
    return made, created


def _same_request(made: str | None, asked: str | None) -> bool:
    """Whether a repeat of an idempotency key is the request that made the workflow: the same
    fingerprint, or one of them made through the SQL API, whose fingerprint hashes the request
    as SQL holds it (:data:`~duetime.lifecycle.create.SQL_FINGERPRINT`) and cannot be compared
    with the HTTP API's, so the repeat is answered with the workflow (as a task's is)."""
    if made == asked:
        return True
    return any(p is not None and p.startswith(SQL_FINGERPRINT) for p in (made, asked))


class SpawnStore(FollowStore, LeaseStore, QueueStore, StoreClock, Protocol):
    """What a spawn uses of the store."""


async def spawn(
    creator: Creator,
    store: SpawnStore,
    tenant_id: str,
    lease_id: str,
    children: Sequence[TaskSpec],
    key: str,
    *,
    at: datetime | None = None,
) -> list[TaskCreated]:
    """Make ``children`` of the task held under ``lease_id`` (see the module), all or nothing,
    in input order (``created`` False for children an earlier run of the same call made)."""
    held = (await store.task_leases_get([lease_id], tenant_id=tenant_id)).get(lease_id)
    if held is None:
        raise StaleLease(
            f"lease {lease_id} is not current: it expired, was reclaimed or ended, or is unknown"
        )
    parent = held.task
    now = at or (await store.now() if any(c.delay_seconds for c in children) else None)
    tasks: list[NewTask] = []
    for i, child in enumerate(children):
        new = creator.builder.new_task(child, tenant_id, now, prefix=f"tasks.{i}.")
        follow = new.follow or Follow()
        tasks.append(
            dataclasses.replace(
                new,
                idempotency_key=f"duetime.spawn/{parent.id}/{key}/{i}",
                labels={**new.labels, PARENT_LABEL: parent.id},
                follow=dataclasses.replace(follow, spawned_by=parent.id),
            )
        )
    await creator.quotas.admit_tasks(tenant_id, len(tasks))
    return await store.task_create_graph(new_ids(len(tasks)), await _keyed(creator, store, tasks))


async def _keyed(creator: Creator, store: QueueStore, tasks: list[NewTask]) -> list[NewTask]:
    """``tasks`` (of one tenant) with their keys under their queues' keyed limits, as any
    create takes them; no uniqueness, debounce or throttle applies to a graph's tasks."""
    if creator.flows is None or not tasks:
        return tasks
    return list(await creator.flows.apply(store, tasks[0].tenant_id, tasks, asks=False))
