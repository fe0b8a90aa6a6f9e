"""``/v1/admin``: tenants and API keys, with the admin token (SPEC §3 "Operations")."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from starlette.responses import Response

from duetime.api import render
from duetime.api.convert import path_text
from duetime.api.deps import AdminCall, admin_call, body_schema, json_body
from duetime.api.problems import problem_responses
from duetime.api.schemas import ApiKeyOut, TenantCreatedOut, TenantCreateIn
from duetime.auth import hash_api_key, new_api_key
from duetime.errors import NotFound

router = APIRouter(
    prefix="/v1/admin",
    tags=["admin"],
    dependencies=[Depends(admin_call)],
    responses=problem_responses(400, 401, 422, 503),
)


@router.post(
    "/tenants",
    status_code=201,
    summary="Create a tenant and its first API key",
    openapi_extra=body_schema(TenantCreateIn),
    responses={
        201: {"model": TenantCreatedOut, "description": "Created"},
        **problem_responses(422),
    },
)
async def create_tenant(admin: AdminCall, request: Request) -> Response:
    """A new tenant with a signing secret and one API key; the key is shown only here."""
    body = await json_body(request, TenantCreateIn)
    tenant = await admin.store.tenant_create(body.name)
    key_id, api_key = new_api_key()
    await admin.store.api_key_create(tenant.id, key_id, hash_api_key(api_key))
    return render.json_response(
        {"id": tenant.id, "name": tenant.name, "api_key": api_key, "key_id": key_id}, 201
    )


@router.post(
    "/tenants/{tenant_id}/keys",
    status_code=201,
    summary="Add an API key to a tenant",
    responses={201: {"model": ApiKeyOut, "description": "Created"}, **problem_responses(404)},
)
async def create_key(tenant_id: str, admin: AdminCall) -> Response:
    """A new key for the tenant; the key is shown only here."""
    key_id, api_key = new_api_key()
    tenant_id = path_text(tenant_id, "tenant_id")
    key = await admin.store.api_key_create(tenant_id, key_id, hash_api_key(api_key))
    body = {
        "id": key.id,
        "tenant_id": key.tenant_id,
        "api_key": api_key,
        "created_at": key.created_at,
    }
    return render.json_response(body, 201)


@router.delete(
    "/keys/{key_id}",
    status_code=204,
    summary="Delete an API key",
    responses={204: {"description": "Deleted"}, **problem_responses(404)},
)
async def delete_key(key_id: str, admin: AdminCall) -> Response:
    """Delete a key. It stops working on this node at once and on every other node within the
    auth cache's lifetime (5 s)."""
    if not await admin.store.api_key_delete(path_text(key_id, "key_id")):
        raise NotFound(f"no API key {key_id!r}")
    admin.auth.cache.evict_key(key_id)
    return Response(status_code=204)
