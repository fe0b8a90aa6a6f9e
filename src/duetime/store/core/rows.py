"""Rows to duetime values, once for both backends: each converter reads its row through the
backend's :class:`~duetime.store.core.plan.Decode`."""

from __future__ import annotations

import functools
from datetime import date
from typing import Any, cast

import orjson

from duetime.flow.rules import stored_rules
from duetime.history.events import HistoryEvent
from duetime.history.retention import RetentionPolicy
from duetime.store.core.plan import Decode, Row
from duetime.store.counters import CountKey
from duetime.store.recorded import stored_retry_policy
from duetime.types import (
    ApiKey,
    Attempt,
    AttemptOutcome,
    CatchupPolicy,
    Lease,
    NotificationSettings,
    OverlapPolicy,
    Queue,
    QueueSettings,
    RetryPolicy,
    Schedule,
    ScheduleConfig,
    ScheduleDue,
    ScheduleRevision,
    SigningSecret,
    StatusCount,
    Task,
    TaskStatus,
    Tenant,
    TenantQuotas,
    Tick,
    TickOutcome,
    WorkerInfo,
    Workflow,
)


def tenant(r: Row, d: type[Decode]) -> Tenant:
    quotas = TenantQuotas(
        max_pending_tasks=r["max_pending_tasks"],
        max_creates_per_second=r["max_creates_per_second"],
        max_concurrency=r["max_concurrency"],
        max_schedules=r["max_schedules"],
        weight=r["weight"],
    )
    return Tenant(id=r["id"], name=r["name"], created_at=d.time(r["created_at"]), quotas=quotas)


def api_key(r: Row, d: type[Decode]) -> ApiKey:
    return ApiKey(
        id=r["id"],
        tenant_id=r["tenant_id"],
        key_hash=r["key_hash"],
        created_at=d.time(r["created_at"]),
    )


def signing_secret(r: Row, d: type[Decode]) -> SigningSecret:
    return SigningSecret(
        id=r["id"],
        tenant_id=r["tenant_id"],
        secret=r["secret"],
        created_at=d.time(r["created_at"]),
        expires_at=d.opt_time(r["expires_at"]),
    )


_STATUS = {s.value: s for s in TaskStatus}  # enum lookups by value are slow-ish (hot path)
_OUTCOME = {o.value: o for o in AttemptOutcome}


@functools.lru_cache(maxsize=1024)
def retry_policy(text: str) -> RetryPolicy:
    """The ``retry`` column as a policy (cached: policies are read-only, and few distinct exist)."""
    return stored_retry_policy(text)


def json_or_text(text: str | None) -> Any:
    """A JSON column that must stay readable even if a writer broke its JSON (``result``)."""
    if text is None:
        return None
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return text


def task(r: Row, d: type[Decode]) -> Task:
    """A ``tasks`` row (every column) as a :class:`Task`."""
    return Task(
        id=d.ident(r["id"]),
        tenant_id=r["tenant_id"],
        name=r["name"],
        queue=r["queue"],
        status=_STATUS[r["status"]],
        version=r["version"],
        target=orjson.loads(r["target"]),
        payload_json=r["payload"],
        idempotency_key=r["idempotency_key"],
        priority=r["priority"],
        retry=retry_policy(r["retry"]),
        timeout_seconds=r["timeout_seconds"],
        depends_on=d.ids(r["depends_on"]),
        concurrency_key=r["concurrency_key"],
        labels=orjson.loads(r["labels"]),
        attempts=r["attempts"],
        series_start=r["series_start"],
        schedule_id=r["schedule_id"],
        scheduled_for=d.opt_time(r["scheduled_for"]),
        run_at=d.time(r["run_at"]),
        due_at=d.time(r["due_at"]),
        created_at=d.time(r["created_at"]),
        updated_at=d.time(r["updated_at"]),
        started_at=d.opt_time(r["started_at"]),
        finished_at=d.opt_time(r["finished_at"]),
        last_error=r["last_error"],
        result=json_or_text(r["result"]),
        lease_id=d.opt_ident(r["lease_id"]),
        lease_expires_at=d.opt_time(r["lease_expires_at"]),
        worker_id=r["worker_id"],
        cancel_requested=d.flag(r["cancel_requested"]),
        traceparent=r["traceparent"],
        request_hash=r["request_hash"],
        payload_ref=r["payload_ref"],
        flow_key=r["flow_key"],
        absorbed=r["absorbed"],
        absorbed_at=d.opt_time(r["absorbed_at"]),
    )


def lease(r: Row, d: type[Decode]) -> Lease:
    """A ``running`` task row as the :class:`Lease` its holder works under."""
    return Lease.of(task(r, d))


