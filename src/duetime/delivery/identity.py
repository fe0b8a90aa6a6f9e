"""Outbound identity: the OIDC ID tokens a webhook presents, and the key ring that signs them.

A target that says ``"auth": {"oidc": {"audience": "https://api.example.com"}}`` receives
``Authorization: Bearer <JWT>``, as Cloud Tasks' ``oidcToken`` does: an ES256 JWT with ``iss``
the node's ``DUETIME_PUBLIC_URL``, ``aud`` the audience given (else the target's URL), ``sub``
the tenant's id (or ``<tenant id>/<service_account>`` when the target names one: a tenant can
never speak as another), ``duetime_tenant``, ``iat``, ``exp`` (:data:`TOKEN_SECONDS` later) and a
random ``jti``. Receivers verify it with any JWT library against the public keys at
``GET /.well-known/jwks.json``.

**The key ring.** Keys live in the store (private keys sealed with the node's secret key,
:mod:`duetime.delivery.sealing`), so every node signs with the same key and publishes the same
set. One key per *generation*: the signing key at time *t* is the newest generation whose
``signs_from`` has come. Rotation (``duetime keys rotate``, or automatically once the newest key
is ``DUETIME_OIDC_KEY_ROTATE_DAYS`` old) adds the next generation, published at once but signing
only ``DUETIME_OIDC_KEY_PUBLISH_SECONDS`` later, so verifiers that cache the key set fetch it
before any token needs it. A key stays published until :data:`TOKEN_SECONDS` (plus
:data:`CLOCK_SKEW_SECONDS`) after its successor started signing, when no token it signed is
still valid; then it is deleted. Nodes rotating at once make one key (the generation is unique).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from duetime.clock import Clock
from duetime.delivery.sealing import TargetSealer
from duetime.store.protocols import SigningKeyStore
from duetime.types import SigningKey

__all__ = [
    "ALGORITHM",
    "CLOCK_SKEW_SECONDS",
    "TOKEN_SECONDS",
    "KeyRing",
    "new_signing_key",
    "subject_of",
]

ALGORITHM = "ES256"
TOKEN_SECONDS = 300
"""How long an ID token is valid."""
CLOCK_SKEW_SECONDS = 60
"""Verifiers' leeway: a retired key stays published this much longer."""
REFRESH_SECONDS = 30.0
"""How long a process trusts its copy of the key ring before reading the store again."""


@dataclass(frozen=True, slots=True)
class NewKey:
    """A generated key pair: its id, public JWK and PEM private key (not sealed yet)."""

    kid: str
    public_jwk: dict[str, Any]
    private_pem: str


def new_signing_key() -> NewKey:
    """A fresh P-256 key pair for ES256."""
    private = ec.generate_private_key(ec.SECP256R1())
    kid = secrets.token_urlsafe(12)
    public = jwt.algorithms.ECAlgorithm.to_jwk(private.public_key(), as_dict=True)
    jwk = {**public, "kid": kid, "use": "sig", "alg": ALGORITHM}
    pem = private.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    return NewKey(kid, jwk, pem)


def subject_of(tenant_id: str, service_account: str | None) -> str:
    """The ``sub`` of a tenant's tokens: its id, or ``<tenant id>/<service account>``."""
    return tenant_id if not service_account else f"{tenant_id}/{service_account}"


def signing_key_at(keys: list[SigningKey], now: datetime) -> SigningKey | None:
    """The key that signs at ``now``: the newest generation whose ``signs_from`` has come."""
    live = [k for k in keys if k.signs_from <= now]
    return max(live, key=lambda k: k.generation) if live else None


def published_at(keys: list[SigningKey], now: datetime) -> list[SigningKey]:
    """The keys to publish at ``now``: every key but those whose successor started signing
    long enough ago that no token they signed is still valid."""
    keep = timedelta(seconds=TOKEN_SECONDS + CLOCK_SKEW_SECONDS)
    by_generation = sorted(keys, key=lambda k: k.generation)
    out: list[SigningKey] = []
    if not by_generation:
        return out
    for key, later in zip(by_generation, [*by_generation[1:], None], strict=True):
        if later is None or now < later.signs_from + keep:
            out.append(key)
    return out


