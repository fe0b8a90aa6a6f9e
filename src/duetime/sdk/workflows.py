"""Workflows from the SDK (SPEC §3 "Workflows"): a DAG of tasks in one call, built by hand or
with Celery-style ``chain`` / ``group`` / ``chord``, then waited for as a whole.

::

    from duetime.sdk.workflows import chain, chord, group, step

    flow = chain(
        step("extract", name="extract", payload={"day": "2026-01-01"}),
        group(*(step(f"part-{i}", name="transform", payload=i) for i in range(100))),
        step("load", name="load"),
    )                          # extract → part-0..part-99 (in parallel) → load
    run = await client.create_workflow(flow, defaults={"target": worker_target()})
    results = await run.result(timeout=600)      # {"extract": ..., "part-0": ..., "load": ...}

A step is one node: a ref (its name in the workflow) and any task field. ``chain(a, b, c)``
runs each part after the one before it ends (every node the next part starts with depends on
every node the previous part ends with); ``group(a, b)`` runs its parts side by side;
``chord(header, body)`` is ``chain(group(*header), body)``: ``body`` runs once every node of
``header`` has ended, and its handler reads their results in ``job.parents``.
:meth:`WorkflowRun.result` returns every node's result by ref once every node succeeded, and
raises :class:`WorkflowFailed` when one failed or was cancelled.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Coroutine, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Unpack

from pydantic import BaseModel

from duetime import errors
from duetime.sdk._http import _Api, _decoded, _segment
from duetime.sdk.models import Page, Parent, Task, TaskFields, _Response
from duetime.sdk.runs import MAX_WAIT_SECONDS

__all__ = [
    "Flow",
    "Parents",
    "SyncWorkflowRun",
    "Workflow",
    "WorkflowCalls",
    "WorkflowFailed",
    "WorkflowNode",
    "WorkflowRun",
    "chain",
    "chord",
    "group",
    "step",
]


class WorkflowNode(_Response):
    """A node of a workflow: its ``ref``, its task's id and status, the refs it depends on,
    its result (or ``result_ref`` for one over 64 KiB) or last error."""

    ref: str
    task_id: str
    name: str | None = None
    queue: str = "default"
    status: str
    depends_on: tuple[str, ...] = ()
    attempts: int = 0
    result: Any = None
    result_ref: str | None = None
    last_error: str | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None


class Workflow(_Response):
    """A workflow: ``status`` is ``running`` until every node ended, then ``failed`` (a node
    failed), ``cancelled`` (one was cancelled) or ``succeeded``. ``nodes`` is empty in lists."""

    id: str
    name: str | None = None
    status: str
    labels: dict[str, str] = {}
    created_at: datetime
    finished_at: datetime | None = None
    counts: dict[str, int] = {}
    nodes: tuple[WorkflowNode, ...] = ()

    @property
    def ended(self) -> bool:
        return self.status != "running"

    def node(self, ref: str) -> WorkflowNode:
        """The node named ``ref`` (``KeyError`` if none)."""
        for found in self.nodes:
            if found.ref == ref:
                return found
        raise KeyError(ref)


class _Children(_Response):
    items: tuple[Task, ...]
    ended: bool = False


class _Parents(_Response):
    items: tuple[Parent, ...]


class WorkflowFailed(errors.DuetimeError):
    """A workflow ended without every node succeeding; ``workflow`` shows which did not."""

    def __init__(self, workflow: Workflow) -> None:
        self.workflow = workflow
        bad = [n.ref for n in workflow.nodes if n.status in ("failed", "cancelled")]
        super().__init__(f"workflow {workflow.id} {workflow.status}: {', '.join(bad[:10])}")


# -- building a graph ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Flow:
    """Nodes with their edges, and the refs a flow starts and ends with (what ``chain``
    connects)."""

    nodes: tuple[dict[str, Any], ...]
    heads: tuple[str, ...]
    tails: tuple[str, ...]


def _sent(fields: Mapping[str, Any]) -> dict[str, Any]:
    """Task fields as they are sent: a model (``RetrySpec``, ``CallbackSpec``) as its JSON
    fields, a ``None`` left out (the server's default), as the client's task creates do."""
    return {
        key: value.model_dump(mode="json", exclude_none=True)
        if isinstance(value, BaseModel)
        else value
        for key, value in fields.items()
        if value is not None
    }


def step(ref: str, *, depends_on: Sequence[str] = (), **fields: Unpack[TaskFields]) -> Flow:
    """One node named ``ref``, with any task field (``target``, ``name``, ``payload``...) and
    the refs it depends on besides those a ``chain`` gives it."""
    node = {"ref": ref, **_sent(fields)}
    if depends_on:
        node["depends_on"] = list(depends_on)
    return Flow((node,), (ref,), (ref,))


def _flows(parts: Iterable[Flow | Mapping[str, Any]]) -> list[Flow]:
    found = []
    for part in parts:
        if isinstance(part, Flow):
            found.append(part)
        else:
            fields = dict(part)
            found.append(step(fields.pop("ref"), **fields))  # a node given as a mapping
    return found


def chain(*parts: Flow | Mapping[str, Any]) -> Flow:
    """Each part after the previous one (see the module)."""
    flows = _flows(parts)
    if not flows:
        raise ValueError("chain() needs at least one part")
    nodes: list[dict[str, Any]] = list(flows[0].nodes)
    for before, after in itertools.pairwise(flows):
        for node in after.nodes:
            if node["ref"] in after.heads:
                node = {**node, "depends_on": [*node.get("depends_on", ()), *before.tails]}
            nodes.append(node)
    return Flow(tuple(nodes), flows[0].heads, flows[-1].tails)


def group(*parts: Flow | Mapping[str, Any]) -> Flow:
    """The parts side by side."""
    flows = _flows(parts)
    if not flows:
        raise ValueError("group() needs at least one part")
    return Flow(
        tuple(n for f in flows for n in f.nodes),
        tuple(h for f in flows for h in f.heads),
        tuple(t for f in flows for t in f.tails),
    )


def chord(header: Iterable[Flow | Mapping[str, Any]], body: Flow | Mapping[str, Any]) -> Flow:
    """``body`` once every part of ``header`` has ended (``chain(group(*header), body)``)."""
    return chain(group(*header), body)


def _nodes(flow: Flow | Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return list(flow.nodes) if isinstance(flow, Flow) else [dict(n) for n in flow]


def workflow_body(
    flow: Flow | Sequence[Mapping[str, Any]],
    *,
    name: str | None = None,
    defaults: TaskFields | None = None,
    labels: Mapping[str, str] | None = None,
    idempotency_key: str | None = None,
) -> dict[str, Any]:
    """The body of ``POST /v1/workflows`` (and of the SQL API's ``create_workflow_v1``) for
    ``flow``; ``None`` and empty arguments are left out (the server's defaults)."""
    body: dict[str, Any] = {"nodes": _nodes(flow)}
    for key, value in (("name", name), ("idempotency_key", idempotency_key)):
        if value is not None:
            body[key] = value
    if defaults:
        body["defaults"] = _sent(defaults)
    if labels:
        body["labels"] = dict(labels)
    return body


# -- calls --------------------------------------------------------------------------------------


class WorkflowCalls(_Api):
    """``/v1/workflows``, a task's parents and children, spawning under a lease."""

    async def create_workflow(
        self,
        flow: Flow | Sequence[Mapping[str, Any]],
        *,
        name: str | None = None,
        defaults: TaskFields | None = None,
        labels: Mapping[str, str] | None = None,
        idempotency_key: str | None = None,
    ) -> WorkflowRun:
        """Create the workflow (every node or none) and return a handle on it. ``flow`` is a
        :class:`Flow` or node objects (``{"ref": ..., "depends_on": [refs], <task fields>}``);
        ``defaults`` are fields every node gets unless it sets them. Raises
        ``ApiValidationError`` naming the node (``nodes.3.depends_on`` for a cycle or a
        dangling ref)."""
        body = workflow_body(
            flow, name=name, defaults=defaults, labels=labels, idempotency_key=idempotency_key
        )
        made = Workflow.model_validate(await self._request("POST", "/v1/workflows", body=body))
        return WorkflowRun(self, made.id, made)

    async def get_workflow(self, workflow_id: str, *, wait: float | None = None) -> Workflow:
        """The workflow and every node; with ``wait`` (≤ 60 s), once it ended or the wait ran
        out. Raises ``ApiNotFound``."""
        response = await self._send(
            "GET",
            f"/v1/workflows/{_segment(workflow_id)}",
            params=[("wait", round(wait, 3))] if wait else None,
            extra_read_seconds=wait or 0.0,
        )
        return Workflow.model_validate_json(response.content)

    async def wait_workflow(self, workflow_id: str, timeout: float | None = None) -> Workflow:
        """The workflow once every node ended, or as it is after ``timeout`` (None: no limit)."""
        until = math.inf if timeout is None else time.monotonic() + max(0.0, timeout)
        while True:
            left = max(0.0, min(MAX_WAIT_SECONDS, until - time.monotonic()))
            found = await self.get_workflow(workflow_id, wait=left or None)
            if found.ended or time.monotonic() >= until:
                return found

    async def list_workflows(
        self, *, limit: int = 100, cursor: str | None = None
    ) -> Page[Workflow]:
        """A page of workflows, newest first (nodes left out: their counts by status)."""
        params: list[tuple[str, str | int | float | bool | None]] = [("limit", limit)]
        if cursor is not None:
            params.append(("cursor", cursor))
        return Page[Workflow].model_validate(
            await self._request("GET", "/v1/workflows", params=params)
        )

    async def cancel_workflow(self, workflow_id: str) -> Workflow:
        """Cancel every node not ended. Raises ``ApiNotFound``."""
        path = f"/v1/workflows/{_segment(workflow_id)}/cancel"
        return Workflow.model_validate(await self._request("POST", path))

    async def replay_workflow(self, workflow_id: str) -> Workflow:
        """Replay the failed and cancelled nodes. Raises ``ApiNotFound``."""
        path = f"/v1/workflows/{_segment(workflow_id)}/replay"
        return Workflow.model_validate(await self._request("POST", path))

    def workflow_run(self, workflow_id: str) -> WorkflowRun:
        """A handle on the workflow ``workflow_id`` (no call is made)."""
        return WorkflowRun(self, workflow_id)

    async def task_parents(self, task_id: str) -> tuple[Parent, ...]:
        """The parents of a task, in ``depends_on`` order, each with its result or error."""
        path = f"/v1/tasks/{_segment(task_id)}/parents"
        return _Parents.model_validate(await self._request("GET", path)).items

    async def task_children(
        self, task_id: str, *, wait: float | None = None
    ) -> tuple[tuple[Task, ...], bool]:
        """The tasks a task's handler spawned, and whether all have ended; with ``wait`` (≤ 60
        s), once they all ended or the wait ran out."""
        response = await self._send(
            "GET",
            f"/v1/tasks/{_segment(task_id)}/children",
            params=[("wait", round(wait, 3))] if wait else None,
            extra_read_seconds=wait or 0.0,
        )
        found = _Children.model_validate_json(response.content)
        return found.items, found.ended

    async def spawn_children(
        self, lease_id: str, tasks: Sequence[Mapping[str, Any]], *, key: str = "0"
    ) -> tuple[Task, ...]:
        """Make children of the task held under ``lease_id`` (up to 10,000, all or nothing).
        The same ``key`` again gets the same children (never made twice). Raises
        ``ApiStaleLease`` when the lease is not current."""
        body = {"tasks": [dict(t) for t in tasks], "key": key}
        path = f"/v1/leases/{_segment(lease_id)}/children"
        return _Children.model_validate(await self._request("POST", path, body=body)).items

    async def read_result(self, result_ref: str) -> Any:
        """A result that travelled by reference (``result_ref``)."""
        if not result_ref.startswith("/v1/tasks/"):
            raise ValueError(f"not a result reference: {result_ref!r}")
        return _decoded(await self._send("GET", result_ref))


class WorkflowRun:
    """A handle on one workflow: wait for its end and its nodes' results."""

    def __init__(self, api: WorkflowCalls, workflow_id: str, workflow: Workflow | None = None):
        self._api = api
        self.id = workflow_id
        self.workflow = workflow

    def __repr__(self) -> str:
        return f"WorkflowRun({self.id!r})"

    async def wait(self, timeout: float | None = None) -> Workflow:
        """The workflow once every node ended, or as it is after ``timeout``."""
        self.workflow = await self._api.wait_workflow(self.id, timeout)
        return self.workflow

    async def result(self, timeout: float | None = None) -> dict[str, Any]:
        """Every node's result by ref once all succeeded (results over 64 KiB read by
        reference); :class:`WorkflowFailed` when one failed or was cancelled, ``TimeoutError``
        when ``timeout`` ran out first."""
        found = await self.wait(timeout)
        if not found.ended:
            raise TimeoutError(f"workflow {self.id} is still running")
        if found.status != "succeeded":
            raise WorkflowFailed(found)
        results: dict[str, Any] = {}
        for node in found.nodes:
            if node.result_ref is not None:
                results[node.ref] = await self._api.read_result(node.result_ref)
            else:
                results[node.ref] = node.result
        return results

    async def cancel(self) -> Workflow:
        self.workflow = await self._api.cancel_workflow(self.id)
        return self.workflow

    async def replay(self) -> Workflow:
        self.workflow = await self._api.replay_workflow(self.id)
        return self.workflow


class SyncWorkflowRun:
    """:class:`WorkflowRun` for the blocking :class:`~duetime.sdk.client.Client`."""

    def __init__(self, run: WorkflowRun, block: Callable[[Coroutine[Any, Any, Any]], Any]) -> None:
        self._run = run
        self._block = block
        self.id = run.id

    def __repr__(self) -> str:
        return f"SyncWorkflowRun({self.id!r})"

    @property
    def workflow(self) -> Workflow | None:
        return self._run.workflow

    def wait(self, timeout: float | None = None) -> Workflow:
        found: Workflow = self._block(self._run.wait(timeout))
        return found

    def result(self, timeout: float | None = None) -> dict[str, Any]:
        found: dict[str, Any] = self._block(self._run.result(timeout))
        return found

    def cancel(self) -> Workflow:
        found: Workflow = self._block(self._run.cancel())
        return found

    def replay(self) -> Workflow:
        found: Workflow = self._block(self._run.replay())
        return found


class Parents(Mapping[str, Parent]):
    """A task's parents as its handler sees them (``job.parents``): looked up by ref (in a
    workflow) or by task id, iterated in ``depends_on`` order. Results over 64 KiB travel by
    reference: :meth:`duetime.Job.parent_result` reads them."""

    def __init__(self, parents: Sequence[Parent]) -> None:
        self._list = tuple(parents)
        self._by: dict[str, Parent] = {}
        for p in self._list:
            self._by[p.id] = p
            if p.ref is not None:
                self._by.setdefault(p.ref, p)

    def __getitem__(self, key: str) -> Parent:
        return self._by[key]

    def __iter__(self) -> Iterator[str]:
        """The keys: each parent's ref, or its id outside a workflow."""
        return iter(p.ref or p.id for p in self._list)

    def __len__(self) -> int:
        return len(self._list)

    def __repr__(self) -> str:
        return f"Parents({[p.ref or p.id for p in self._list]})"

    @property
    def all(self) -> tuple[Parent, ...]:
        """Every parent, in ``depends_on`` order."""
        return self._list

    def results(self) -> dict[str, Any]:
        """Each parent's inline result by ref (or id); a result sent by reference is None here
        (read it with :meth:`duetime.Job.parent_result`)."""
        return {p.ref or p.id: p.result for p in self._list}
