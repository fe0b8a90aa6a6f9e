"""What a webhook presents besides its payload: an identity and a held payload's URL.

:class:`OutboundIdentity` turns a delivery's target ``auth`` into what the request carries —
``"oidc"``: an ``Authorization: Bearer`` ID token (:mod:`duetime.delivery.identity`);
``"mtls"``: the TLS context holding the tenant's client certificate
(:mod:`duetime.delivery.client_tls`) — and adds ``duetime-payload-url`` for a task whose payload
duetime holds (:mod:`duetime.delivery.payload_access`). A target's ``auth`` names exactly one
kind (the API refuses anything else at create time).
"""

from __future__ import annotations

import functools
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from duetime.clock import Clock, SystemClock
from duetime.config import Settings
from duetime.delivery.base import Delivery
from duetime.delivery.client_tls import client_context
from duetime.delivery.identity import KeyRing, subject_of
from duetime.delivery.payload_access import HEADER_PAYLOAD_URL, PayloadTokens, held_id
from duetime.delivery.sealing import SealError, TargetSealer, sealer_for
from duetime.store.protocols import OutboundStore

__all__ = ["IdentityError", "OutboundIdentity", "Presented"]

CERT_REFRESH_SECONDS = 30.0
"""How long a process uses its copy of a client certificate before reading the store again (a
replaced certificate is presented from then on)."""


class IdentityError(Exception):
    """What a delivery cannot present: it fails, retryable or not, saying why."""

    def __init__(self, message: str, *, retryable: bool) -> None:
        super().__init__(message)
        self.retryable = retryable


@dataclass(frozen=True, slots=True)
class Presented:
    """What one request carries: ``headers`` to add (they win over the target's own), and for
    mTLS the ``tls`` context to dial with, ``tls_key`` naming it (one pool per key)."""

    headers: dict[str, str] = field(default_factory=dict)
    tls: ssl.SSLContext | None = None
    tls_key: str | None = None


IDENTITY_KINDS = ("oidc", "mtls")
"""The target ``auth`` kinds presented here; a ``credential`` is the credentials' own
(:mod:`duetime.delivery.credentials`)."""


def needs_identity(target: Mapping[str, Any], payload_ref: str | None) -> bool:
    """Whether a delivery presents anything (an ``auth``, a held payload)."""
    auth = target.get("auth")
    presents = isinstance(auth, Mapping) and any(kind in auth for kind in IDENTITY_KINDS)
    return presents or held_id(payload_ref) is not None


