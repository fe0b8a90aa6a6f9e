"""Prometheus metrics, one registry per process (``REGISTRY``); ``/metrics`` renders it.

Series per queue are bounded: at most :data:`MAX_QUEUE_SERIES` queue names get series of their
own in each queue-labelled metric (the first seen; the rest are counted under ``_other``), and
:func:`forget_queues` drops the series of queues that no longer hold tasks. ``duetime_tasks``
keeps the :data:`MAX_QUEUE_SERIES` largest (tenant, queue) pairs and adds up the rest under
``_other`` (see :func:`set_task_counts`).
"""

from __future__ import annotations

import collections
import contextlib
import math
from bisect import bisect_left
from collections import defaultdict
from collections.abc import Iterable, Set
from typing import Any, TypeVar

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from duetime.types import StatusCount

REGISTRY = CollectorRegistry(auto_describe=True)

MAX_QUEUE_SERIES = 200
"""Queue names (or, in ``duetime_tasks``, tenant and queue pairs) with series of their own."""
OTHER = "_other"
"""The label value under which queues past :data:`MAX_QUEUE_SERIES` are counted."""

_M = TypeVar("_M", Counter, Gauge, Histogram)
_children: dict[tuple[Any, ...], Any] = {}

Event = tuple[str, tuple[str, ...], str, float]
"""One metric update made in a dispatcher process: (metric, label values, method, amount)."""
_forwarding: list[Event] | None = None


def child(metric: _M, *values: str) -> _M:
    """``metric.labels(*values)`` (or ``metric`` itself without labels), remembered: the hot
    paths call this once per task, and ``labels()`` validates and locks on every call.

    In a dispatcher process (:func:`forward`) the updates are recorded instead, and the node
    process applies them to its own registry (:func:`apply`), so ``/metrics`` counts them."""
    key = (id(metric), *values)
    found: Any = _children.get(key)
    if found is None:
        if _forwarding is not None:
            found = _Recorder(_NAMES[id(metric)], values, _forwarding)
        elif not values:
            found = metric
        else:
            if id(metric) in _QUEUE_LABELLED:  # values[0] is a queue name: bounded
                values = (_admit(values[0]), *values[1:])
                _series[values[0]].add((id(metric), values))
            elif metric is TENANT_ATTEMPTS:  # values[0] is a tenant id: bounded
                values = (tenant_label(values[0]), *values[1:])
            found = metric.labels(*values)
        _children[key] = found
    return found  # type: ignore[no-any-return]  # a _Recorder quacks like the metric


_queues: set[str] = set()
_series: defaultdict[str, set[tuple[int, tuple[str, ...]]]] = defaultdict(set)


def _admit(queue: str) -> str:
    if queue in _queues:
        return queue
    if len(_queues) < MAX_QUEUE_SERIES:
        _queues.add(queue)
        return queue
    return OTHER


def forget_queues(existing: Set[str]) -> None:
    """Drop the series of queues not in ``existing`` (names of queues that hold tasks), which
    frees their places for new queues."""
    gone = _queues - existing
    if not gone:
        return
    for queue in gone:
        for metric_id, values in _series.pop(queue, ()):
            with contextlib.suppress(KeyError):
                _QUEUE_LABELLED[metric_id].remove(*values)
        _queues.discard(queue)
    _children.clear()  # some cached children were those series, or counted under _other


def set_task_counts(counts: Iterable[StatusCount]) -> None:
    """Set ``duetime_tasks`` from the store's counts: the :data:`MAX_QUEUE_SERIES` largest
    (tenant, queue) pairs by their own series, the rest added up under ``_other``."""
    by_pair: defaultdict[tuple[str, str], dict[str, int]] = defaultdict(dict)
    for count in counts:
        by_pair[(count.tenant_id, count.queue)][count.status.value] = count.count
    ranked = sorted(by_pair.items(), key=lambda item: (-sum(item[1].values()), item[0]))
    TASKS.clear()
    others: defaultdict[str, int] = defaultdict(int)
    for rank, ((tenant, queue), statuses) in enumerate(ranked):
        for status, n in statuses.items():
            if rank < MAX_QUEUE_SERIES:
                TASKS.labels(tenant, queue, status).set(n)
            else:
                others[status] += n
    for status, n in others.items():
        TASKS.labels(OTHER, OTHER, status).set(n)


class _Recorder:
    __slots__ = ("_events", "_key")

    def __init__(self, name: str, values: tuple[str, ...], events: list[Event]) -> None:
        self._key = (name, values)
        self._events = events

    def inc(self, amount: float = 1) -> None:
        self._events.append((*self._key, "inc", amount))

    def observe(self, amount: float) -> None:
        self._events.append((*self._key, "observe", amount))

    def set(self, value: float) -> None:
        self._events.append((*self._key, "set", value))


