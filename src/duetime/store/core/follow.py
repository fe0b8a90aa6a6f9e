"""What follows a task's end, once for both backends, in the transaction of that end: its
dependents move on, and its callbacks are made (SPEC §3 "Workflows").

:func:`settle` is the one rule, run by every path that ends a task with ``has_dependents`` (a
completion on either store, a cancel, a schedule's delete):

- a parent that **succeeded** counts off one pending parent of each blocked child; a child with
  none left becomes ``ready`` (or ``scheduled`` when its ``run_at`` is ahead);
- a parent that **failed or was cancelled** does what each blocked child's
  ``on_parent_failure`` says: ``fail`` (the default) fails it, ``cancel`` cancels it — and
  either goes on to that child's own children, transitively — ``run`` counts it off as above;
- a task with **callbacks** gets, per callback whose kind fires on its status, a task made in
  the same transaction (:func:`make_callbacks`): delivered like any task (signed, retried,
  recorded), its payload the outcome (:func:`callback_payload`), its idempotency key the
  ended task's id and version, so an end makes each of its callbacks once.

The reads of a task's parents (its deliveries carry their outcomes) and children (spawned by
its handler) and of many tasks' statuses (for waits) are here too.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import orjson

from duetime.ids import is_uuid, new_id
from duetime.store.core import rows
from duetime.store.core.dependencies import DEPENDENCY_FAILED
from duetime.store.core.made import task_row
from duetime.store.core.plan import Decode, Plan, Row, Wake, all_, batch, wake_for
from duetime.store.core.runner import Runs
from duetime.types import (
    Callback,
    CallbackKind,
    NewTask,
    ParentOutcome,
    ParentsOf,
    RetryPolicy,
    Task,
    TaskStatus,
)

INLINE_RESULT_BYTES = 64 * 1024
"""A result up to this size travels inline (a callback's payload, a delivery's parents); a
larger one by reference: ``result_ref``, the path of ``GET /v1/tasks/{id}/result``."""

DEFAULT_CALLBACK_RETRY = RetryPolicy()
CALLBACK_LABEL = "duetime.callback"
CALLBACK_OF_LABEL = "duetime.callback_of"

_TERMINAL = frozenset(s.value for s in TaskStatus if s.terminal)


def result_ref(task_id: str) -> str:
    """Where a result too large to travel inline is read, with the tenant's credentials."""
    return f"/v1/tasks/{task_id}/result"


@dataclasses.dataclass(slots=True)
class Settled:
    """What :func:`settle` did: the statuses children moved to (the wake-ups the commit owes)
    and the ids of tasks it ended (children failed or cancelled for a parent)."""

    woken: list[str] = dataclasses.field(default_factory=list)
    ended: list[str] = dataclasses.field(default_factory=list)


def _moved(r: Row, d: type[Decode]) -> tuple[str, str]:
    return d.ident(r["id"]), r["status"]


def _child(r: Row, d: type[Decode]) -> tuple[str, str]:
    return d.ident(r["id"]), r["policy"]


def _ended(r: Row, d: type[Decode]) -> tuple[str, bool]:
    return d.ident(r["id"]), d.flag(r["has_dependents"])


def settle(ended: Sequence[tuple[str, str]]) -> Plan[Settled]:
    """Settle what follows the end of ``ended``: (id, status) of tasks with ``has_dependents``
    that just ended (``succeeded``, ``failed`` or ``cancelled``; other statuses are left
    alone). See the module."""
    done = Settled()
    mine = [(task_id, status) for task_id, status in ended if status in _TERMINAL]
    if not mine:
        return done
    succeeded = [task_id for task_id, status in mine if status == "succeeded"]
    if succeeded:
        moved: list[tuple[str, str]] = yield all_(
            "follow_deps_count_off", _moved, parent_ids=succeeded, child_ids=None
        )
        done.woken.extend(status for _, status in moved)
    with_callbacks = [task_id for task_id, _ in mine]
    dead = [task_id for task_id, status in mine if status != "succeeded"]
    seen: set[str] = set(dead)
    while dead:
        children: list[tuple[str, str]] = yield all_(
            "follow_deps_children", _child, parent_ids=dead
        )
        by_policy: dict[str, list[str]] = {"fail": [], "run": [], "cancel": []}
        for child_id, policy in children:
            by_policy.setdefault(policy, []).append(child_id)
        if by_policy["run"]:
            moved = yield all_(
                "follow_deps_count_off", _moved, parent_ids=dead, child_ids=by_policy["run"]
            )
            done.woken.extend(status for _, status in moved)
        dead = []
        for status, policy in (("failed", "fail"), ("cancelled", "cancel")):
            if not by_policy[policy]:
                continue
            gone: list[tuple[str, bool]] = yield all_(
                "follow_deps_end", _ended, ids=by_policy[policy], status=status,
                error=DEPENDENCY_FAILED,
            )  # fmt: skip
            for child_id, followed in gone:
                done.ended.append(child_id)
                if followed and child_id not in seen:
                    seen.add(child_id)
                    dead.append(child_id)
                    with_callbacks.append(child_id)
    made = yield from make_callbacks(with_callbacks)
    done.woken.extend("ready" for _ in range(made))
    yield wake_for(done.woken)
    if done.ended:
        yield Wake(ended=tuple(done.ended))
    return done


