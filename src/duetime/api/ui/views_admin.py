"""Tenants (admin sessions only): every tenant with its usage and quotas, picking the one the
other views show, and editing a tenant's quotas. Reads are the admin API's (``tenant_list``,
``tenant_usage``, as ``GET /v1/admin/tenants``); the pick is kept in the session's tenant cookie
(:data:`~duetime.api.ui.session.TENANT_COOKIE`); a quotas change is validated by the API's
:class:`~duetime.api.schemas.TenantQuotasIn` and made by the API's own
:func:`~duetime.api.routes.admin.tenant_quotas_change`.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import RedirectResponse, Response

from duetime.api.routes.admin import tenant_quotas_change
from duetime.api.schemas import TenantQuotasIn
from duetime.api.ui import forms
from duetime.api.ui.pages import error_page, html, serve
from duetime.api.ui.session import (
    TENANT_ID_MAX_CHARS,
    UiCall,
    authenticate,
    first,
    local_path,
    login_redirect,
    read_form,
    same_origin,
    set_flash,
    set_tenant,
)
from duetime.errors import Forbidden, NotFound, StoreUnavailable, Unauthorized
from duetime.history.actor import acting_as
from duetime.types import Tenant, TenantUsage

router = APIRouter(prefix="/ui")

PAGE_SIZE = 100
"""Tenants per page (their usage is read for the page only)."""
QUOTAS = (
    "max_pending_tasks",
    "max_creates_per_second",
    "max_concurrency",
    "max_schedules",
    "weight",
)
"""The quotas form's fields, as ``PATCH /v1/admin/tenants/{id}`` names them."""

REFUSED = (
    "only an admin session can list or switch tenants: a tenant key's session shows its tenant only"
)


def _admin_only(call: UiCall) -> None:
    if call.services.auth.dev_mode:
        raise Forbidden(
            "there is no admin in dev mode: every page shows tenant 'default'; start the server "
            "with DUETIME_ADMIN_TOKEN set and log in with it to see every tenant"
        )
    if not call.admin:
        raise Forbidden(REFUSED)


def _limit(used: int, limit: int | None) -> dict[str, Any]:
    """A usage figure against its quota (``full`` when it reached it)."""
    return {"used": used, "max": limit, "full": limit is not None and used >= limit}


def _row(call: UiCall, tenant: Tenant, usage: TenantUsage) -> dict[str, Any]:
    q = tenant.quotas
    return {
        "id": tenant.id,
        "name": tenant.name,
        "created_at": tenant.created_at,
        "pending": _limit(usage.pending_tasks, q.max_pending_tasks),
        "schedules": _limit(usage.schedules, q.max_schedules),
        "quotas": q,
        "current": tenant.id == call.tenant_id,
    }


async def _page(
    request: Request,
    call: UiCall,
    after: str,
    next: str,
    editing: dict[str, Any] | None = None,
    status_code: int = 200,
) -> Response:
    tenants = await call.store.tenant_list()  # oldest first
    start = 0
    if after:
        ids = [t.id for t in tenants]
        start = ids.index(after) + 1 if after in ids else 0
    page = tenants[start : start + PAGE_SIZE]
    usage = await call.store.tenant_usage_many([t.id for t in page])
    rows = [_row(call, t, usage[t.id]) for t in page]
    if editing is not None and "values" not in editing:
        quotas = editing["tenant"].quotas
        editing["values"] = {name: forms.shown(getattr(quotas, name)) for name in QUOTAS}
    return html(
        request,
        "tenants.html",
        status_code,
        call=call,
        now=await call.store.now(),
        items=rows,
        total=len(tenants),
        editing=editing,
        quota_fields=QUOTAS,
        next=local_path(next, "/ui"),
        next_after=page[-1].id if start + PAGE_SIZE < len(tenants) else None,
        paged=bool(after),
    )


async def _tenant(call: UiCall, tenant_id: str) -> Tenant:
    found = None
    if tenant_id and len(tenant_id) <= TENANT_ID_MAX_CHARS and tenant_id.isprintable():
        found = await call.store.tenant_get(tenant_id)
    if found is None:
        raise NotFound(f"no tenant {tenant_id[:TENANT_ID_MAX_CHARS]!r}")
    return found


@router.get("/tenants")
async def tenants_page(
    request: Request, after: str = "", next: str = "", edit: str = ""
) -> Response:
    """Every tenant; ``edit`` opens the quotas form of that tenant."""

    async def view(request: Request, call: UiCall) -> Response:
        _admin_only(call)
        editing = {"tenant": await _tenant(call, edit), "errors": {}} if edit else None
        return await _page(request, call, after, next, editing)

    return await serve(request, view, tenant_required=False)


@router.post("/tenants/{tenant_id}/quotas")
async def save_quotas(request: Request, tenant_id: str) -> Response:
    """Set the tenant's quotas as ``PATCH /v1/admin/tenants/{id}`` does with every field
    given (an empty field removes that limit; ``weight`` goes back to 1); refused values are
    shown next to their fields (422) and nothing changes."""
    if not same_origin(request):
        return error_page(request, 403, "refused: this form was not posted from this dashboard")

    async def view(request: Request, call: UiCall) -> Response:
        _admin_only(call)
        tenant = await _tenant(call, tenant_id)
        form = await read_form(request)
        parsed, errors = forms.validate(TenantQuotasIn, forms.body_of(form, QUOTAS))
        if parsed is None:
            typed = {name: first(form, name) for name in QUOTAS}
            editing = {"tenant": tenant, "values": typed, "errors": errors}
            return await _page(request, call, "", first(form, "next"), editing, 422)
        with acting_as(call.audit_actor()):
            updated = await tenant_quotas_change(call.services, tenant, parsed)
        response = RedirectResponse("/ui/tenants", 303)
        set_flash(response, request, f"tenant {updated.name}: quotas saved")
        return response

    return await serve(request, view, tenant_required=False)


@router.post("/tenants/select")
async def select_tenant(request: Request) -> Response:
    """Switch an admin session to another tenant; refused (403) for a tenant key's session."""
    if not same_origin(request):
        return error_page(request, 403, "refused: this form was not posted from this dashboard")
    try:
        call = await authenticate(request, tenant_required=False)
    except Unauthorized:
        return RedirectResponse(login_redirect(request), 303)
    try:
        _admin_only(call)
    except Forbidden as exc:
        return error_page(request, 403, exc.detail, call=call)
    form = await read_form(request)
    target = local_path(first(form, "next"), "/ui")
    wanted = first(form, "tenant_id").strip()
    tenant: Tenant | None = None
    problem = f"no tenant {wanted[:TENANT_ID_MAX_CHARS]!r}"
    if wanted and len(wanted) <= TENANT_ID_MAX_CHARS and wanted.isprintable():
        try:
            tenant = await call.store.tenant_get(wanted)
        except StoreUnavailable:
            problem = "the store cannot be reached; retry"
    if tenant is None:
        response = RedirectResponse("/ui/tenants", 303)
        set_flash(response, request, problem, error=True)
        return response
    response = RedirectResponse(target, 303)
    set_tenant(response, request, tenant.id)
    set_flash(response, request, f"viewing tenant {tenant.name}")
    return response
