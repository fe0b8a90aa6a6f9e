"""How a webhook target authenticates: its ``auth`` object, one kind per key.

``"auth": {"credential": "<name>"}`` names a tenant's named credential
(:mod:`duetime.delivery.credentials`), read when the task is delivered; ``{"oidc": {...}}``
presents an OIDC ID token this service signs, and ``{"mtls": "<name>"}`` the tenant's TLS client
certificate of that name (:mod:`duetime.delivery.outbound`). The object's one key
says its kind, so other kinds join beside it: a new kind is a model with that ``KIND`` (and its
fields under that key), named in :data:`AUTH_KINDS` and added as a tagged member of
:data:`TargetAuth`; the webhook deliverer then says how it authenticates a request.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

from pydantic import (
    Discriminator,
    Field,
    SerializerFunctionWrapHandler,
    Tag,
    model_serializer,
)

from duetime.api.fields import NO_CONTROL, StrictModel

__all__ = [
    "AUTH_KINDS",
    "CREDENTIAL_NAME",
    "CertificateName",
    "CredentialAuth",
    "CredentialName",
    "MtlsAuth",
    "OidcAuth",
    "TargetAuth",
]

CREDENTIAL_NAME = r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}"
"""A named credential's name, unanchored."""
CredentialName = Annotated[
    str,
    Field(
        pattern=f"^{CREDENTIAL_NAME}$",
        description="1-128 characters: letters, digits, `.`, `_`, `-`; starts alphanumeric.",
    ),
]


class CredentialAuth(StrictModel):
    """Authenticate with the tenant's named credential (``PUT /v1/credentials/{name}``), read
    when the task is delivered: a rotation of the credential changes no task."""

    KIND: ClassVar[str] = "credential"
    credential: CredentialName


CertificateName = Annotated[
    str,
    Field(
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$",
        description="1-100 characters: letters, digits, `.`, `_`, `-`; starts alphanumeric.",
    ),
]


class OidcToken(StrictModel):
    """The ID token's claims a target may choose (unset ones are left out when stored)."""

    audience: Annotated[str, Field(min_length=1, max_length=2048, pattern=NO_CONTROL)] | None = (
        Field(default=None, description="The token's `aud`; default: the target's URL.")
    )
    service_account: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,99}$")] | None = (
        Field(default=None, description="The token's `sub` is `<tenant id>/<service_account>`.")
    )

    @model_serializer(mode="wrap")
    def _sparse(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return {k: v for k, v in handler(self).items() if v is not None}


class OidcAuth(StrictModel):
    """Present an OIDC ID token (``Authorization: Bearer <JWT>``) signed by this service; the
    receiver verifies it against ``/.well-known/jwks.json``."""

    KIND: ClassVar[str] = "oidc"
    oidc: OidcToken


class MtlsAuth(StrictModel):
    """Present the tenant's TLS client certificate of this name (``PUT
    /v1/client-certificates/{name}``); the target's URL must be https."""

    KIND: ClassVar[str] = "mtls"
    mtls: CertificateName


AUTH_KINDS: tuple[str, ...] = (CredentialAuth.KIND, OidcAuth.KIND, MtlsAuth.KIND)
"""Every kind of target ``auth`` (see the module)."""


def auth_kind(value: Any) -> str | None:
    """The kind of an ``auth`` object: the key naming a known kind (``{"credential": ...}``)."""
    if isinstance(value, dict):
        return next((key for key in value if key in AUTH_KINDS), None)
    kind = getattr(value, "KIND", None)
    return kind if isinstance(kind, str) else None


TargetAuth = Annotated[
    Annotated[CredentialAuth, Tag(CredentialAuth.KIND)]
    | Annotated[OidcAuth, Tag(OidcAuth.KIND)]
    | Annotated[MtlsAuth, Tag(MtlsAuth.KIND)],
    Discriminator(
        auth_kind,
        custom_error_type="auth_kind",
        custom_error_message="give an object with one of: credential, oidc, mtls",
    ),
]
"""How a webhook authenticates, by kind: ``{"credential": "<name>"}``, ``{"oidc": {...}}`` or
``{"mtls": "<name>"}``."""