# -- callbacks ---------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class _EndedTask:
    """What a callback carries of the task that ended."""

    id: str
    tenant_id: str
    name: str | None
    queue: str
    status: str
    version: int
    attempts: int
    priority: int
    labels: Mapping[str, str]
    finished_at: datetime | None
    last_error: str | None
    result_json: str | None
    result_bytes: int
    callbacks: Mapping[str, Any]
    workflow_id: str | None
    ref: str | None


def _ended_task(r: Row, d: type[Decode]) -> _EndedTask:
    return _EndedTask(
        id=d.ident(r["id"]),
        tenant_id=r["tenant_id"],
        name=r["name"],
        queue=r["queue"],
        status=r["status"],
        version=int(r["version"]),
        attempts=int(r["attempts"]),
        priority=int(r["priority"]),
        labels=orjson.loads(r["labels"]),
        finished_at=d.opt_time(r["finished_at"]),
        last_error=r["last_error"],
        result_json=r["result"],
        result_bytes=int(r["result_bytes"] or 0),
        callbacks=orjson.loads(r["callbacks"]),
        workflow_id=d.opt_ident(r["workflow_id"]),
        ref=r["ref"],
    )


def callback_payload(kind: CallbackKind, t: _EndedTask) -> dict[str, Any]:
    """The payload of ``t``'s ``kind`` callback: the outcome (docs/api.md "Callbacks")."""
    body: dict[str, Any] = {
        "callback": kind.value,
        "task_id": t.id,
        "name": t.name,
        "queue": t.queue,
        "status": t.status,
        "attempts": t.attempts,
        "finished_at": None if t.finished_at is None else t.finished_at.isoformat(),
        "labels": dict(t.labels),
        "workflow_id": t.workflow_id,
        "ref": t.ref,
    }
    if t.status == "succeeded":
        if t.result_json is not None:
            body["result"] = rows.json_or_text(t.result_json)
        elif t.result_bytes:
            body["result_ref"] = result_ref(t.id)
        else:
            body["result"] = None
    else:
        body["error"] = t.last_error
    return body


def callback_task(kind: CallbackKind, spec: Callback, t: _EndedTask) -> NewTask:
    """The task ``t``'s end makes for its ``kind`` callback (see the module)."""
    return NewTask(
        tenant_id=t.tenant_id,
        target=spec.target,
        payload_json=orjson.dumps(callback_payload(kind, t)).decode(),
        name=spec.name or kind.value,
        queue=spec.queue or t.queue,
        idempotency_key=f"duetime.callback/{t.id}/{t.version}/{kind.value}",
        priority=t.priority,
        retry=spec.retry or DEFAULT_CALLBACK_RETRY,
        timeout_seconds=spec.timeout_seconds or 30.0,
        labels={CALLBACK_LABEL: kind.value, CALLBACK_OF_LABEL: t.id},
    )


def make_callbacks(task_ids: Sequence[str]) -> Plan[int]:
    """Make the callbacks owed by the end of ``task_ids`` (tasks just ended; those without
    callbacks cost nothing more than the read). Returns how many were made (all ``ready``)."""
    if not task_ids:
        return 0
    found: list[_EndedTask] = yield all_(
        "follow_callbacks_due", _ended_task, ids=list(task_ids), inline=INLINE_RESULT_BYTES
    )
    made = []
    for t in found:
        status = TaskStatus(t.status)
        for name, raw in t.callbacks.items():
            kind = CallbackKind(name)
            if kind.fires_on(status):
                new = callback_task(kind, Callback.from_json(raw), t)
                made.append(task_row(new_id(), new, TaskStatus.READY))
    if made:
        yield batch("graph_task_insert", made)
    return len(made)