def observe_many(histogram: Any, amounts: Iterable[float]) -> None:
    """Observe each of ``amounts`` (finite numbers) on ``histogram``, a Histogram or one of its
    :func:`child` series: the counts and sum one ``observe`` each would give, with one update
    per bucket touched. Observed one by one, the due-lags of a 500-task lease cost two locked
    increments each: ~10 % of the lease route's CPU.
    Reads prometheus-client's histogram fields (``_upper_bounds``, ``_buckets``, ``_sum``,
    stable since 0.4); a recorder of a dispatcher process records them one by one."""
    bounds = getattr(histogram, "_upper_bounds", None)
    if bounds is None:
        for amount in amounts:
            histogram.observe(amount)
        return
    values = list(amounts)
    if not values:
        return
    histogram._raise_if_not_observable()
    histogram._sum.inc(math.fsum(values))
    # observe() counts an amount in the first bucket whose bound is >= it: bisect_left.
    for index, count in collections.Counter(bisect_left(bounds, v) for v in values).items():
        histogram._buckets[index].inc(count)


def forward() -> list[Event]:
    """Record this process's metric updates from now on; returns the list they go to (the
    caller ships and clears it)."""
    global _forwarding
    _forwarding = []
    _children.clear()
    return _forwarding


def apply(events: Iterable[Event]) -> None:
    """Apply updates recorded in another process to this process's metrics."""
    for name, values, method, amount in events:
        metric: Any = _BY_NAME.get(name)
        if metric is not None and method in ("inc", "observe", "set"):
            getattr(child(metric, *values), method)(amount)


