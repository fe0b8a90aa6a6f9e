"""Why a task that has not ended waits, and when it will be tried — from what the store holds:
its status and ``due_at``, the circuit of its target's origin (``GET /v1/targets``), its queue's
settings and what holds the queue's ready tasks (``held_by`` of ``GET /v1/queues``), its key
under the queue's limits per key (the key's bucket and running tasks, ``keys`` of
``GET /v1/queues/{name}``), the queue's debounce and throttle, and its parents in
``depends_on``.

A task an open circuit holds is handed back ``scheduled`` without spending an attempt, its last
error kept: by status alone it looks like any task scheduled for later, and it is not
``retrying``. :func:`held_after_failing` names those, so the overview and the dead letters can
count them as failing work, and :func:`reasons` says what holds each one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from duetime.api.flow_view import key_holds, key_waiting
from duetime.api.ui.charts import format_seconds
from duetime.delivery.circuit import origin_of
from duetime.flow.keys import KeySource, evaluate
from duetime.flow.rules import duration_text, rate_text
from duetime.types import KeyFigure, Queue, TargetCircuit, Task, TaskStatus

WAITING = (TaskStatus.SCHEDULED, TaskStatus.BLOCKED, TaskStatus.READY, TaskStatus.RETRYING)


@dataclass(frozen=True, slots=True)
class Wait:
    """One thing a task waits for: ``kind`` (a CSS-safe word), a sentence, and the time it
    will be tried when that is known."""

    kind: str
    text: str
    until: datetime | None = None
    short: str = ""
    """The same in a few words, for a list row (empty: ``text`` is short already)."""


@dataclass(frozen=True, slots=True)
class Context:
    """What the reasons are read from; a list page passes what it read once for every row
    (circuits, queue settings), the task page adds the queue's ``held_by`` and the parents."""

    now: datetime
    circuits: Mapping[str, TargetCircuit]
    queues: Mapping[str, Queue]
    held_by: Sequence[str] | None = None
    """What holds the task's queue's ready tasks now; None when not read."""
    parents: Sequence[Task] | None = None
    """The task's parents as far as read; None when not read."""
    key: KeyFigure | None = None
    """The task's key under its queue's limits per key, now; None when not read."""


def _at(value: datetime) -> str:
    return f"{value:%Y-%m-%d %H:%M:%S}Z"


def _in(now: datetime, value: datetime) -> str:
    seconds = (value - now).total_seconds()
    return "now" if seconds <= 0 else f"in {format_seconds(seconds)}"


def held_after_failing(task: Task) -> bool:
    """A ``scheduled`` task that has failed before: handed back by an open circuit (or by a
    worker) after a failed attempt, waiting to be tried again."""
    return task.status is TaskStatus.SCHEDULED and task.last_error is not None


def circuit_wait(task: Task, ctx: Context) -> Wait | None:
    """The circuit of the task's webhook origin, when it holds deliveries."""
    origin = origin_of(task.target)
    circuit = ctx.circuits.get(origin) if origin is not None else None
    if circuit is None or circuit.state == "closed":
        return None
    if circuit.state == "half_open":
        return Wait(
            "circuit",
            f"held: circuit half-open for {origin}: one probe delivery is being tried",
            short=f"held: circuit half-open for {origin}",
        )
    until = circuit.open_until
    if until is None or until <= ctx.now:
        return Wait(
            "circuit",
            f"circuit open for {origin}: its cool-down is over, the next delivery probes it",
            short=f"circuit open for {origin}: probing next",
        )
    return Wait(
        "circuit",
        f"held: circuit open for {origin} until {_at(until)} ({_in(ctx.now, until)}), "
        f"after {circuit.failures} failures in a row",
        until,
        short=f"held: circuit open for {origin} ({_in(ctx.now, until)})",
    )


def _queue_waits(task: Task, ctx: Context) -> list[Wait]:
    queue = ctx.queues.get(task.queue)
    name = task.queue
    found: list[Wait] = []
    if queue is not None and queue.settings.paused:
        text = f"queue {name} is paused: nothing of it starts until it is resumed"
        found.append(Wait("paused", text, short=f"queue {name} paused"))
    if task.status is not TaskStatus.READY or not ctx.held_by or queue is None:
        return found
    s = queue.settings
    if "max_concurrency" in ctx.held_by:
        text = f"queue {name} runs its max_concurrency of {s.max_concurrency} already"
        found.append(Wait("limit", text, short=f"queue at max_concurrency {s.max_concurrency}"))
    if "rate_limit_per_second" in ctx.held_by:
        rate = f"{s.rate_limit_per_second:g}/s"
        text = f"queue {name} is at its rate limit ({rate}): no start is allowed this moment"
        found.append(Wait("limit", text, short=f"queue at its rate limit ({rate})"))
    if (
        "max_concurrency_per_key" in ctx.held_by
        and task.concurrency_key is not None
        and ctx.key is None
    ):
        key = task.concurrency_key
        text = f"concurrency key {key} may run {s.max_concurrency_per_key} at once in {name}"
        found.append(Wait("limit", text, short=f"key {key} busy"))
    return found


def key_wait(task: Task, ctx: Context) -> Wait | None:
    """What holds a ready task's key under its queue's limits per key: its rate limit (until
    its next start) or its running tasks."""
    queue, figure = ctx.queues.get(task.queue), ctx.key
    if task.status is not TaskStatus.READY or queue is None or figure is None:
        return None
    text = key_waiting(figure, queue.settings, task.queue)
    if text is None:
        return None
    short = f"key {figure.key} held: {', '.join(key_holds(figure, queue.settings))}"
    return Wait("key", text, figure.next_start_at, short=short)


