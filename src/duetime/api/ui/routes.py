"""The ``/ui`` router: login and logout, the packaged static files, and every view's routes
(:mod:`~duetime.api.ui.views_overview`, :mod:`~duetime.api.ui.views_tasks`,
:mod:`~duetime.api.ui.views_schedules`, :mod:`~duetime.api.ui.views_targets`,
:mod:`~duetime.api.ui.views_admin`). None of it is part of the OpenAPI document."""

from __future__ import annotations

from importlib import resources

from fastapi import APIRouter, Request
from starlette.responses import RedirectResponse, Response

from duetime.api.deps import services
from duetime.api.ui import views_admin, views_overview, views_schedules, views_targets, views_tasks
from duetime.api.ui.pages import error_page, html
from duetime.api.ui.session import (
    TENANT_COOKIE,
    clear_key,
    clear_tenant,
    first,
    is_admin_token,
    local_path,
    read_form,
    same_origin,
    set_key,
)
from duetime.errors import StoreUnavailable, Unauthorized

router = APIRouter(include_in_schema=False)

_MEDIA_TYPES = {
    ".css": "text/css",
    ".js": "text/javascript",
    ".svg": "image/svg+xml",
    ".txt": "text/plain",
}


def _load_static() -> dict[str, tuple[bytes, str]]:
    """Every packaged static file, read once: name → (bytes, media type)."""
    found: dict[str, tuple[bytes, str]] = {}
    for entry in resources.files("duetime.api.ui").joinpath("static").iterdir():
        suffix = entry.name[entry.name.rfind(".") :]
        if entry.is_file() and suffix in _MEDIA_TYPES:
            found[entry.name] = (entry.read_bytes(), _MEDIA_TYPES[suffix])
    return found


STATIC = _load_static()


@router.get("/ui/static/{name}")
async def static(name: str) -> Response:
    found = STATIC.get(name)
    if found is None:
        return Response("not found", status_code=404, media_type="text/plain")
    body, media_type = found
    headers = {"Cache-Control": "public, max-age=3600", "X-Content-Type-Options": "nosniff"}
    return Response(body, media_type=media_type, headers=headers)


@router.get("/ui/login")
async def login_page(request: Request, next: str = "") -> Response:
    target = local_path(next, "/ui")
    if services(request).auth.dev_mode:
        return RedirectResponse(target, 303)
    return html(request, "login.html", next=target, error=None)


@router.post("/ui/login")
async def login(request: Request) -> Response:
    """Check the key like the API would (or the admin token, in constant time) and keep it in
    the session cookie. An admin picks a tenant next (any page sends it to the Tenants page
    until it has)."""
    if not same_origin(request):
        return error_page(request, 403, "refused: this form was not posted from this dashboard")
    form = await read_form(request)
    target = local_path(first(form, "next"), "/ui")
    found = services(request)
    if found.auth.dev_mode:
        return RedirectResponse(target, 303)
    key = first(form, "api_key").strip()
    if not is_admin_token(found, key):
        try:
            await found.auth.tenant_id(key)
        except Unauthorized:
            return html(
                request,
                "login.html",
                401,
                next=target,
                error="unknown or deleted API key (and not the admin token)",
            )
        except StoreUnavailable:
            return html(
                request, "login.html", 503, next=target, error="the store cannot be reached; retry"
            )
    response = RedirectResponse(target, 303)
    set_key(response, request, key)
    if request.cookies.get(TENANT_COOKIE):
        clear_tenant(response)  # a new session starts without an admin's earlier choice
    return response


@router.post("/ui/logout")
async def logout(request: Request) -> Response:
    if not same_origin(request):
        return error_page(request, 403, "refused: this form was not posted from this dashboard")
    response = RedirectResponse("/ui/login", 303)
    clear_key(response)
    return response


router.include_router(views_overview.router)
router.include_router(views_tasks.router)
router.include_router(views_schedules.router)
router.include_router(views_targets.router)
router.include_router(views_admin.router)
