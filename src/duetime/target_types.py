"""The registry of target types: every fact about each kind of target, in one place.

A task is delivered to a *target*: a webhook, a message broker, or a pull worker. Each type has
one :class:`TargetType` member and one :class:`TargetSpec` in :data:`TARGETS`, and every list of
types elsewhere (the lease API's pulled types, the dispatcher's pushed ones, which URLs are
sealed and redacted, failure classes, the dashboard's wording, the CLI's help) derives from
these. What needs more than facts stays with its code: the deliverer and create-time checker of
a pushed type are named in ``duetime.delivery.registry.KINDS``, its request model in the
``Target`` union of ``duetime.api.schemas``. ``tests/unit/test_target_registry.py`` fails when a
registered type is missing from any of them (CONTRIBUTING.md "Adding a delivery target").

This module sits below :mod:`duetime.types` (which re-exports :class:`TargetType`) and imports
nothing of duetime, so the server, the SDK and the CLI may all read it.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

__all__ = [
    "BROKER_TYPES",
    "PULL_TYPES",
    "PUSH_TYPES",
    "SECRET_URL_TYPES",
    "TARGETS",
    "TargetSpec",
    "TargetType",
]


class TargetType(enum.StrEnum):
    """Where a task is delivered: the ``type`` of a target. The facts about each member are its
    :attr:`spec` (:data:`TARGETS`)."""

    HTTP = "http"
    AMQP = "amqp"
    NATS = "nats"
    REDIS = "redis"
    WORKER = "worker"

    @property
    def spec(self) -> TargetSpec:
        """This type's entry in :data:`TARGETS`."""
        return TARGETS[self]


@dataclass(frozen=True, slots=True)
class TargetSpec:
    """The facts about one target type.

    ``title`` names the type in prose (the dashboard, messages). ``pushed``: a node's dispatcher
    delivers the task through the type's deliverer; otherwise a worker leases it. ``broker``: a
    message broker, whose refusals and failures are the ``broker_nack`` failure class.
    ``schemes``: the URL schemes its ``url`` accepts (empty: it has no URL). ``secret_url``: that
    URL may carry a credential (a password or token in its user info, a credential query
    parameter), which is sealed when a task is created and shown as ``***`` and a fingerprint
    (:mod:`duetime.delivery.sealing`). ``extra``: the ``duetime[extra]`` the server needs to
    deliver it, and ``requires`` the module that extra provides (None: the server extra serves
    it)."""

    type: TargetType
    title: str
    pushed: bool
    broker: bool = False
    schemes: tuple[str, ...] = ()
    secret_url: bool = False
    extra: str | None = None
    requires: str | None = None


TARGETS: Mapping[TargetType, TargetSpec] = MappingProxyType(
    {
        spec.type: spec
        for spec in (
            TargetSpec(
                TargetType.HTTP,
                "webhook",
                pushed=True,
                schemes=("http", "https"),
                secret_url=True,
            ),
            TargetSpec(
                TargetType.AMQP,
                "AMQP",
                pushed=True,
                broker=True,
                schemes=("amqp", "amqps"),
                secret_url=True,
                extra="amqp",
                requires="aiormq",
            ),
            TargetSpec(
                TargetType.NATS,
                "NATS",
                pushed=True,
                broker=True,
                schemes=("nats", "tls"),
                secret_url=True,
                extra="nats",
                requires="nats",
            ),
            TargetSpec(
                TargetType.REDIS,
                "Redis",
                pushed=True,
                broker=True,
                schemes=("redis", "rediss"),
                secret_url=True,
                extra="redis",
                requires="redis",
            ),
            TargetSpec(TargetType.WORKER, "worker", pushed=False),
        )
    }
)
"""Every target type's facts, by type."""

PUSH_TYPES = frozenset(t for t, spec in TARGETS.items() if spec.pushed)
"""Types a node's dispatcher delivers."""
PULL_TYPES = frozenset(t for t, spec in TARGETS.items() if not spec.pushed)
"""Types workers lease through the lease API."""
BROKER_TYPES = frozenset(t for t, spec in TARGETS.items() if spec.broker)
"""Message brokers."""
SECRET_URL_TYPES = frozenset(t for t, spec in TARGETS.items() if spec.secret_url)
"""Types whose URL may carry a credential: sealed at create, redacted wherever it is shown."""
