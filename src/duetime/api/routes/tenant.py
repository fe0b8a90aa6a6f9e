"""``/v1/tenant``: the calling tenant and its webhook signing secrets (SPEC §3 "Tenant")."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from duetime.api import render
from duetime.api.deps import TenantCall, body_schema, json_body
from duetime.api.problems import problem_responses
from duetime.api.schemas import RotateIn, TenantOut
from duetime.auth import new_signing_secret
from duetime.delivery.signing import MAX_LIVE_SECRETS
from duetime.errors import Conflict, NotFound

router = APIRouter(
    prefix="/v1/tenant", tags=["tenant"], responses=problem_responses(400, 401, 422, 503)
)


@router.get(
    "",
    summary="The calling tenant",
    responses={200: {"model": TenantOut, "description": "The tenant"}, **problem_responses(404)},
)
async def get_tenant(call: TenantCall) -> Response:
    """The tenant with its live signing secrets, oldest first."""
    found = await call.store.tenant_get(call.tenant_id)
    if found is None:
        raise NotFound("the tenant of this key no longer exists")
    secrets = await call.store.signing_secret_list(call.tenant_id)
    return render.json_response(render.tenant(found, secrets))


@router.post(
    "/signing-secrets/rotate",
    summary="Add a new signing secret",
    openapi_extra=body_schema(RotateIn, required=False),
    responses={
        200: {"model": TenantOut, "description": "The tenant afterwards"},
        **problem_responses(404, 409, 422),
    },
)
async def rotate_signing_secret(call: TenantCall, request: Request) -> Response:
    """Add a new ``whsec_`` secret; the older live ones expire after ``overlap_seconds``
    (default 86400), and until then deliveries carry one signature per live secret.

    At most 3 secrets are live: when 3 are, a rotation with a non-zero overlap is refused (409,
    naming when the oldest expires) rather than cutting off a secret receivers may still use;
    ``overlap_seconds: 0`` always works and expires every older secret at once."""
    found = await call.store.tenant_get(call.tenant_id)
    if found is None:
        raise NotFound("the tenant of this key no longer exists")
    overlap = (await json_body(request, RotateIn, optional=True)).overlap_seconds
    if overlap > 0:
        live = await call.store.signing_secret_list(call.tenant_id)
        if len(live) >= MAX_LIVE_SECRETS:
            expiries = [s.expires_at for s in live if s.expires_at is not None]
            when = f" (the oldest expires at {min(expiries).isoformat()})" if expiries else ""
            raise Conflict(
                f"{len(live)} signing secrets are live, the most allowed is {MAX_LIVE_SECRETS}"
                f"{when}; wait, or rotate with overlap_seconds 0 to expire the older ones now"
            )
    secrets = await call.store.signing_secret_rotate(call.tenant_id, new_signing_secret(), overlap)
    return render.json_response(render.tenant(found, secrets))
