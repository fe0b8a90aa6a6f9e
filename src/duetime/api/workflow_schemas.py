"""Request bodies and answer shapes of workflows, spawned children and waits (SPEC §3
"Workflows"; docs/api.md).

A workflow's body is read in two steps (:func:`nodes_of`): the envelope first
(:class:`WorkflowCreate`: name, idempotency key, labels, ``defaults``, the nodes as objects),
then each node merged over the shared ``defaults`` (the node's own fields win; ``labels`` are
merged, the node's winning a key) and validated as a :class:`WorkflowNodeIn` — a task create
with a ``ref`` and ``depends_on`` naming refs — so an error names the node's field
(``nodes.3.target.url``) whether the value came from the node or the defaults.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Annotated, Any

import orjson
import pydantic
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic_core import PydanticCustomError

from duetime.api.fields import JsonAny, rules
from duetime.api.schemas import (
    QUEUE_NAME,
    TASK_RULES,
    Key,
    Labels,
    Name,
    StrictModel,
    TaskCreate,
    TaskOut,
)

MAX_WORKFLOW_NODES = 5000
"""Nodes of one workflow (and parents of one node)."""
MAX_SPAWN = 10_000
"""Children one spawn call makes."""
Ref = Annotated[
    str,
    Field(
        pattern=f"^{QUEUE_NAME}$",
        description="A node's name in its workflow: 1-128 letters, digits, `.`, `_`, `:`, `-`.",
    ),
]


def _node_document(schema: dict[str, Any]) -> None:
    # Any field but ref may come from the workflow's defaults: only ref is required of a node
    # as sent (one without a target after the merge is refused, a rule of WorkflowCreate's).
    schema["required"] = ["ref"]
    schema.update(rules(*TASK_RULES, ("idempotency_key", "a node has no idempotency_key")))


class WorkflowNodeIn(TaskCreate):
    """One node: a task create with a ``ref`` (its name in the workflow) whose ``depends_on``
    names other nodes by their refs. A node has no ``idempotency_key``: the workflow's key
    covers all of them. A field the node leaves out takes the workflow's ``defaults``."""

    model_config = ConfigDict(json_schema_extra=_node_document)

    ref: Ref
    depends_on: Annotated[list[Ref], Field(max_length=MAX_WORKFLOW_NODES)] = Field(
        default_factory=list
    )

    @field_validator("idempotency_key")
    @classmethod
    def _no_key(cls, value: str | None) -> str | None:
        if value is not None:
            raise PydanticCustomError(
                "node_key", "a node has no idempotency_key: give the workflow one"
            )
        return value


_NODE_ONLY = frozenset({"ref", "depends_on", "idempotency_key"})
DEFAULT_FIELDS = frozenset(WorkflowNodeIn.model_fields) - _NODE_ONLY
"""The node fields ``defaults`` may set."""


def document_nodes(models: dict[str, Any]) -> None:
    """Say in the OpenAPI document's ``models`` (its component schemas, :class:`WorkflowNodeIn`
    among them) what a workflow's nodes are: read as objects, they are validated as nodes."""
    nodes = models["WorkflowCreate"]["properties"]["nodes"]
    nodes["items"] = {"$ref": "#/components/schemas/WorkflowNodeIn"}


def _workflow_document(schema: dict[str, Any]) -> None:
    schema.update(
        rules(
            ("defaults", "defaults cannot set"),
            ("nodes.target", "required"),  # neither the node nor the defaults give one
            ("nodes.ref", "ref "),  # used by two nodes
            ("nodes.depends_on", "node "),  # on itself, on no node, or in a cycle
        )
    )


class WorkflowCreate(StrictModel):
    """A DAG of tasks created in one call, all or nothing: the refs name one node each, and
    ``depends_on`` names other nodes of the workflow, without a cycle."""

    model_config = ConfigDict(json_schema_extra=_workflow_document)

    name: Name | None = None
    idempotency_key: Key | None = None
    labels: Labels = Field(default_factory=dict)
    defaults: dict[str, JsonAny] = Field(
        default_factory=dict,
        description="Fields every node gets unless it sets them (any task field but ref, "
        "depends_on and idempotency_key); labels are merged.",
    )
    nodes: Annotated[
        list[dict[str, JsonAny]], Field(min_length=1, max_length=MAX_WORKFLOW_NODES)
    ] = Field(description="The nodes (WorkflowNodeIn), each merged over the defaults.")

    @field_validator("defaults")
    @classmethod
    def _known(cls, value: dict[str, Any]) -> dict[str, Any]:
        unknown = sorted(set(value) - DEFAULT_FIELDS)
        if unknown:
            raise PydanticCustomError(
                "default_unknown",
                "defaults cannot set {fields}: they name a node's place in the graph or are no "
                "task field",
                {"fields": ", ".join(unknown)},
            )
        return value

    def fingerprint(self) -> str:
        """The request's fingerprint, for idempotent repeats."""
        canonical = orjson.dumps(self.model_dump(mode="json"), option=orjson.OPT_SORT_KEYS)
        return hashlib.sha256(canonical).hexdigest()[:32]


