"""``/.well-known``: the public keys that verify the OIDC ID tokens duetime presents to targets
(docs/security.md "Outbound identity"). No auth: a receiver fetches them to verify."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel
from starlette.responses import Response

from duetime.api import render
from duetime.api.deps import services
from duetime.api.problems import problem_responses
from duetime.delivery.identity import ALGORITHM
from duetime.delivery.outbound import OutboundIdentity
from duetime.errors import NotFound

router = APIRouter(prefix="/.well-known", tags=["identity"], responses=problem_responses(503))

CACHE_SECONDS = 300
"""Verifiers may cache the key set this long (a new key is published well before it signs:
``DUETIME_OIDC_KEY_PUBLISH_SECONDS`` should stay above this)."""


class JwksOut(BaseModel):
    keys: list[dict[str, Any]]


class OpenIdConfigurationOut(BaseModel):
    issuer: str
    jwks_uri: str
    id_token_signing_alg_values_supported: list[str]
    response_types_supported: list[str]
    subject_types_supported: list[str]


def identity(request: Request) -> OutboundIdentity:
    """The app's outbound identity (:func:`duetime.api.app.create_app` makes it)."""
    found: OutboundIdentity = request.app.state.identity
    return found


@router.get(
    "/jwks.json",
    summary="The public keys of duetime's ID tokens",
    responses={200: {"model": JwksOut, "description": "A JSON Web Key Set"}},
)
async def jwks(request: Request) -> Response:
    """Every key that signs, will sign soon, or signed a token that may still be valid."""
    response = render.json_response(await identity(request).keys.jwks())
    response.headers["Cache-Control"] = f"public, max-age={CACHE_SECONDS}"
    return response


@router.get(
    "/openid-configuration",
    summary="OpenID discovery for duetime's ID tokens",
    responses={
        200: {"model": OpenIdConfigurationOut, "description": "Issuer and key set"},
        **problem_responses(404),
    },
)
async def openid_configuration(request: Request) -> Response:
    """The issuer and where its keys are, for verifiers that discover them; 404 without
    ``DUETIME_PUBLIC_URL`` (no issuer)."""
    issuer = services(request).settings.issuer
    if not issuer:
        raise NotFound("this node has no issuer: DUETIME_PUBLIC_URL is not set")
    body = {
        "issuer": issuer,
        "jwks_uri": f"{issuer}/.well-known/jwks.json",
        "id_token_signing_alg_values_supported": [ALGORITHM],
        "response_types_supported": ["id_token"],
        "subject_types_supported": ["public"],
    }
    response = render.json_response(body)
    response.headers["Cache-Control"] = f"public, max-age={CACHE_SECONDS}"
    return response
