"""Prometheus metrics, one registry per process (``REGISTRY``); ``/metrics`` renders it."""

from __future__ import annotations

from typing import Any, TypeVar

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

REGISTRY = CollectorRegistry(auto_describe=True)

_M = TypeVar("_M", Counter, Gauge, Histogram)
_children: dict[tuple[Any, ...], Any] = {}


def child(metric: _M, *values: str) -> _M:
    """``metric.labels(*values)``, remembered: the hot paths call this once per task, and
    ``labels()`` validates and locks on every call. (prometheus keeps every child anyway.)"""
    key = (id(metric), *values)
    found = _children.get(key)
    if found is None:
        found = _children[key] = metric.labels(*values)
    return found


DUE_LAG = Histogram(
    "duetime_due_lag_seconds",
    "Seconds from a task's due time to the start of its attempt.",
    ["queue"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
    registry=REGISTRY,
)
TASKS = Gauge(
    "duetime_tasks",
    "Tasks in the store by queue and status (read at scrape time).",
    ["queue", "status"],
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
LEASE_HEARTBEATS = Counter(
    "duetime_lease_heartbeats_total",
    "Lease heartbeats through the lease API, by result (ok, or stale: refused with 409).",
    ["result"],
    registry=REGISTRY,
)