def attempt(r: Row, d: type[Decode]) -> Attempt:
    return Attempt(
        task_id=d.ident(r["task_id"]),
        number=r["number"],
        started_at=d.time(r["started_at"]),
        finished_at=d.time(r["finished_at"]),
        outcome=_OUTCOME[r["outcome"]],
        error=r["error"],
        http_status=r["http_status"],
        duration_ms=r["duration_ms"],
        worker=r["worker"],
        logs=r["logs"],
        response=r["response"],
    )


# -- queues, workers, counts (duetime.store.core.queueing) -----------------------------------


def queue(r: Row, d: type[Decode]) -> Queue:
    return Queue(
        tenant_id=r["tenant_id"],
        name=r["name"],
        settings=QueueSettings(
            rate_limit_per_second=r["rate_limit_per_second"],
            burst=r["burst"],
            max_concurrency=r["max_concurrency"],
            max_concurrency_per_key=r["max_concurrency_per_key"],
            paused=d.flag(r["paused"]),
            flow=stored_rules(json_or_text(r["flow"])),
        ),
        updated_at=d.time(r["updated_at"]),
        tokens=r["tokens"],
        tokens_at=None if r["tokens_at"] is None else d.time(r["tokens_at"]),
    )


def worker(r: Row, d: type[Decode]) -> WorkerInfo:
    return WorkerInfo(
        tenant_id=r["tenant_id"],
        worker_id=r["worker_id"],
        queues=d.ids(r["queues"]),  # a list of text, as ids are
        first_seen_at=d.time(r["first_seen_at"]),
        last_seen_at=d.time(r["last_seen_at"]),
        leases=r["leases"],
    )


def status_count(r: Row, d: type[Decode]) -> StatusCount:
    return StatusCount(
        tenant_id=r["tenant_id"], queue=r["queue"], status=_STATUS[r["status"]], count=r["n"]
    )


def queue_figure(r: Row, d: type[Decode]) -> tuple[str, TaskStatus | None, int, float]:
    """A ``queue_stats`` row: ``(queue, status, n, _)`` or ``(queue, None, _, lag seconds)``."""
    status = r["status"]
    return r["queue"], None if status is None else _STATUS[status], r["n"], r["lag"]


def count_key(r: Row, d: type[Decode]) -> CountKey:
    return CountKey(r["tenant_id"], r["queue"])


def recount(r: Row, d: type[Decode]) -> tuple[str, int, int]:
    """A ``counts_recount`` row: ``(status, real count, counted)``."""
    return r["status"], r["real"], r["counted"]


# -- history, retention and notifications (duetime/store/core/history.py, notifications.py) ---


def retention(r: Row, d: type[Decode]) -> RetentionPolicy:
    return RetentionPolicy.of_row(r)


def queue_retention(r: Row, d: type[Decode]) -> tuple[str, RetentionPolicy]:
    return r["queue"], RetentionPolicy.of_row(r)


def tenant_count(r: Row, d: type[Decode]) -> tuple[str, int]:
    return r["tenant_id"], r["n"]


def month(r: Row, d: type[Decode]) -> date:
    """A ``month`` column: the month's first day as ISO text."""
    return date.fromisoformat(r["month"])


def history_fields(text: str | None, d: type[Decode]) -> dict[str, Any] | None:
    """The ``fields`` of an audit record. SQLite's triggers record ``run_at`` in microseconds,
    PostgreSQL's as RFC 3339 text: both answer the text."""
    if not text:
        return None
    found: dict[str, Any] = orjson.loads(text)
    if "run_at" in found:
        found["run_at"] = [
            v if v is None or isinstance(v, str) else d.time(v).isoformat().replace("+00:00", "Z")
            for v in found["run_at"]
        ]
    return found


_EVENT_COLUMNS = (
    "id", "kind", "schedule_id", "name", "queue", "from_status", "to_status", "actor", "attempt",
    "outcome", "error", "http_status", "duration_ms", "worker", "logs", "response",
)  # fmt: skip


def history_event(r: Row, d: type[Decode]) -> HistoryEvent:
    """A ``history`` row as a :class:`HistoryEvent`."""
    return HistoryEvent(
        **{key: r[key] for key in _EVENT_COLUMNS},
        at=d.time(r["at"]),
        task_id=d.opt_ident(r["task_id"]),
        labels=orjson.loads(r["labels"]) if r["labels"] else {},
        fields=history_fields(r["fields"], d),
        started_at=d.opt_time(r["started_at"]),
    )


_TASK_TIMES = frozenset(
    {"scheduled_for", "run_at", "due_at", "created_at", "updated_at", "started_at",
     "finished_at", "lease_expires_at"}
)  # fmt: skip
_TASK_JSON = frozenset({"target", "retry", "labels", "depends_on"})


def nothing(r: Row, d: type[Decode]) -> None:
    """For a statement whose rows only count."""