def _keyed_waits(task: Task, ctx: Context) -> list[Wait]:
    """A scheduled task of a queue that debounces or throttles its key (read on the task by
    the queue's key expressions, as its create evaluated them)."""
    queue = ctx.queues.get(task.queue)
    if task.status is not TaskStatus.SCHEDULED or queue is None:
        return []
    flow, found = queue.settings.flow, []
    source = KeySource(task.name, task.labels, task.payload_json, task.concurrency_key)
    d = flow.debounce
    key = None if d is None else evaluate(d.key, source)
    if d is not None and key is not None and (task.absorbed or task.due_at > task.created_at):
        latest = task.created_at + timedelta(seconds=d.max_wait_seconds)
        last = f", the last at {_at(task.absorbed_at)}" if task.absorbed_at else ""
        text = (
            f"debounce of key {key} in queue {task.queue}: absorbed {task.absorbed} more "
            f"create(s){last}; runs at {_at(task.due_at)} unless another create of the key "
            f"comes first (then {duration_text(d.period_seconds)} after it), at the latest "
            f"{_at(latest)}"
        )
        found.append(Wait("debounce", text, task.due_at, short=f"debounced by key {key}"))
    t = flow.throttle
    key = None if t is None else evaluate(t.key, source)
    if t is not None and key is not None and task.due_at > ctx.now:
        text = (
            f"throttle of key {key} in queue {task.queue} ({rate_text(t.rate)}): runs at its "
            f"key's slot, {_at(task.due_at)} ({_in(ctx.now, task.due_at)})"
        )
        found.append(Wait("throttle", text, task.due_at, short=f"throttled by key {key}"))
    return found


def _parents_wait(task: Task, ctx: Context) -> Wait:
    total = len(task.depends_on)
    if ctx.parents is None:
        return Wait("parents", f"blocked: waits for its {total} parent(s) to succeed")
    open_ = [p for p in ctx.parents if p.status is not TaskStatus.SUCCEEDED]
    unread = total - len(ctx.parents)
    words = ", ".join(f"…{p.id[-8:]} {p.status.value}" for p in open_[:5])
    more = f" and {unread} not shown" if unread > 0 else ""
    text = f"blocked: {len(open_)} of {total} parent(s) not succeeded ({words}){more}"
    return Wait("parents", text, short=f"blocked: {len(open_)} of {total} parent(s) pending")


def _timing(task: Task, ctx: Context) -> Wait | None:
    due, now = task.due_at, ctx.now
    when = f"{_at(due)} ({_in(now, due)})"
    if task.status is TaskStatus.RETRYING:
        text = f"backoff after attempt {task.attempts_in_series} failed: next attempt at {when}"
        return Wait("backoff", text, due, short=f"backoff: next attempt {_in(now, due)}")
    if task.status is TaskStatus.SCHEDULED and held_after_failing(task):
        text = f"handed back after failing, without spending an attempt: tried again at {when}"
        return Wait("held", text, due, short=f"held after failing: tried again {_in(now, due)}")
    if task.status is TaskStatus.SCHEDULED:
        return Wait("scheduled", f"scheduled: due at {when}", due, short=f"due {_in(now, due)}")
    if task.status is TaskStatus.READY:
        late = format_seconds(max(0.0, (now - due).total_seconds()))
        taker = "a pull worker" if task.target.get("type") == "worker" else "a dispatcher"
        text = f"due {late} ago: waits for {taker} to claim it"
        return Wait("ready", text, due, short=f"ready for {taker} ({late} late)")
    return None


def reasons(task: Task, ctx: Context) -> list[Wait]:
    """What the task waits for, most binding first, ending with when it is due; empty when it
    does not wait (running or ended). A running task whose cancel was asked says so."""
    if task.status is TaskStatus.RUNNING:
        if task.cancel_requested:
            text = "cancel requested: it ends cancelled when this attempt ends"
            return [Wait("cancel", text, short="ends cancelled after this attempt")]
        return []
    if task.status not in WAITING:
        return []
    found: list[Wait] = []
    if task.status is TaskStatus.BLOCKED:
        found.append(_parents_wait(task, ctx))
    circuit = circuit_wait(task, ctx)
    if circuit is not None:
        found.append(circuit)
    found += _queue_waits(task, ctx)
    keyed = key_wait(task, ctx)
    if keyed is not None:
        found.append(keyed)
    found += _keyed_waits(task, ctx)
    timing = _timing(task, ctx)
    if timing is not None:
        found.append(timing)
    return found


def next_try(task: Task, ctx: Context) -> datetime | None:
    """When the task will next be tried, as far as the store knows: its ``due_at``, or later
    when an open circuit holds its origin past it, or its key's rate limit its next start
    (None: it does not wait for a time)."""
    if task.status not in (TaskStatus.SCHEDULED, TaskStatus.READY, TaskStatus.RETRYING):
        return None
    times = [task.due_at]
    for held in (circuit_wait(task, ctx), key_wait(task, ctx)):
        if held is not None and held.until is not None:
            times.append(held.until)
    return max(times)


_GISTS = {
    "backoff": "in backoff: tried again at its next attempt time",
    "key": "held by its key's limit",
    "debounce": "debounced: runs after the last create of its key",
    "throttle": "throttled: runs at its key's next slot",
    "held": "handed back after failing: tried again at its due time",
    "scheduled": "scheduled for later",
    "ready": "due: waits to be claimed",
}


def gist(wait: Wait) -> str:
    """The reason without its per-task times, so that tasks held alike count together (an
    open circuit's sentence is the same for every task of its origin)."""
    return _GISTS.get(wait.kind, wait.text)


def summary(task: Task, ctx: Context) -> Wait | None:
    """The one reason a list row shows: the most binding one."""
    found = reasons(task, ctx)
    return found[0] if found else None