class KeyRing:
    """The node's view of the signing keys in ``store`` (see the module): bootstraps the first
    key, rotates by age, prunes retired keys, signs and publishes.

    ``sealer`` is called once, on first use (it may read or make the node's key file);
    ``rotate_after_seconds`` is the age at which the newest key is replaced;
    ``publish_seconds`` how long a new key is published before it signs."""

    def __init__(
        self,
        store: SigningKeyStore,
        sealer: Callable[[], TargetSealer],
        clock: Clock,
        *,
        rotate_after_seconds: float,
        publish_seconds: float,
    ) -> None:
        self._store = store
        self._sealer_factory = sealer
        self._sealer: TargetSealer | None = None
        self._clock = clock
        self.rotate_after_seconds = rotate_after_seconds
        self.publish_seconds = publish_seconds
        self._keys: list[SigningKey] = []
        self._read_at: datetime | None = None
        self._private: dict[str, ec.EllipticCurvePrivateKey] = {}  # kid -> opened key

    def _seal(self) -> TargetSealer:
        if self._sealer is None:
            self._sealer = self._sealer_factory()
        return self._sealer

    async def keys(self, *, fresh: bool = False) -> list[SigningKey]:
        """The stored keys (read again after :data:`REFRESH_SECONDS`, or with ``fresh``),
        after making sure one signs now and the newest is not older than the rotation age."""
        now = self._clock.now()
        stale = self._read_at is None or (now - self._read_at).total_seconds() >= REFRESH_SECONDS
        if fresh or stale:
            self._keys = await self._maintained(now)
            self._read_at = now
        return self._keys

    async def upkeep(self) -> None:
        """Rotate by age and prune retired keys, once any key exists (a node that never
        presented an ID token makes none)."""
        if await self._store.signing_key_list():
            await self.keys(fresh=True)

    async def _maintained(self, now: datetime) -> list[SigningKey]:
        keys = await self._store.signing_key_list()
        newest = keys[-1] if keys else None
        if newest is None:
            await self._add(1, 0.0)
        elif (now - newest.created_at).total_seconds() >= self.rotate_after_seconds:
            await self._add(newest.generation + 1, self.publish_seconds)
        else:
            retired = [k.kid for k in keys if k not in published_at(keys, now)]
            if not retired:
                return keys
            await self._store.signing_key_delete(retired)
        return await self._store.signing_key_list()

    async def _add(self, generation: int, signs_in_seconds: float) -> bool:
        made = new_signing_key()
        sealed = self._seal().seal_text(made.private_pem)
        return await self._store.signing_key_add(
            made.kid, generation, ALGORITHM, made.public_jwk, sealed, signs_in_seconds
        )

    async def rotate(self) -> SigningKey:
        """Add the next generation now (published at once, signing after
        ``publish_seconds``); returns it (another node's, when that one rotated first)."""
        keys = await self._store.signing_key_list()
        generation = keys[-1].generation + 1 if keys else 1
        await self._add(generation, self.publish_seconds if keys else 0.0)
        keys = await self.keys(fresh=True)
        return next(k for k in keys if k.generation >= generation)

    async def jwks(self) -> dict[str, list[Mapping[str, Any]]]:
        """The JSON Web Key Set to publish: every key that signs, will sign, or signed a token
        that may still be valid."""
        keys = await self.keys()
        return {"keys": [dict(k.public_jwk) for k in published_at(keys, self._clock.now())]}

    async def id_token(self, *, issuer: str, audience: str, subject: str, tenant_id: str) -> str:
        """A signed ID token (see the module). Raises ``SealError`` when this node cannot open
        the signing key (another DUETIME_SECRET_KEY sealed it)."""
        now = self._clock.now()
        key = signing_key_at(await self.keys(), now)
        if key is None:  # only future keys (stored by hand): read again, then give up
            key = signing_key_at(await self.keys(fresh=True), now)
            if key is None:
                raise LookupError("no signing key is valid yet")
        private = self._private.get(key.kid)
        if private is None:
            pem = self._seal().open_text(key.private_key)
            loaded = serialization.load_pem_private_key(pem.encode(), password=None)
            if not isinstance(loaded, ec.EllipticCurvePrivateKey):
                raise LookupError(f"signing key {key.kid} is not an EC key")
            private = loaded
            if len(self._private) > 16:
                self._private.clear()
            self._private[key.kid] = private
        issued = int(now.timestamp())
        claims = {
            "iss": issuer,
            "sub": subject,
            "aud": audience,
            "iat": issued,
            "exp": issued + TOKEN_SECONDS,
            "jti": secrets.token_urlsafe(12),
            "duetime_tenant": tenant_id,
        }
        return jwt.encode(claims, private, algorithm=ALGORITHM, headers={"kid": key.kid})