DUE_LAG = Histogram(
    "duetime_due_lag_seconds",
    "Seconds from a task's due time to the start of its attempt.",
    ["queue"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
    registry=REGISTRY,
)
TASKS = Gauge(
    "duetime_tasks",
    "Tasks in the store by tenant, queue and status (maintained counters, read at scrape time).",
    ["tenant", "queue", "status"],
    registry=REGISTRY,
)
ATTEMPTS = Counter(
    "duetime_attempts_total",
    "Attempts ended on this node, by outcome.",
    ["queue", "outcome"],
    registry=REGISTRY,
)
LEASE_EXPIRATIONS = Counter(
    "duetime_lease_expirations_total",
    "Leases found expired by this node's reaper.",
    registry=REGISTRY,
)
PROMOTED = Counter(
    "duetime_promoted_total",
    "Tasks this node's promoter moved to ready.",
    registry=REGISTRY,
)
HISTORY_MOVED = Counter(
    "duetime_history_moved_total",
    "Audit records this node's history mover moved from history_pending into history "
    "(PostgreSQL writes them behind, docs/adr/0008-history-written-behind.md).",
    registry=REGISTRY,
)
HISTORY_DEFERRED = Counter(
    "duetime_history_deferred_seconds_total",
    "Seconds this node's history mover waited for a busy hot path before moving records.",
    registry=REGISTRY,
)
DISPATCHED = Counter(
    "duetime_dispatched_total",
    "Tasks this node's dispatcher claimed for push delivery.",
    registry=REGISTRY,
)
STALE_COMPLETIONS = Counter(
    "duetime_stale_completions_total",
    "Completions refused because their lease was no longer current (fencing).",
    ["source"],
    registry=REGISTRY,
)
DELIVERY_SECONDS = Histogram(
    "duetime_delivery_seconds",
    "Duration of push deliveries, by target type.",
    ["target_type"],
    buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
    registry=REGISTRY,
)
IS_LEADER = Gauge(
    "duetime_is_leader",
    "1 while this node holds the maintenance leadership.",
    registry=REGISTRY,
)
STORE_ERRORS = Counter(
    "duetime_store_unavailable_total",
    "Store calls that failed because the store could not be reached, by component.",
    ["component"],
    registry=REGISTRY,
)
LEASES_GRANTED = Counter(
    "duetime_leases_granted_total",
    "Tasks leased to pull workers through the lease API, by queue.",
    ["queue"],
    registry=REGISTRY,
)
COUNT_CORRECTIONS = Counter(
    "duetime_task_count_corrections_total",
    "Task counts corrected by the leader's recount (non-zero: tasks changed behind the triggers).",
    registry=REGISTRY,
)
LEASE_HEARTBEATS = Counter(
    "duetime_lease_heartbeats_total",
    "Lease heartbeats through the lease API, by result (ok, or stale: refused with 409).",
    ["result"],
    registry=REGISTRY,
)

# -- SPEC §9 figures (see docs/operations.md "Metrics") -------------------------------------------

RETRIES = Counter(
    "duetime_retries_total",
    "Attempts that ended with the task waiting for another attempt (retrying), by queue.",
    ["queue"],
    registry=REGISTRY,
)
DEAD_LETTERS = Counter(
    "duetime_dead_letters_total",
    "Tasks that ended failed (the dead-letter set) on this node, by queue.",
    ["queue"],
    registry=REGISTRY,
)
ATTEMPT_FAILURES = Counter(
    "duetime_attempt_failures_total",
    "Attempts that did not succeed, by queue and failure class (connect, timeout, 4xx, 5xx, "
    "broker_nack, worker_error, lease_expired, other).",
    ["queue", "failure_class"],
    registry=REGISTRY,
)
TENANT_ATTEMPTS = Counter(
    "duetime_tenant_attempts_total",
    "Attempts ended on this node by tenant and outcome (the first 100 tenants seen; the rest "
    'under tenant="_other").',
    ["tenant", "outcome"],
    registry=REGISTRY,
)
IN_FLIGHT = Gauge(
    "duetime_deliveries_in_flight",
    "Push deliveries running now in this node's process.",
    registry=REGISTRY,
)
LEADERSHIP_CHANGES = Counter(
    "duetime_leadership_changes_total",
    "Times this node took or lost the maintenance leadership.",
    ["change"],
    registry=REGISTRY,
)
STORE_SECONDS = Histogram(
    "duetime_store_seconds",
    "Round-trip time of store calls made by this process, by operation.",
    ["operation"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10),
    registry=REGISTRY,
)
STORE_CALL_ERRORS = Counter(
    "duetime_store_errors_total",
    "Store calls that raised, by operation and kind (unavailable, or error).",
    ["operation", "kind"],
    registry=REGISTRY,
)
HTTP_REQUESTS = Counter(
    "duetime_http_requests_total",
    "HTTP requests served, by method, route template and status code.",
    ["method", "route", "status"],
    registry=REGISTRY,
)
HTTP_SECONDS = Histogram(
    "duetime_http_request_duration_seconds",
    "Time to serve an HTTP request (to the end of the response), by method and route template.",
    ["method", "route"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 30),
    registry=REGISTRY,
)
HTTP_IN_PROGRESS = Gauge(
    "duetime_http_requests_in_progress",
    "HTTP requests being served now.",
    registry=REGISTRY,
)
SCHEDULE_TICKS = Counter(
    "duetime_schedule_ticks_total",
    "Schedule tick ledger rows written by this node's materializer, by outcome.",
    ["outcome"],
    registry=REGISTRY,
)
NOTIFICATIONS = Counter(
    "duetime_notifications_total",
    "Notification events queued for tenants, by event type and kind (event, or digest).",
    ["event", "kind"],
    registry=REGISTRY,
)
NOTIFICATIONS_HELD = Counter(
    "duetime_notifications_held_total",
    "Harm events folded into a later digest instead of sent at once (rate limit), by event type.",
    ["event"],
    registry=REGISTRY,
)
SQL_WORKFLOW_REQUESTS = Counter(
    "duetime_sql_workflow_requests_total",
    "Workflows requested through the SQL API that this node ended, by outcome: made, refused.",
    ["outcome"],
    registry=REGISTRY,
)
CIRCUIT_CHANGES = Counter(
    "duetime_circuit_changes_total",
    "Circuit breaker changes of state (per tenant and target origin) made in this node, by new "
    "state: open, half_open, closed.",
    ["state"],
    registry=REGISTRY,
)
DELIVERIES_HELD = Counter(
    "duetime_deliveries_held_total",
    "Push deliveries not made and handed back without spending an attempt, by reason "
    "(circuit_open).",
    ["reason"],
    registry=REGISTRY,
)
BUILD_INFO = Gauge(
    "duetime_build_info",
    "Always 1; the running version in a label.",
    ["version"],
    registry=REGISTRY,
)

MAX_TENANT_SERIES = 100
"""Tenants with series of their own in tenant-labelled metrics; the rest count as ``_other``."""
_tenants: set[str] = set()


def tenant_label(tenant_id: str) -> str:
    """``tenant_id`` while fewer than :data:`MAX_TENANT_SERIES` tenants have series, else
    :data:`OTHER` (so a service with 100,000 tenants exports a bounded number of series)."""
    if tenant_id in _tenants:
        return tenant_id
    if len(_tenants) < MAX_TENANT_SERIES:
        _tenants.add(tenant_id)
        return tenant_id
    return OTHER


def _register_process_collectors() -> None:
    from prometheus_client import PlatformCollector, ProcessCollector

    from duetime.version import __version__

    ProcessCollector(registry=REGISTRY)  # process_cpu_seconds_total, _resident_memory_bytes, ...
    PlatformCollector(registry=REGISTRY)  # python_info
    BUILD_INFO.labels(__version__).set(1)


_register_process_collectors()


_BY_NAME: dict[str, Counter | Gauge | Histogram] = {
    name: value
    for name, value in list(globals().items())
    if isinstance(value, Counter | Gauge | Histogram)
}
_NAMES = {id(metric): name for name, metric in _BY_NAME.items()}
_QUEUE_LABELLED: dict[int, Counter | Gauge | Histogram] = {
    id(metric): metric
    for metric in (DUE_LAG, ATTEMPTS, LEASES_GRANTED, RETRIES, DEAD_LETTERS, ATTEMPT_FAILURES)
}
"""Metrics whose first label is a queue name."""