# -- reads -------------------------------------------------------------------------------------


def _parent_row(r: Row, d: type[Decode]) -> tuple[str, bool, ParentOutcome]:
    return (
        d.ident(r["child_id"]),
        d.flag(r["parents_in_body"]),
        ParentOutcome(
            id=d.ident(r["id"]),
            ref=r["ref"],
            name=r["name"],
            status=TaskStatus(r["status"]),
            result_json=r["result"],
            result_bytes=int(r["result_bytes"] or 0),
            error=r["last_error"],
            finished_at=d.opt_time(r["finished_at"]),
        ),
    )


def task_parents_of(
    tenant_id: str, tasks: Sequence[Task], inline: int = INLINE_RESULT_BYTES
) -> Plan[dict[str, ParentsOf]]:
    """The parents of each of ``tasks`` that has any, in its ``depends_on`` order, each
    result inline when at most ``inline`` bytes."""
    wanted = [t for t in tasks if t.depends_on and t.tenant_id == tenant_id]
    if not wanted:
        return {}
    found: list[tuple[str, bool, ParentOutcome]] = yield all_(
        "follow_parents_of", _parent_row, tenant_id=tenant_id, ids=[t.id for t in wanted],
        inline=inline,
    )  # fmt: skip
    by_child: dict[str, dict[str, ParentOutcome]] = {}
    in_body: dict[str, bool] = {}
    for child_id, body, parent in found:
        by_child.setdefault(child_id, {})[parent.id] = parent
        in_body[child_id] = body
    out: dict[str, ParentsOf] = {}
    for t in wanted:
        mine = by_child.get(t.id, {})
        ordered = tuple(mine[p] for p in t.depends_on if p in mine)
        out[t.id] = ParentsOf(t.id, in_body.get(t.id, False), ordered)
    return out


def _status(r: Row, d: type[Decode]) -> tuple[str, TaskStatus]:
    return d.ident(r["id"]), TaskStatus(r["status"])


def task_statuses(task_ids: Sequence[str]) -> Plan[dict[str, TaskStatus]]:
    """The status of each task of ``task_ids`` that exists (any tenant's: callers checked)."""
    wanted = sorted({i for i in task_ids if is_uuid(i)})
    if not wanted:
        return {}
    found: list[tuple[str, TaskStatus]] = yield all_("follow_statuses", _status, ids=wanted)
    return dict(found)


def tasks_get(task_ids: Sequence[str]) -> Plan[dict[str, Task]]:
    """The tasks of ``task_ids`` that exist, by id (any tenant's: callers checked)."""
    wanted = sorted({i for i in task_ids if is_uuid(i)})
    if not wanted:
        return {}
    found: list[Task] = yield all_("follow_tasks_get", rows.task, ids=wanted)
    return {t.id: t for t in found}


def task_children(tenant_id: str, parent_id: str) -> Plan[list[Task]]:
    """The tasks ``parent_id``'s handler spawned, oldest first."""
    if not is_uuid(parent_id):
        return []
    found: list[Task] = yield all_(
        "follow_children", rows.task, tenant_id=tenant_id, parent_id=parent_id
    )
    return found


class FollowMethods(Runs):
    """The reads of :class:`~duetime.store.protocols.FollowStore`, for both backends."""

    async def task_parents_of(
        self, tenant_id: str, tasks: Sequence[Task], inline: int = INLINE_RESULT_BYTES
    ) -> dict[str, ParentsOf]:
        if not any(t.depends_on for t in tasks):
            return {}
        return await self._run(task_parents_of(tenant_id, tasks, inline))

    async def task_statuses(self, task_ids: Sequence[str]) -> dict[str, TaskStatus]:
        return await self._run(task_statuses(task_ids))

    async def task_children(self, tenant_id: str, parent_id: str) -> list[Task]:
        return await self._run(task_children(tenant_id, parent_id))

    async def tasks_get(self, task_ids: Sequence[str]) -> dict[str, Task]:
        return await self._run(tasks_get(task_ids))
