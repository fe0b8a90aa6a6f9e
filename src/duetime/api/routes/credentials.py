"""``/v1/credentials``: the calling tenant's named credentials (docs/security.md "Named
credentials"; :mod:`duetime.delivery.credentials`).

Write-only: ``PUT`` takes the secret values and seals them with the node's key ring before they
are stored; every answer (``PUT``, ``GET``, the list) shows the name, the kind, the fingerprint
(``***`` and 8 hex characters of a keyed hash: it changes when the secret does) and the times,
never a value. A target names a credential with ``"auth": {"credential": "<name>"}``; it is read
when the task is delivered, so replacing it changes no task.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Request
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, RootModel
from starlette.responses import Response

from duetime.api import render
from duetime.api.deps import TenantCall, body_schema, json_body
from duetime.api.fields import (
    HEADER_NAME,
    HEADER_VALUE,
    StrictModel,
    check_headers,
    clean_text,
    rules,
)
from duetime.api.problems import problem_responses
from duetime.api.target_auth import CREDENTIAL_NAME
from duetime.delivery.credentials import seal_credential
from duetime.errors import NotFound, ValidationError
from duetime.secrets.sealed import fingerprint_of, shown
from duetime.types import Credential

router = APIRouter(
    prefix="/v1/credentials",
    tags=["credentials"],
    responses=problem_responses(400, 401, 422, 503),
)

NamePath = Annotated[
    str,
    Path(
        description="1-128 characters: letters, digits, `.`, `_`, `-`; starts alphanumeric.",
        max_length=128,
    ),
]
_NAME = re.compile(CREDENTIAL_NAME)


def _header_name(name: str) -> str:
    check_headers({name: ""})  # the rule of a target's header names: valid, not duetime's own
    return name


def _header_value(value: str) -> str:
    check_headers({"x": value})  # ... and of its values: no control character but tab
    return value


class HeaderCredentialIn(StrictModel):
    """A header the webhook carries as given (``Authorization: Bearer ...``, ``X-Api-Key``)."""

    kind: Literal["header"]
    model_config = ConfigDict(json_schema_extra=rules(("header", "header ")))  # duetime's own

    header: Annotated[
        str, Field(pattern=f"^{HEADER_NAME}$", max_length=256), AfterValidator(_header_name)
    ]
    value: Annotated[
        str,
        Field(min_length=1, max_length=8192, pattern=HEADER_VALUE),
        AfterValidator(_header_value),
    ]


class BasicCredentialIn(StrictModel):
    """HTTP Basic auth: ``Authorization: Basic base64(username:password)``."""

    kind: Literal["basic"]
    username: Annotated[
        str,
        Field(min_length=1, max_length=1024, pattern=r"^[^:\x00-\x1f\x7f-\x9f]*$"),
        AfterValidator(clean_text),
    ]
    password: Annotated[
        str, Field(max_length=1024, pattern=HEADER_VALUE), AfterValidator(_header_value)
    ]


class CredentialIn(RootModel[HeaderCredentialIn | BasicCredentialIn]):
    """A named credential's secret values, by ``kind``."""

    root: Annotated[HeaderCredentialIn | BasicCredentialIn, Field(discriminator="kind")]


class CredentialOut(BaseModel):
    """A credential as answers show it: never a value."""

    name: str
    kind: Literal["header", "basic"]
    fingerprint: str = Field(
        description="`***` and 8 hex characters of a keyed hash of the secret values: equal "
        "fingerprints mean the same secret (never reversible)."
    )
    created_at: datetime
    updated_at: datetime


class CredentialListOut(BaseModel):
    items: list[CredentialOut]


def credential_json(c: Credential) -> dict[str, Any]:
    """A credential as the API (and the dashboard) shows it: name, kind, fingerprint, times."""
    return {
        "name": c.name,
        "kind": c.kind,
        "fingerprint": shown(fingerprint_of(c.secret)),
        "created_at": c.created_at,
        "updated_at": c.updated_at,
    }


def _name(name: str) -> str:
    if not _NAME.fullmatch(name):
        raise ValidationError(
            "must be 1-128 letters, digits, '.', '_' or '-', starting with a letter or digit",
            "name",
        )
    return name


@router.put(
    "/{name}",
    summary="Create or replace a named credential (write-only)",
    openapi_extra=body_schema(CredentialIn),
    responses={
        200: {"model": CredentialOut, "description": "Replaced"},
        201: {"model": CredentialOut, "description": "Created"},
        **problem_responses(409, 413),
    },
)
async def put(name: NamePath, call: TenantCall, request: Request) -> Response:
    """Seal the secret values and store them under ``name``; a target uses them with
    ``"auth": {"credential": "<name>"}``. The answer shows the fingerprint, never a value."""
    _name(name)
    values = (await json_body(request, CredentialIn)).root
    sealer = call.builder.sealer
    assert sealer is not None, "create_app gives every builder the node's sealer"
    secret = seal_credential(sealer.ring, call.tenant_id, values.model_dump())
    found, created = await call.store.credential_put(call.tenant_id, name, values.kind, secret)
    return render.json_response(credential_json(found), 201 if created else 200)


@router.get(
    "",
    summary="List the named credentials",
    responses={200: {"model": CredentialListOut, "description": "Every credential, by name"}},
)
async def list_credentials(call: TenantCall) -> Response:
    found = await call.store.credential_list(call.tenant_id)
    return render.json_response({"items": [credential_json(c) for c in found]})


@router.get(
    "/{name}",
    summary="Read a named credential (name, kind, fingerprint)",
    responses={
        200: {"model": CredentialOut, "description": "The credential"},
        **problem_responses(404),
    },
)
async def get_credential(name: NamePath, call: TenantCall) -> Response:
    found = await call.store.credential_get(call.tenant_id, _name(name))
    if found is None:
        raise NotFound(f"no credential {name!r}")
    return render.json_response(credential_json(found))


@router.delete(
    "/{name}",
    status_code=204,
    summary="Delete a named credential",
    responses=problem_responses(404),
)
async def delete_credential(name: NamePath, call: TenantCall) -> Response:
    """Remove it. Tasks whose target names it fail their next attempt (without a retry) until
    a credential of that name is put again and they are replayed."""
    if not await call.store.credential_delete(call.tenant_id, _name(name)):
        raise NotFound(f"no credential {name!r}")
    return Response(status_code=204)
