"""Creating tasks that know each other: a workflow's DAG, a handler's spawned children, and any
task with something to follow its end (callbacks, a parent-failure policy), once for both
backends — one plan, one transaction.

The caller names every new task's id beforehand, so a task may depend on another of the same
call (``NewTask.depends_on`` holds ids: of this call's tasks or of existing ones). A task's
starting status is the hot path's rule (:func:`duetime.store.core.hot.starting_status`) with
its ``on_parent_failure`` applied (:func:`starting`), decided in an order where parents come
first. What the hot path's create does besides is done here too: idempotency keys (a repeat is
the existing task; its dependents of this call depend on it), locked existing parents (their end
then waits for our ``task_deps`` rows, or we read it), ``has_dependents`` on every parent of a
blocked task and on every task with callbacks (its end then runs :func:`~duetime.store.core.
follow.settle`).

The same insert statement (``graph_task_insert``) makes the tasks the store makes itself:
callbacks, notifications.
"""

from __future__ import annotations

import dataclasses
import graphlib
from collections.abc import Sequence
from datetime import datetime

from duetime.errors import Conflict, ValidationError
from duetime.ids import is_uuid
from duetime.store.core import hot, rows
from duetime.store.core.dependencies import DEPENDENCY_FAILED
from duetime.store.core.follow import make_callbacks
from duetime.store.core.made import follow_row, task_row
from duetime.store.core.plan import (
    NOW,
    Decode,
    Json,
    Plan,
    Row,
    UniqueViolation,
    Wake,
    all_,
    batch,
    execute,
    one,
    wake_for,
)
from duetime.store.core.runner import Runs
from duetime.types import (
    NewTask,
    NewWorkflow,
    ParentFailure,
    Task,
    TaskCreated,
    TaskStatus,
    Workflow,
)

_DEAD = ("failed", "cancelled")


def starting(
    parents: Sequence[str],
    run_at: datetime | None,
    now: datetime,
    policy: ParentFailure = ParentFailure.FAIL,
) -> tuple[TaskStatus, int]:
    """A new task's status and its count of parents still to wait for, from its distinct
    parents' statuses: :func:`~duetime.store.core.hot.starting_status`, where a parent that
    failed or was cancelled fails the task (``fail``), counts as ended (``run``), or cancels it
    (``cancel``)."""
    dead = any(status in _DEAD for status in parents)
    if dead and policy is ParentFailure.RUN:
        parents = [status for status in parents if status not in _DEAD]
    status, pending = hot.starting_status(parents, run_at, now)
    if status is TaskStatus.FAILED and policy is ParentFailure.CANCEL:
        return TaskStatus.CANCELLED, pending
    return status, pending


def _id(r: Row, d: type[Decode]) -> str:
    return d.ident(r["id"])


def _parent(r: Row, d: type[Decode]) -> tuple[str, tuple[str, str, bool]]:
    return d.ident(r["id"]), (r["tenant_id"], r["status"], d.flag(r["has_dependents"]))


@dataclasses.dataclass(frozen=True, slots=True)
class GraphMade:
    """What a graph create made: each task in input order (``created`` False for an
    idempotent hit), and the workflow (``workflow_created`` False when its key existed: then
    no task was made and ``tasks`` is empty)."""

    tasks: list[TaskCreated]
    workflow: Workflow | None = None
    workflow_created: bool = True


def _in_order(ids: Sequence[str], tasks: Sequence[NewTask]) -> list[int]:
    """Indexes of ``tasks`` in an order where a parent of this call comes before its child
    (the caller checked there is no cycle; a workflow's ref graph already was)."""
    index = {task_id: i for i, task_id in enumerate(ids)}
    sorter: graphlib.TopologicalSorter[int] = graphlib.TopologicalSorter()
    for i, new in enumerate(tasks):
        sorter.add(i, *(index[p] for p in new.depends_on if p in index))
    return list(sorter.static_order())


