"""Which deliverer handles which target type, and the create-time check of each type.

One :class:`Kind` per pushed target type (:data:`duetime.target_types.PUSH_TYPES`); the facts
about a type (its extra, whether its URL carries a secret) are its
:class:`~duetime.target_types.TargetSpec`. A kind whose client library (its ``duetime[extra]``)
is not installed is not served: :func:`build_deliverers` leaves it out (so the dispatcher never
claims such tasks) and :func:`target_validator` refuses a task naming it with a 422 that says
which extra to install. To add a target type, see CONTRIBUTING.md "Adding a delivery target".
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
from duetime.delivery.outbound import OutboundIdentity
from duetime.delivery.sealing import sealer_for
from duetime.errors import ValidationError
from duetime.target_types import PULL_TYPES, TargetType

__all__ = ["KINDS", "Kind", "build_deliverers", "served_types", "target_validator"]


@dataclass(frozen=True, slots=True)
class Kind:
    """A pushed target type's deliverer class and create-time checker (``module:name``)."""

    type: TargetType
    deliverer: str
    checker: str

    @property
    def extra(self) -> str | None:
        """The ``duetime[extra]`` the deliverer needs (None: the server's own)."""
        return self.type.spec.extra

    @property
    def installed(self) -> bool:
        """Whether the client library this kind needs can be imported here."""
        requires = self.type.spec.requires
        return requires is None or _importable(requires)

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
    ),
    Kind(
        TargetType.NATS,
        "duetime.delivery.nats:NatsDeliverer",
        "duetime.delivery.nats:check_nats_target",
    ),
    Kind(
        TargetType.REDIS,
        "duetime.delivery.redis:RedisDeliverer",
        "duetime.delivery.redis:check_redis_target",
    ),
)


@functools.cache
def _importable(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def served_types(kinds: Sequence[Kind] = KINDS) -> frozenset[TargetType]:
    """The push target types this installation can deliver."""
    return frozenset(kind.type for kind in kinds if kind.installed)


def build_deliverers(
    settings: Settings,
    *,
    resolver: Resolver | None = None,
    identity: OutboundIdentity | None = None,
) -> dict[TargetType, Deliverer]:
    """One deliverer per served push target type, configured from ``settings``; they share one
    :class:`~duetime.delivery.sealing.TargetSealer` over the node's key ring (made on first use:
    a node whose targets carry no credential needs no key); webhooks present ``identity``
    (target ``auth``, held payloads' URLs)."""
    out: dict[TargetType, Deliverer] = {}
    sealer = sealer_for(settings)
    for kind in KINDS:
        if not kind.installed:
            continue
        cls = kind.load(kind.deliverer)
        options: dict[str, Any] = {
            "allow_private": settings.private_targets_allowed,
            "resolver": resolver,
            "sealer": sealer,  # opens sealed credentials right before sending
        }
        if kind.type is TargetType.HTTP:
            options["max_connections"] = settings.dispatch_concurrency
            options["max_per_origin"] = settings.max_connections_per_origin
            options["identity"] = identity
        out[kind.type] = cls(**options)
    return out


def target_validator(
    settings: Settings, kinds: Sequence[Kind] = KINDS
) -> Callable[[Mapping[str, Any]], Mapping[str, Any] | None]:
    """Checks a target at create time, so a task that can never be delivered is a 422 (its
    type's checker: the network guard, a broker URL's query parameters...). Sealing its
    credentials is the API's, for every target (:mod:`duetime.delivery.sealing`)."""
    allow_private = settings.private_targets_allowed
    by_name = {kind.type.value: kind for kind in kinds}
    checkers: dict[str, Callable[..., None]] = {}

    def validate(target: Mapping[str, Any]) -> Mapping[str, Any] | None:
        kind_name = target.get("type")
        if isinstance(kind_name, str) and kind_name in PULL_TYPES:
            return None
        kind = by_name.get(kind_name) if isinstance(kind_name, str) else None
        if kind is None:
            served = ", ".join(sorted({*PULL_TYPES, *served_types(kinds)}))
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
        auth = target.get("auth")
        if isinstance(auth, Mapping) and "oidc" in auth and not settings.issuer:
            raise ValidationError(
                "an OIDC token needs an issuer: start the server with DUETIME_PUBLIC_URL set",
                "target.auth.oidc",
            )
        return None

    return validate