class OutboundIdentity:
    """The node's outbound identity over ``store`` (see the module).

    ``issuer`` is the ``iss`` of ID tokens and ``public_url`` the base of payload URLs (both
    the node's ``DUETIME_PUBLIC_URL``); ``tls_base`` makes the context that verifies servers
    (the system's trust store by default), into which a client certificate is loaded."""

    def __init__(
        self,
        store: OutboundStore,
        *,
        issuer: str,
        sealer: Callable[[], TargetSealer],
        clock: Clock | None = None,
        rotate_after_seconds: float = 30 * 86400.0,
        publish_seconds: float = 900.0,
        tls_base: Callable[[], ssl.SSLContext] = ssl.create_default_context,
    ) -> None:
        self._store = store
        self._clock: Clock = clock or SystemClock()
        self.issuer = issuer
        made: list[TargetSealer] = []

        def sealer_once() -> TargetSealer:  # the key file is read (or made) once, on first use
            if not made:
                made.append(sealer())
            return made[0]

        self._sealer = sealer_once
        self.keys = KeyRing(
            store,
            sealer_once,
            self._clock,
            rotate_after_seconds=rotate_after_seconds,
            publish_seconds=publish_seconds,
        )
        self.payloads = PayloadTokens(sealer_once)
        self._tls_base = tls_base
        # (tenant, name) -> (read at, pool key, context)
        self._certs: dict[tuple[str, str], tuple[datetime, str, ssl.SSLContext]] = {}

    @classmethod
    def from_settings(
        cls, store: OutboundStore, settings: Settings, clock: Clock | None = None
    ) -> OutboundIdentity:
        """The node's identity as its settings say (the sealer reads the key on first use)."""
        return cls(
            store,
            issuer=settings.issuer,
            sealer=functools.partial(sealer_for, settings),
            clock=clock,
            rotate_after_seconds=settings.oidc_key_rotate_days * 86400.0,
            publish_seconds=settings.oidc_key_publish_seconds,
        )

    def seal(self, text: str) -> str:
        """``text`` sealed with the node's key (a client certificate's private key)."""
        return self._sealer().seal_text(text)

    async def present(self, delivery: Delivery) -> Presented:
        """What ``delivery``'s request carries. Raises :class:`IdentityError`."""
        task = delivery.task
        now = self._clock.now()
        headers: dict[str, str] = {}
        if held_id(task.payload_ref) is not None:
            try:
                headers[HEADER_PAYLOAD_URL] = self.payloads.url(
                    self.issuer, task.id, task.tenant_id, delivery.attempt, now
                )
            except SealError as exc:
                raise IdentityError(str(exc), retryable=True) from None
        auth = task.target.get("auth")
        if not auth or (isinstance(auth, Mapping) and "credential" in auth):
            return Presented(headers)
        if not isinstance(auth, Mapping) or len(auth) != 1:
            raise IdentityError("target.auth must name exactly one kind", retryable=False)
        ((kind, spec),) = auth.items()
        if kind == "oidc" and isinstance(spec, Mapping):
            headers["authorization"] = "Bearer " + await self._id_token(task, spec)
            return Presented(headers)
        if kind == "mtls" and isinstance(spec, str):
            key, context = await self._client_tls(task.tenant_id, spec)
            return Presented(headers, context, key)
        raise IdentityError(f"target.auth kind {kind!r} is not served here", retryable=False)

    async def _id_token(self, task: Any, spec: Mapping[str, Any]) -> str:
        if not self.issuer:
            raise IdentityError(
                "target.auth.oidc needs the node's DUETIME_PUBLIC_URL (the token's issuer)",
                retryable=True,
            )
        audience = spec.get("audience") or task.target.get("url")
        subject = subject_of(task.tenant_id, spec.get("service_account"))
        try:
            return await self.keys.id_token(
                issuer=self.issuer,
                audience=str(audience),
                subject=subject,
                tenant_id=task.tenant_id,
            )
        except (SealError, LookupError) as exc:
            raise IdentityError(f"cannot sign an ID token: {exc}", retryable=True) from None

    async def _client_tls(self, tenant_id: str, name: str) -> tuple[str, ssl.SSLContext]:
        now = self._clock.now()
        cached = self._certs.get((tenant_id, name))
        if cached is not None and (now - cached[0]).total_seconds() < CERT_REFRESH_SECONDS:
            return cached[1], cached[2]
        cert = await self._store.client_certificate_get(tenant_id, name)
        if cert is None:
            self._certs.pop((tenant_id, name), None)
            raise IdentityError(
                f"no client certificate {name!r} (PUT /v1/client-certificates/{name})",
                retryable=False,
            )
        key = f"{tenant_id}/{name}/{cert.fingerprint}/{cert.updated_at.timestamp()}"
        if cached is not None and cached[1] == key:
            self._certs[(tenant_id, name)] = (now, key, cached[2])
            return key, cached[2]
        try:
            pem = self._sealer().open_text(cert.private_key)
        except SealError as exc:
            raise IdentityError(str(exc), retryable=True) from None
        context = client_context(cert.certificate, pem, self._tls_base)
        if len(self._certs) >= 1024:
            self._certs.clear()
        self._certs[(tenant_id, name)] = (now, key, context)
        return key, context