def graph_create(
    ids: Sequence[str], tasks: Sequence[NewTask], workflow: NewWorkflow | None = None
) -> Plan[GraphMade]:
    """Create ``tasks`` under ``ids`` (see the module) and ``workflow`` if given, all or
    nothing. ``ValidationError`` names ``depends_on`` for a parent that is no task of the
    tenant; ``Conflict`` when an idempotency key of the call was taken meanwhile by another
    create (repeat the request: it then finds that task)."""
    if workflow is not None and workflow.idempotency_key is not None:
        known: Workflow | None = yield one(
            "workflow_by_key", rows.workflow, tenant_id=workflow.tenant_id,
            idempotency_key=workflow.idempotency_key,
        )  # fmt: skip
        if known is not None:
            return GraphMade([], known, workflow_created=False)
    hits: dict[str, Task] = {}  # by the id this call gave the task
    keyed = {new.idempotency_key: i for i, new in enumerate(tasks) if new.idempotency_key}
    if keyed:
        found: list[Task] = yield all_(
            "graph_tasks_by_key", rows.task, tenant_id=tasks[0].tenant_id, keys=sorted(keyed)
        )
        for task in found:
            i = keyed.get(task.idempotency_key or "")
            if i is not None and task.tenant_id == tasks[i].tenant_id:
                hits[ids[i]] = task
    swap = {given: task.id for given, task in hits.items()}
    fresh = [i for i, task_id in enumerate(ids) if task_id not in hits]
    mine = {ids[i] for i in fresh}
    outside = sorted({swap.get(p, p) for i in fresh for p in tasks[i].depends_on} - mine)
    for parent in outside:
        if not is_uuid(parent):
            raise hot.unknown_parent(parent)
    existing: dict[str, tuple[str, str, bool]] = {}
    if outside:
        locked: list[tuple[str, tuple[str, str, bool]]] = yield all_(
            "graph_parents_lock", _parent, ids=outside
        )
        existing = dict(locked)
    now: datetime = yield NOW
    status_of: dict[str, TaskStatus] = {}
    starts: dict[int, tuple[TaskStatus, int, tuple[str, ...]]] = {}
    waited: set[str] = set()  # parents of blocked tasks
    fresh_tasks = [tasks[i] for i in fresh]
    for j in _in_order([ids[i] for i in fresh], fresh_tasks):
        i = fresh[j]
        new = tasks[i]
        parents = tuple(dict.fromkeys(swap.get(p, p) for p in new.depends_on))
        statuses: list[str] = []
        for parent in parents:
            if parent in status_of:
                statuses.append(status_of[parent].value)
                continue
            tenant, status, _ = existing.get(parent, ("", "", False))
            if tenant != new.tenant_id:
                raise hot.unknown_parent(parent)
            statuses.append(status)
        policy = new.follow.on_parent_failure if new.follow else ParentFailure.FAIL
        status, pending = starting(statuses, new.run_at, now, policy)
        status_of[ids[i]] = status
        starts[i] = (status, pending, parents)
        if status is TaskStatus.BLOCKED:
            waited.update(parents)
    made_rows = []
    for i in fresh:
        status, pending, parents = starts[i]
        new = tasks[i]
        callbacks = bool(new.follow and new.follow.callbacks)
        followed = ids[i] in waited or callbacks
        made_rows.append(
            task_row(ids[i], new, status, parents=parents, pending=pending, has_dependents=followed)
        )
    inserted: list[str] = yield batch("graph_task_insert", made_rows, _id)
    if len(inserted) != len(made_rows):
        raise Conflict(
            "an idempotency key of these tasks was used by another create meanwhile; repeat the "
            "request to get the tasks it made"
        )
    edges = [
        {"parent_id": parent, "child_id": ids[i]}
        for i in fresh
        if starts[i][0] is TaskStatus.BLOCKED
        for parent in starts[i][2]
    ]
    if edges:
        yield batch("graph_deps_insert", edges)
    marked = sorted(p for p in waited if p in existing and not existing[p][2])
    if marked:
        yield execute("graph_parents_mark", ids=marked)
    follows = [follow_row(ids[i], tasks[i]) for i in fresh if tasks[i].follow is not None]
    if follows:
        yield batch("follow_insert", follows)
    made_workflow: Workflow | None = None
    if workflow is not None:
        try:
            made_workflow = yield one(
                "workflow_insert", rows.workflow, id=workflow.id, tenant_id=workflow.tenant_id,
                name=workflow.name, labels=Json(dict(workflow.labels)), node_count=len(ids),
                idempotency_key=workflow.idempotency_key, request_hash=workflow.request_hash,
            )  # fmt: skip
        except UniqueViolation:
            raise Conflict(
                f"idempotency_key {workflow.idempotency_key!r} was used by another workflow "
                "create meanwhile; repeat the request to get that workflow"
            ) from None
    yield wake_for(status.value for status, _, _ in starts.values())
    results: list[TaskCreated] = []
    for i, task_id in enumerate(ids):
        if task_id in hits:
            results.append(TaskCreated(hits[task_id], created=False))
            continue
        status, _, parents = starts[i]
        run_at = tasks[i].run_at
        when = now if run_at is None else run_at
        task = hot.created_task(tasks[i], task_id, status, parents, when, now)
        if status is TaskStatus.CANCELLED:
            task = dataclasses.replace(task, finished_at=now, last_error=DEPENDENCY_FAILED)
        results.append(TaskCreated(task, created=True))
    dead = [r.task.id for r in results if r.created and r.task.status.terminal]
    if dead:  # ended at birth, for a parent's failure: their callbacks are owed too
        yield from make_callbacks(dead)
        yield Wake(ended=tuple(dead))
    return GraphMade(results, made_workflow)


def check_ids(ids: Sequence[str], tasks: Sequence[NewTask]) -> None:
    """The caller's side of :func:`graph_create`: one id per task, all distinct, one tenant."""
    if len(ids) != len(tasks) or len(set(ids)) != len(ids):
        raise ValueError("graph_create needs one distinct id per task")
    if len({t.tenant_id for t in tasks}) > 1:
        raise ValidationError("a graph's tasks belong to one tenant")


class GraphMethods(Runs):
    """``task_create_graph`` of :class:`~duetime.store.protocols.FollowStore`."""

    async def task_create_graph(
        self, ids: Sequence[str], tasks: Sequence[NewTask]
    ) -> list[TaskCreated]:
        if not tasks:
            return []
        check_ids(ids, tasks)
        made: GraphMade = await self._run(graph_create(ids, tasks), write=True)
        return made.tasks
