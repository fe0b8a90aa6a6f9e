"""``/v1/admin/sessions``: ending dashboard sessions server side (docs/security.md "Dashboard
sessions"), with the admin token."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel
from starlette.responses import Response

from duetime.api import render
from duetime.api.deps import AdminCall, admin_call, body_schema, json_body
from duetime.api.problems import problem_responses
from duetime.api.schemas import Name, StrictModel
from duetime.errors import NotFound

router = APIRouter(
    prefix="/v1/admin/sessions",
    tags=["admin"],
    dependencies=[Depends(admin_call)],
    responses=problem_responses(400, 401, 422, 503),
)


class SessionRevokeIn(StrictModel):
    """Whose dashboard sessions to end: one tenant's (``tenant_id``), or every session, the
    admin's included (no ``tenant_id``)."""

    tenant_id: Name | None = None


class SessionRevokeOut(BaseModel):
    revoked: int
    """How many sessions ended."""


@router.post(
    "/revoke",
    summary="End dashboard sessions",
    openapi_extra=body_schema(SessionRevokeIn, required=False),
    responses={
        200: {"model": SessionRevokeOut, "description": "How many sessions ended"},
        **problem_responses(404),
    },
)
async def revoke_sessions(admin: AdminCall, request: Request) -> Response:
    """End every dashboard session of one tenant, or all of them: their cookies stop working at
    once, on every node. API keys are not touched (delete a key to stop the API calls too)."""
    body = await json_body(request, SessionRevokeIn, optional=True)
    if body.tenant_id is not None and await admin.store.tenant_get(body.tenant_id) is None:
        raise NotFound(f"no tenant {body.tenant_id!r}")
    revoked = await admin.store.ui_session_revoke(body.tenant_id)
    return render.json_response({"revoked": revoked})
