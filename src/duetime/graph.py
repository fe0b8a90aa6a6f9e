"""The rules of a workflow's graph, pure: which node orders are legal, and what a workflow's
status is.

A workflow is a DAG of nodes, each named by a ``ref`` local to the workflow; an edge is a ref
in a node's ``depends_on``. :func:`order` checks the graph and gives an order in which every
node comes after its parents (a cycle, a ref used twice, or a dependency on a ref that is no
node is a :class:`~duetime.errors.ValidationError` naming the node by its field path,
``nodes.<i>.depends_on``). :func:`workflow_status` folds the nodes' statuses into the
workflow's.
"""

from __future__ import annotations

import graphlib
from collections.abc import Iterable, Sequence

from duetime.errors import ValidationError
from duetime.types import TaskStatus

RUNNING = "running"
SUCCEEDED = "succeeded"
FAILED = "failed"
CANCELLED = "cancelled"
WORKFLOW_STATUSES = (RUNNING, SUCCEEDED, FAILED, CANCELLED)
"""A workflow is ``running`` while a node has not ended; then ``failed`` when a node failed,
else ``cancelled`` when one was cancelled, else ``succeeded``."""


def order(refs: Sequence[str], parents: Sequence[Sequence[str]]) -> list[int]:
    """The indexes of the nodes in an order where each comes after its parents (input order
    among those free to go), for nodes ``refs[i]`` whose parents are the refs ``parents[i]``.

    Raises ``ValidationError`` naming the first node at fault: ``nodes.<i>.ref`` for a ref used
    twice, ``nodes.<i>.depends_on`` for a parent that is no node, for a node that depends on
    itself, and for the first node of a cycle (the detail spells the cycle, ``a → b → a``)."""
    index: dict[str, int] = {}
    for i, ref in enumerate(refs):
        if ref in index:
            raise ValidationError(
                f"ref {ref!r} is used by nodes {index[ref]} and {i}; refs name one node each",
                field=f"nodes.{i}.ref",
            )
        index[ref] = i
    for i, mine in enumerate(parents):
        for parent in mine:
            if parent == refs[i]:
                raise ValidationError(
                    f"node {refs[i]!r} depends on itself", field=f"nodes.{i}.depends_on"
                )
            if parent not in index:
                raise ValidationError(
                    f"node {refs[i]!r} depends on {parent!r}, which is no node of this workflow",
                    field=f"nodes.{i}.depends_on",
                )
    sorter: graphlib.TopologicalSorter[int] = graphlib.TopologicalSorter()
    for i, mine in enumerate(parents):
        sorter.add(i, *(index[p] for p in mine))
    try:
        sorter.prepare()
    except graphlib.CycleError as exc:
        cycle: list[int] = list(exc.args[1])
        first = min(cycle)
        path = " → ".join(refs[i] for i in cycle)
        raise ValidationError(
            f"node {refs[first]!r} is in a cycle: {path}", field=f"nodes.{first}.depends_on"
        ) from None
    out: list[int] = []
    while sorter.is_active():
        ready = sorted(sorter.get_ready())
        out.extend(ready)
        sorter.done(*ready)
    return out


def depths(refs: Sequence[str], parents: Sequence[Sequence[str]]) -> list[int]:
    """Each node's depth: 0 for a node without parents, else one more than its deepest parent
    (the dashboard draws a workflow in these layers). The graph must be valid (:func:`order`)."""
    index = {ref: i for i, ref in enumerate(refs)}
    depth = [0] * len(refs)
    for i in order(refs, parents):
        depth[i] = max((depth[index[p]] + 1 for p in parents[i]), default=0)
    return depth


def workflow_status(statuses: Iterable[TaskStatus]) -> str:
    """The workflow's status from its nodes' (see :data:`WORKFLOW_STATUSES`)."""
    failed = cancelled = False
    for status in statuses:
        if not status.terminal:
            return RUNNING
        failed = failed or status is TaskStatus.FAILED
        cancelled = cancelled or status is TaskStatus.CANCELLED
    if failed:
        return FAILED
    return CANCELLED if cancelled else SUCCEEDED
