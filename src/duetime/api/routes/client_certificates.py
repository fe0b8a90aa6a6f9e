"""``/v1/client-certificates``: the tenant's TLS client certificates, presented by webhooks
whose target says ``"auth": {"mtls": "<name>"}`` (docs/security.md "Outbound identity").

The private key is sealed before it is stored and is never returned: answers carry the name,
subject, SHA-256 fingerprint and validity of the certificate only.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field
from starlette.responses import Response

from duetime.api import render
from duetime.api.deps import TenantCall, body_schema, json_body
from duetime.api.fields import rules
from duetime.api.problems import problem_responses
from duetime.api.routes.wellknown import identity
from duetime.api.schemas import StrictModel
from duetime.delivery.client_tls import MAX_PEM_CHARS, check_client_certificate
from duetime.errors import NotFound, ValidationError
from duetime.types import ClientCertificate

router = APIRouter(
    prefix="/v1/client-certificates",
    tags=["identity"],
    responses=problem_responses(400, 401, 422, 503),
)

CERTIFICATE_NAME = r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}"
"""A client certificate's name, unanchored."""
_NAME = re.compile(CERTIFICATE_NAME)


class ClientCertificateIn(StrictModel):
    """A PEM certificate chain (the leaf first, then intermediates) and the leaf's unencrypted
    PEM private key."""

    model_config = ConfigDict(
        json_schema_extra=rules(("certificate", ""), ("private_key", ""))  # what PEM holds
    )

    certificate: Annotated[str, Field(min_length=1, max_length=MAX_PEM_CHARS)]
    private_key: Annotated[str, Field(min_length=1, max_length=MAX_PEM_CHARS)]


class ClientCertificateOut(BaseModel):
    name: str
    subject: str
    fingerprint_sha256: str
    not_after: datetime
    created_at: datetime
    updated_at: datetime


class ClientCertificateListOut(BaseModel):
    items: list[ClientCertificateOut]


def _out(cert: ClientCertificate) -> dict[str, Any]:
    return {
        "name": cert.name,
        "subject": cert.subject,
        "fingerprint_sha256": cert.fingerprint,
        "not_after": cert.not_after,
        "created_at": cert.created_at,
        "updated_at": cert.updated_at,
    }


def _name(raw: str) -> str:
    if not _NAME.fullmatch(raw):
        raise ValidationError(
            "1-100 letters, digits, '.', '_' or '-', starting with a letter or digit", "name"
        )
    return raw


@router.put(
    "/{name}",
    summary="Store a TLS client certificate",
    openapi_extra=body_schema(ClientCertificateIn),
    responses={
        200: {"model": ClientCertificateOut, "description": "Replaced"},
        201: {"model": ClientCertificateOut, "description": "Created"},
        **problem_responses(413),
    },
)
async def put_certificate(name: str, call: TenantCall, request: Request) -> Response:
    """Create or replace the certificate ``name``: the key must be the leaf's and the leaf
    valid now. Deliveries present the new one within 30 s."""
    name = _name(name)
    body = await json_body(request, ClientCertificateIn)
    now = await call.store.now()
    checked = check_client_certificate(body.certificate, body.private_key, now=now)
    sealed = identity(request).seal(checked.key_pem)
    cert, created = await call.store.client_certificate_put(
        call.tenant_id,
        name,
        checked.chain_pem,
        sealed,
        checked.fingerprint,
        checked.subject,
        checked.not_after,
    )
    return render.json_response(_out(cert), 201 if created else 200)


@router.get(
    "",
    summary="The tenant's TLS client certificates",
    responses={200: {"model": ClientCertificateListOut, "description": "By name"}},
)
async def list_certificates(call: TenantCall) -> Response:
    certs = await call.store.client_certificate_list(call.tenant_id)
    return render.json_response({"items": [_out(c) for c in certs]})


@router.get(
    "/{name}",
    summary="One TLS client certificate",
    responses={
        200: {"model": ClientCertificateOut, "description": "The certificate (never its key)"},
        **problem_responses(404),
    },
)
async def get_certificate(name: str, call: TenantCall) -> Response:
    cert = await call.store.client_certificate_get(call.tenant_id, _name(name))
    if cert is None:
        raise NotFound(f"no client certificate {name!r}")
    return render.json_response(_out(cert))


@router.delete(
    "/{name}",
    status_code=204,
    summary="Delete a TLS client certificate",
    responses={204: {"description": "Deleted"}, **problem_responses(404)},
)
async def delete_certificate(name: str, call: TenantCall) -> Response:
    """Targets that name it fail (not retried) from then on."""
    if not await call.store.client_certificate_delete(call.tenant_id, _name(name)):
        raise NotFound(f"no client certificate {name!r}")
    return Response(status_code=204)
