"""The ``/ui`` router: login and logout, the packaged static files, and every view's routes
(:mod:`~duetime.api.ui.views_overview`, :mod:`~duetime.api.ui.views_queues`,
:mod:`~duetime.api.ui.views_tasks`, :mod:`~duetime.api.ui.views_bulk`,
:mod:`~duetime.api.ui.views_dead`, :mod:`~duetime.api.ui.views_schedules`,
:mod:`~duetime.api.ui.views_targets`, :mod:`~duetime.api.ui.views_credentials`,
:mod:`~duetime.api.ui.views_admin`, :mod:`~duetime.api.ui.views_workflows`). None of it is part of
the OpenAPI document."""

from __future__ import annotations

from importlib import resources

from fastapi import APIRouter, Request
from starlette.responses import RedirectResponse, Response

from duetime.api.deps import services
from duetime.api.ui import (
    views_admin,
    views_bulk,
    views_credentials,
    views_dead,
    views_overview,
    views_queues,
    views_schedules,
    views_targets,
    views_tasks,
    views_workflows,
)
from duetime.api.ui.pages import error_page, html
from duetime.api.ui.session import (
    TENANT_COOKIE,
    clear_session,
    clear_tenant,
    end_session,
    first,
    local_path,
    read_form,
    same_origin,
    set_session,
    start_session,
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
    """Check the key like the API would (or the admin token, in constant time) and start a
    session: the cookie holds the session's random id, never the key. An admin picks a tenant
    next (any page sends it to the Tenants page until it has)."""
    if not same_origin(request):
        return error_page(request, 403, "refused: this form was not posted from this dashboard")
    form = await read_form(request)
    target = local_path(first(form, "next"), "/ui")
    found = services(request)
    if found.auth.dev_mode:
        return RedirectResponse(target, 303)
    key = first(form, "api_key").strip()
    try:
        session_id = await start_session(found, key)
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
    set_session(response, request, session_id)
    if request.cookies.get(TENANT_COOKIE):
        clear_tenant(response)  # a new session starts without an admin's earlier choice
    return response


@router.post("/ui/logout")
async def logout(request: Request) -> Response:
    """End the session in the store (its cookie no longer works anywhere), then in the
    browser."""
    if not same_origin(request):
        return error_page(request, 403, "refused: this form was not posted from this dashboard")
    try:
        await end_session(request)
    except StoreUnavailable:
        return error_page(request, 503, "the store cannot be reached; you are still logged in")
    response = RedirectResponse("/ui/login", 303)
    clear_session(response, request)
    return response


router.include_router(views_overview.router)
router.include_router(views_queues.router)
router.include_router(views_tasks.router)
router.include_router(views_bulk.router)
router.include_router(views_dead.router)
router.include_router(views_schedules.router)
router.include_router(views_targets.router)
router.include_router(views_credentials.router)
router.include_router(views_admin.router)
router.include_router(views_workflows.router)