def swept_task(r: Row, d: type[Decode]) -> dict[str, Any]:
    """A task a retention sweep deleted, as the archive keeps it (``TaskArchiver``):
    PostgreSQL's row carries ``to_jsonb(t)`` as ``document``; SQLite's (``document`` NULL) is
    the whole row, made into JSON here."""
    document = r["document"]
    if document is None:
        keys = [key for key in cast(Any, r).keys() if key != "document"]  # noqa: SIM118
        document = orjson.dumps({key: _task_value(key, r[key], d) for key in keys}).decode()
    keys = ["id", "tenant_id", "name", "queue", "status", "schedule_id"]
    return {**{key: r[key] for key in keys}, "finished_at": d.time(r["finished_at"]),
            "document": document}  # fmt: skip


def _task_value(key: str, value: Any, d: type[Decode]) -> Any:
    if key in _TASK_TIMES and value is not None:
        return d.time(value).isoformat()
    if key in _TASK_JSON and isinstance(value, str):
        return orjson.loads(value)
    return value


def notification_settings(r: Row, d: type[Decode]) -> NotificationSettings:
    return NotificationSettings(
        tenant_id=r["tenant_id"],
        events=tuple(orjson.loads(r["events"])),
        target=orjson.loads(r["target"]),
        updated_at=d.time(r["updated_at"]),
    )


# -- schedules (store/core/schedules.py) ---------------------------------------------------------


def schedule(r: Row, d: type[Decode]) -> Schedule:
    """A ``schedules`` row (every column) as a :class:`Schedule`."""
    config = ScheduleConfig(
        cron=r["cron"],
        every=r["every"],
        rrule=r["rrule"],
        timezone=r["timezone"],
        start_at=d.opt_time(r["start_at"]),
        end_at=d.opt_time(r["end_at"]),
        jitter_seconds=r["jitter_seconds"],
        dst_nonexistent=r["dst_nonexistent"],
        dst_ambiguous=r["dst_ambiguous"],
        overlap=OverlapPolicy(r["overlap"]),
        catchup=CatchupPolicy(r["catchup"]),
        catchup_window_seconds=r["catchup_window_seconds"],
        catchup_max_runs=r["catchup_max_runs"],
        task=orjson.loads(r["task"]),
    )
    resume_catchup = r["resume_catchup"]
    return Schedule(
        id=r["id"],
        tenant_id=r["tenant_id"],
        config=config,
        anchor_at=d.time(r["anchor_at"]),
        paused=d.flag(r["paused"]),
        pause_note=r["pause_note"],
        paused_at=d.opt_time(r["paused_at"]),
        resumed_at=d.opt_time(r["resumed_at"]),
        resume_catchup=None if resume_catchup is None else CatchupPolicy(resume_catchup),
        next_run_at=d.opt_time(r["next_run_at"]),
        materialized_until=d.time(r["materialized_until"]),
        buffered_at=d.opt_time(r["buffered_at"]),
        last_task_id=d.opt_ident(r["last_task_id"]),
        version=r["version"],
        created_at=d.time(r["created_at"]),
        updated_at=d.time(r["updated_at"]),
        deleted=d.flag(r["deleted"]),
        key=r["key"],
    )


def schedule_due(r: Row, d: type[Decode]) -> ScheduleDue:
    """A ``schedule_due`` row: the schedule, its last task's status, whether it only waits."""
    status = r["last_task_status"]
    return ScheduleDue(
        schedule(r, d), None if status is None else _STATUS[status], d.flag(r["waiting"])
    )


def tick(r: Row, d: type[Decode]) -> Tick:
    return Tick(
        schedule_id=r["schedule_id"],
        nominal=d.time(r["nominal"]),
        outcome=TickOutcome(r["outcome"]),
        task_id=d.opt_ident(r["task_id"]),
        detail=r["detail"],
        recorded_at=d.time(r["recorded_at"]),
    )


def schedule_revision(r: Row, d: type[Decode]) -> ScheduleRevision:
    return ScheduleRevision(
        id=r["id"],
        schedule_id=r["schedule_id"],
        at=d.time(r["at"]),
        actor=r["actor"],
        action=r["action"],
        before=orjson.loads(r["before"]),
        after=orjson.loads(r["after"]),
    )


def task_and_dependents(r: Row, d: type[Decode]) -> tuple[Task, bool]:
    """A ``tasks`` row as its :class:`Task` and whether other tasks depend on it."""
    return task(r, d), d.flag(r["has_dependents"])


def attempt_or_none(r: Row, d: type[Decode]) -> Attempt | None:
    """A row of ``attempt_list`` (tasks left-joined to attempts): None for a task's row without
    an attempt."""
    return None if r["number"] is None else attempt(r, d)


def workflow(r: Row, d: type[Decode]) -> Workflow:
    """A ``workflows`` row."""
    return Workflow(
        id=d.ident(r["id"]),
        tenant_id=r["tenant_id"],
        name=r["name"],
        labels=orjson.loads(r["labels"]),
        node_count=int(r["node_count"]),
        created_at=d.time(r["created_at"]),
        idempotency_key=r["idempotency_key"],
        request_hash=r["request_hash"],
    )