_NODE = pydantic.TypeAdapter(WorkflowNodeIn)
_MAX_ERRORS = 50


def nodes_of(body: WorkflowCreate) -> list[WorkflowNodeIn]:
    """Every node merged over the defaults and validated (see the module). Errors are
    ``RequestValidationError`` located at ``body.nodes.<i>...`` (the first :data:`_MAX_ERRORS`)."""
    defaults = body.defaults
    shared_labels = defaults.get("labels")
    nodes: list[WorkflowNodeIn] = []
    errors: list[Any] = []
    for i, raw in enumerate(body.nodes):
        merged = {**defaults, **raw}
        if isinstance(shared_labels, dict) and isinstance(raw.get("labels"), dict):
            merged["labels"] = {**shared_labels, **raw["labels"]}
        try:
            nodes.append(_NODE.validate_json(orjson.dumps(merged)))
        except pydantic.ValidationError as exc:
            errors.extend(
                {**e, "loc": ("body", "nodes", i, *e["loc"])} for e in exc.errors(include_url=False)
            )
            if len(errors) >= _MAX_ERRORS:
                break
    if errors:
        raise RequestValidationError(errors[:_MAX_ERRORS])
    return nodes


class SpawnIn(StrictModel):
    """Children of the task held under a lease, made in one call, all or nothing. ``key``
    tells this call apart from the handler's other spawn calls: the same call again (a retried
    request, or the handler run again after its worker died) gets the same children instead of
    new ones. Children have no ``idempotency_key`` of their own."""

    model_config = ConfigDict(
        json_schema_extra=rules(("tasks", "a spawned child has no idempotency_key"))
    )

    tasks: Annotated[list[TaskCreate], Field(min_length=1, max_length=MAX_SPAWN)]
    key: Annotated[str, Field(min_length=1, max_length=64, pattern=f"^{QUEUE_NAME}$")] = "0"

    @field_validator("tasks")
    @classmethod
    def _no_keys(cls, value: list[TaskCreate]) -> list[TaskCreate]:
        for task in value:
            if task.idempotency_key is not None:
                raise PydanticCustomError(
                    "child_key",
                    "a spawned child has no idempotency_key: the spawn call's key covers it",
                )
        return value


# -- answers (documentation only) ----------------------------------------------------------------


class WorkflowNodeOut(BaseModel):
    ref: str
    task_id: str
    name: str | None
    queue: str
    status: str
    depends_on: list[str] = Field(description="The refs of the node's parents.")
    attempts: int
    result: Any = None
    result_ref: str | None = Field(
        default=None, description="Where a result over 64 KiB is read (GET, the API key)."
    )
    last_error: str | None
    started_at: datetime | None
    finished_at: datetime | None


class WorkflowOut(BaseModel):
    id: str
    name: str | None
    status: str = Field(description="running, succeeded, failed or cancelled")
    labels: dict[str, str]
    created_at: datetime
    finished_at: datetime | None
    counts: dict[str, int] = Field(description="Nodes by status.")
    nodes: list[WorkflowNodeOut] | None = Field(
        default=None, description="Every node (absent in lists)."
    )


class WorkflowListOut(BaseModel):
    items: list[WorkflowOut]
    next_cursor: str | None


class ParentOut(BaseModel):
    id: str
    ref: str | None
    name: str | None
    status: str
    result: Any = None
    result_ref: str | None = None
    error: str | None
    finished_at: datetime | None


class ParentListOut(BaseModel):
    items: list[ParentOut]


class ChildrenOut(BaseModel):
    items: list[TaskOut]
    ended: bool = Field(description="Whether every child has ended.")
