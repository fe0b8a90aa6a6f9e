"""A workflow drawn as a graph, as pure geometry: nodes and their edges in, SVG boxes and lines
out (no I/O), drawn server-side like the overview's charts (no library, no script).

Nodes go in layers by depth (:func:`duetime.graph.depths`: a node one layer right of its
deepest parent), top to bottom in creation order within a layer. A layer of more than
:data:`MAX_PER_LAYER` nodes shows its first ones and one box standing for the rest, with their
counts by status (a fan-out of 1,000 stays a readable picture); edges to and from the nodes it
stands for meet that box.
"""

from __future__ import annotations

import collections
from collections.abc import Sequence
from dataclasses import dataclass

from duetime.graph import depths
from duetime.types import WorkflowNode

BOX_WIDTH = 150
BOX_HEIGHT = 34
GAP_X = 60
GAP_Y = 14
MARGIN = 10
MAX_PER_LAYER = 24
"""Nodes drawn per layer; the rest share one box."""


@dataclass(frozen=True, slots=True)
class Box:
    """One drawn node (``task_id`` None: the box standing for a layer's other nodes)."""

    x: int
    y: int
    label: str
    css: str
    title: str
    task_id: str | None


@dataclass(frozen=True, slots=True)
class Edge:
    x1: int
    y1: int
    x2: int
    y2: int
    css: str


@dataclass(frozen=True, slots=True)
class Drawing:
    boxes: tuple[Box, ...]
    edges: tuple[Edge, ...]
    width: int
    height: int
    box_width: int = BOX_WIDTH
    box_height: int = BOX_HEIGHT

    @property
    def view_box(self) -> str:
        return f"0 0 {self.width} {self.height}"


def _title(n: WorkflowNode) -> str:
    t = n.task
    detail = t.last_error if t.last_error else ("result ready" if t.result is not None else "")
    return f"{n.ref} · {t.status.value}" + (f" · {detail[:200]}" if detail else "")


def draw(nodes: Sequence[WorkflowNode]) -> Drawing:
    """The drawing of a workflow's ``nodes`` (see the module)."""
    refs = [n.ref for n in nodes]
    depth = depths(refs, [n.parents for n in nodes])
    layers: dict[int, list[int]] = collections.defaultdict(list)
    for i, d in enumerate(depth):
        layers[d].append(i)
    where: dict[int, tuple[int, int]] = {}  # node index -> (x, y) of the box drawing it
    boxes: list[Box] = []
    tallest = 0
    for d in sorted(layers):
        members = layers[d]
        x = MARGIN + d * (BOX_WIDTH + GAP_X)
        shown, rest = members[:MAX_PER_LAYER], members[MAX_PER_LAYER:]
        for row, i in enumerate(shown):
            y = MARGIN + row * (BOX_HEIGHT + GAP_Y)
            where[i] = (x, y)
            n = nodes[i]
            status = n.task.status.value
            boxes.append(Box(x, y, n.ref, f"st-{status}", _title(n), n.task.id))
        rows = len(shown)
        if rest:
            y = MARGIN + rows * (BOX_HEIGHT + GAP_Y)
            counts = collections.Counter(nodes[i].task.status.value for i in rest)
            worst = _worst(counts)
            summary = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
            boxes.append(
                Box(x, y, f"+{len(rest)} more", f"st-{worst}", f"{len(rest)} more: {summary}", None)
            )
            for i in rest:
                where[i] = (x, y)
            rows += 1
        tallest = max(tallest, rows)
    index = {ref: i for i, ref in enumerate(refs)}
    seen: set[tuple[int, int, int, int]] = set()
    edges: list[Edge] = []
    for i, n in enumerate(nodes):
        x2, y2 = where[i]
        for parent in n.parents:
            x1, y1 = where[index[parent]]
            key = (x1, y1, x2, y2)
            if key in seen:
                continue
            seen.add(key)
            css = "done" if nodes[index[parent]].task.status.terminal else "wait"
            edges.append(Edge(x1 + BOX_WIDTH, y1 + BOX_HEIGHT // 2, x2, y2 + BOX_HEIGHT // 2, css))
    width = MARGIN * 2 + (max(layers, default=0) + 1) * (BOX_WIDTH + GAP_X) - GAP_X
    height = MARGIN * 2 + max(tallest, 1) * (BOX_HEIGHT + GAP_Y) - GAP_Y
    return Drawing(tuple(boxes), tuple(edges), width, height)


_SEVERITY = ("failed", "cancelled", "retrying", "running", "ready", "scheduled", "blocked")


def _worst(counts: collections.Counter[str]) -> str:
    """The status a box standing for several nodes is coloured by: the most pressing one."""
    for status in _SEVERITY:
        if counts.get(status):
            return status
    return "succeeded"
