"""Which deliverer handles which target type, and the create-time check of each type.

One :class:`Kind` per push target type. A kind whose client library (its ``duetime[extra]``) is
not installed is not served: :func:`build_deliverers` leaves it out (so the dispatcher never
claims such tasks) and :func:`target_validator` refuses a task naming it with a 422 that says
which extra to install. To add a target type, add a deliverer module and one entry to
:data:`KINDS`.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from duetime.config import Settings
from duetime.delivery.base import Deliverer
from duetime.delivery.netguard import Resolver
from duetime.delivery.redact import BROKER_TYPES
from duetime.delivery.sealing import Sealer, sealer_for
from duetime.errors import ValidationError
from duetime.types import TargetType

__all__ = ["KINDS", "Kind", "build_deliverers", "served_types", "target_validator"]


@dataclass(frozen=True, slots=True)
class Kind:
    """A push target type: its deliverer class and checker (``module:name``), and the extra
    (and the import it provides) the deliverer needs."""

    type: TargetType
    deliverer: str
    checker: str
    extra: str | None = None
    requires: str | None = None

    @property
    def installed(self) -> bool:
        """Whether the client library this kind needs can be imported here."""
        return self.requires is None or _importable(self.requires)

    def load(self, ref: str) -> Any:
        module, _, name = ref.partition(":")
        return getattr(importlib.import_module(module), name)


KINDS: tuple[Kind, ...] = (
    Kind(
        TargetType.HTTP,
        "duetime.delivery.webhook:WebhookDeliverer",
        "duetime.delivery.webhook:check_http_target",
    ),
    Kind(
        TargetType.AMQP,
        "duetime.delivery.amqp:AmqpDeliverer",
        "duetime.delivery.amqp:check_amqp_target",
        extra="amqp",
        requires="aiormq",
    ),
    Kind(
        TargetType.NATS,
        "duetime.delivery.nats:NatsDeliverer",
        "duetime.delivery.nats:check_nats_target",
        extra="nats",
        requires="nats",
    ),
    Kind(
        TargetType.REDIS,
        "duetime.delivery.redis:RedisDeliverer",
        "duetime.delivery.redis:check_redis_target",
        extra="redis",
        requires="redis",
    ),
)


@functools.cache
def _importable(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def served_types(kinds: Sequence[Kind] = KINDS) -> frozenset[TargetType]:
    """The push target types this installation can deliver."""
    return frozenset(kind.type for kind in kinds if kind.installed)


def build_deliverers(
    settings: Settings, *, resolver: Resolver | None = None
) -> dict[TargetType, Deliverer]:
    """One deliverer per served push target type, configured from ``settings``."""
    out: dict[TargetType, Deliverer] = {}
    for kind in KINDS:
        if not kind.installed:
            continue
        cls = kind.load(kind.deliverer)
        options: dict[str, Any] = {
            "allow_private": settings.private_targets_allowed,
            "resolver": resolver,
        }
        if kind.type is TargetType.HTTP:
            options["max_connections"] = settings.dispatch_concurrency
            options["max_per_origin"] = settings.max_connections_per_origin
        else:  # a broker: it opens sealed credentials with the node's key, on first need
            options["sealer"] = functools.partial(sealer_for, settings)
        out[kind.type] = cls(**options)
    return out


_MAX_SEALED = 4096
"""Broker URLs whose sealed form a node keeps, so the same URL is stored the same way."""


def target_validator(
    settings: Settings, kinds: Sequence[Kind] = KINDS
) -> Callable[[Mapping[str, Any]], Mapping[str, Any] | None]:
    """Checks a target at create time, so a task that can never be delivered is a 422; returns
    the target to store when it differs: a broker URL with its secret sealed
    (:mod:`duetime.delivery.sealing`)."""
    allow_private = settings.private_targets_allowed
    by_name = {kind.type.value: kind for kind in kinds}
    checkers: dict[str, Callable[..., None]] = {}
    sealers: list[Sealer] = []  # made on first use: only a credential needs the key
    # A URL sealed once is stored the same way after (a Fernet token is random each time):
    # the deliverers then open each distinct URL once, not once per task.
    sealed_urls: dict[str, str] = {}

    def validate(target: Mapping[str, Any]) -> Mapping[str, Any] | None:
        kind_name = target.get("type")
        if kind_name == TargetType.WORKER:
            return None
        kind = by_name.get(kind_name) if isinstance(kind_name, str) else None
        if kind is None:
            served = ", ".join(sorted({TargetType.WORKER, *served_types(kinds)}))
            raise ValidationError(
                f"unknown target type {kind_name!r}; use one of: {served}", "target.type"
            )
        if not kind.installed:
            raise ValidationError(
                f"target type {kind.type.value!r} needs the {kind.extra!r} extra on this server "
                f"(pip install 'duetime[{kind.extra}]')",
                "target.type",
            )
        check = checkers.get(kind.type)
        if check is None:
            check = checkers[kind.type] = kind.load(kind.checker)
        check(target, allow_private=allow_private)
        url = target.get("url")
        if kind_name in BROKER_TYPES and isinstance(url, str):
            sealed = sealed_urls.get(url)
            if sealed is None:
                if not sealers:
                    sealers.append(sealer_for(settings))
                sealed = sealers[0].seal_url(url)
                if len(sealed_urls) >= _MAX_SEALED:
                    sealed_urls.clear()
                sealed_urls[url] = sealed
            if sealed != url:
                return {**target, "url": sealed}
        return None

    return validate
