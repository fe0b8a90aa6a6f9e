"""``/v1/admin``: tenants and API keys, with the admin token (SPEC §3 "Operations")."""

from __future__ import annotations

import dataclasses
from typing import Any

from fastapi import APIRouter, Depends, Request
from starlette.responses import Response

from duetime.api import render
from duetime.api.convert import path_text
from duetime.api.deps import AdminCall, Services, admin_call, body_schema, json_body
from duetime.api.problems import problem_responses
from duetime.api.schemas import (
    ApiKeyOut,
    TenantAdminListOut,
    TenantAdminOut,
    TenantCreatedOut,
    TenantCreateIn,
    TenantQuotasIn,
)
from duetime.auth import hash_api_key, new_api_key
from duetime.errors import NotFound
from duetime.store.protocols import TenantStore
from duetime.types import Tenant, TenantQuotas, TenantUsage

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


async def _tenant_out(store: TenantStore, tenant: Tenant) -> dict[str, Any]:
    return _tenant_json(tenant, await store.tenant_usage(tenant.id))


def _tenant_json(tenant: Tenant, usage: TenantUsage) -> dict[str, Any]:
    return {
        "id": tenant.id,
        "name": tenant.name,
        "created_at": tenant.created_at,
        "quotas": dataclasses.asdict(tenant.quotas),
        "usage": dataclasses.asdict(usage),
    }


async def _tenant(store: TenantStore, raw_id: str) -> Tenant:
    tenant = await store.tenant_get(path_text(raw_id, "tenant_id"))
    if tenant is None:
        raise NotFound(f"no tenant {raw_id!r}")
    return tenant


@router.get(
    "/tenants",
    summary="List tenants with their quotas and usage",
    responses={200: {"model": TenantAdminListOut, "description": "Every tenant, oldest first"}},
)
async def list_tenants(admin: AdminCall) -> Response:
    """Every tenant, oldest first, with its quotas and what counts against them."""
    tenants = await admin.store.tenant_list()
    usage = await admin.store.tenant_usage_many([t.id for t in tenants])
    return render.json_response({"items": [_tenant_json(t, usage[t.id]) for t in tenants]})


@router.get(
    "/tenants/{tenant_id}",
    summary="A tenant with its quotas and usage",
    responses={
        200: {"model": TenantAdminOut, "description": "The tenant"},
        **problem_responses(404),
    },
)
async def get_tenant(tenant_id: str, admin: AdminCall) -> Response:
    return render.json_response(
        await _tenant_out(admin.store, await _tenant(admin.store, tenant_id))
    )


@router.patch(
    "/tenants/{tenant_id}",
    summary="Change a tenant's quotas",
    openapi_extra=body_schema(TenantQuotasIn),
    responses={
        200: {"model": TenantAdminOut, "description": "The tenant"},
        **problem_responses(404),
    },
)
async def patch_tenant(tenant_id: str, admin: AdminCall, request: Request) -> Response:
    """Set, change or remove (``null``) quotas; fields left out keep their value. The change
    holds on this node at once and on every other node within 5 s."""
    tenant = await _tenant(admin.store, tenant_id)
    body = await json_body(request, TenantQuotasIn)
    updated = await tenant_quotas_change(admin, tenant, body)
    return render.json_response(await _tenant_out(admin.store, updated))


async def tenant_quotas_change(admin: Services, tenant: Tenant, body: TenantQuotasIn) -> Tenant:
    """Apply a quotas change: the fields ``body`` sets (``null`` removes a limit, and puts
    ``weight`` back to 1), the others kept; this node's quota gate forgets the old ones."""
    changes = {name: getattr(body, name) for name in body.model_fields_set}
    if changes.get("weight", 1) is None:
        changes["weight"] = 1
    quotas: TenantQuotas = dataclasses.replace(tenant.quotas, **changes)
    updated = await admin.store.tenant_quotas_put(tenant.id, quotas)
    admin.quotas.forget(tenant.id)
    return updated


@router.delete(
    "/tenants/{tenant_id}",
    status_code=204,
    summary="Delete a tenant that has no work left",
    responses={204: {"description": "Deleted"}, **problem_responses(404, 409)},
)
async def delete_tenant(tenant_id: str, admin: AdminCall) -> Response:
    """Delete the tenant with its keys, signing secrets, notification settings and queues. A
    tenant with tasks not ended or with schedules is refused (409, saying what is left): cancel
    and delete them first. Its ended tasks stay until retention removes them; its history stays.
    Its keys stop working on this node at once and on others within the auth cache's 5 s."""
    tenant = await _tenant(admin.store, tenant_id)
    if not await admin.store.tenant_delete(tenant.id):
        raise NotFound(f"no tenant {tenant_id!r}")
    admin.auth.cache.evict_tenant(tenant.id)
    admin.quotas.forget(tenant.id)
    return Response(status_code=204)
