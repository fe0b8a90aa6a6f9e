"""The rules of a workflow's graph (order, cycles, dangling refs, depths, status), the SDK's
chain / group / chord, and the dashboard's drawing of a wide fan-out."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from duetime.api.ui import graph_svg
from duetime.errors import ValidationError
from duetime.graph import depths, order, workflow_status
from duetime.sdk.workflows import chain, chord, group, step
from duetime.types import RetryPolicy, Task, TaskStatus, WorkflowNode

S = TaskStatus


def test_order_puts_parents_first_and_keeps_input_order_among_free_nodes() -> None:
    refs = ["load", "extract", "clean", "stats"]
    parents = [["clean", "stats"], [], ["extract"], ["extract"]]
    assert order(refs, parents) == [1, 2, 3, 0]
    assert depths(refs, parents) == [2, 0, 1, 1]


@pytest.mark.parametrize(
    ("parents", "field", "words"),
    [
        ([[], ["c"], ["b"]], "nodes.1.depends_on", "b → c → b"),
        ([[], ["zz"], []], "nodes.1.depends_on", "'zz', which is no node"),
        ([["a"], [], []], "nodes.0.depends_on", "depends on itself"),
    ],
)
def test_a_bad_graph_names_the_node_at_fault(
    parents: list[list[str]], field: str, words: str
) -> None:
    with pytest.raises(ValidationError) as bad:
        order(["a", "b", "c"], parents)
    assert bad.value.field == field and words in bad.value.detail


def test_a_ref_used_twice_names_the_second_node() -> None:
    with pytest.raises(ValidationError) as bad:
        order(["a", "b", "a"], [[], [], []])
    assert bad.value.field == "nodes.2.ref"


@pytest.mark.parametrize(
    ("statuses", "expected"),
    [
        ([S.SUCCEEDED, S.RUNNING], "running"),
        ([S.SUCCEEDED, S.SUCCEEDED], "succeeded"),
        ([S.SUCCEEDED, S.CANCELLED], "cancelled"),
        ([S.FAILED, S.CANCELLED, S.SUCCEEDED], "failed"),
        ([S.BLOCKED, S.FAILED], "running"),
    ],
)
def test_a_workflows_status_folds_its_nodes(statuses: list[TaskStatus], expected: str) -> None:
    assert workflow_status(statuses) == expected


def test_chain_group_and_chord_connect_tails_to_heads() -> None:
    flow = chain(
        step("a"),
        group(step("b"), chain(step("c"), step("d"))),
        chord([step("e"), step("f")], step("g")),
    )
    edges = {n["ref"]: sorted(n.get("depends_on", [])) for n in flow.nodes}
    assert edges == {
        "a": [],
        "b": ["a"],
        "c": ["a"],
        "d": ["c"],
        "e": ["b", "d"],
        "f": ["b", "d"],
        "g": ["e", "f"],
    }
    assert flow.heads == ("a",) and flow.tails == ("g",)
    assert chain({"ref": "x", "name": "job"}, step("y")).nodes[1]["depends_on"] == ["x"]


def _node(ref: str, parents: tuple[str, ...], status: TaskStatus) -> WorkflowNode:
    at = datetime(2030, 1, 1, tzinfo=UTC)
    task = Task(
        id=f"id-{ref}", tenant_id="t", name=ref, queue="q", status=status, version=1,
        target={"type": "worker"}, payload_json="null", idempotency_key=None, priority=0,
        retry=RetryPolicy(), timeout_seconds=30.0, depends_on=(), concurrency_key=None,
        labels={}, attempts=0, series_start=0, schedule_id=None, scheduled_for=None,
        run_at=at, due_at=at, created_at=at, updated_at=at,
    )  # fmt: skip
    return WorkflowNode(ref, task, parents)


def test_a_wide_layer_is_drawn_as_its_first_nodes_and_one_box_for_the_rest() -> None:
    wide = 100
    nodes = [_node("root", (), S.SUCCEEDED)]
    nodes += [_node(f"p{i}", ("root",), S.FAILED if i == 60 else S.READY) for i in range(wide)]
    nodes.append(_node("sink", tuple(f"p{i}" for i in range(wide)), S.BLOCKED))
    drawing = graph_svg.draw(nodes)
    boxes = {b.label: b for b in drawing.boxes}
    rest = boxes[f"+{wide - graph_svg.MAX_PER_LAYER} more"]
    assert rest.task_id is None and rest.css == "st-failed"  # the worst status of those it holds
    assert len(drawing.boxes) == 1 + graph_svg.MAX_PER_LAYER + 1 + 1
    # One edge per drawn pair: the rest's many edges to the sink are one line.
    assert len(drawing.edges) == 2 * (graph_svg.MAX_PER_LAYER + 1)
    assert {e.css for e in drawing.edges} == {"done", "wait"}
