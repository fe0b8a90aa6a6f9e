"""Turning views into responses: the Jinja2 environment, the page and error responses with
their security headers, and the two wrappers every route goes through — :func:`serve` for a
page (auth, then the view; errors become an error page) and :func:`act` for a form post (Origin
check, auth, the action — attributed to the caller in the audit trail — then a redirect back with
a one-shot message). An admin session that has not picked a tenant is sent to the Tenants page.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime
from typing import Any
from urllib.parse import quote, urlencode

import jinja2
import orjson
from fastapi import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from duetime.api.ui import charts
from duetime.api.ui.session import (
    COOKIE_PATH,
    SESSION_COOKIE,
    NoTenantChosen,
    UiCall,
    authenticate,
    clear_session,
    clear_tenant,
    first,
    local_path,
    login_redirect,
    read_form,
    same_origin,
    set_flash,
    take_flash,
)
from duetime.errors import (
    Conflict,
    Forbidden,
    NotFound,
    StoreUnavailable,
    Unauthorized,
    ValidationError,
)
from duetime.history.actor import acting_as

SECURITY_HEADERS: Mapping[str, str] = {
    # Scripts and styles only from this server (no inline code), no framing, forms only to us.
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "frame-ancestors 'none'; form-action 'self'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}

View = Callable[[Request, UiCall], Awaitable[Response]]
Action = Callable[[UiCall, dict[str, list[str]]], Awaitable[str]]


def _when(value: datetime | None) -> str:
    return "—" if value is None else f"{value:%Y-%m-%d %H:%M:%S}Z"


@jinja2.pass_context
def _ago(context: jinja2.runtime.Context, value: datetime | None) -> str:
    """``value`` relative to the page's ``now``: ``3m 2s ago`` or ``in 5m 0s``."""
    now: datetime | None = context.get("now")
    if value is None or now is None:
        return ""
    seconds = (now - value).total_seconds()
    text = charts.format_seconds(abs(seconds))
    return f"{text} ago" if seconds >= 0 else f"in {text}"


def _pretty(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_INDENT_2).decode()


def _pretty_text(raw: str) -> str:
    """Stored JSON text, indented (shown as it is when it is not JSON)."""
    try:
        return _pretty(orjson.loads(raw))
    except orjson.JSONDecodeError:
        return raw


def url(base: str, **params: Any) -> str:
    """``base`` with the non-empty ``params`` as its query (a list repeats its key)."""
    pairs: list[tuple[str, str]] = []
    for key, value in params.items():
        for item in value if isinstance(value, list | tuple) else [value]:
            if item is not None and item != "":
                pairs.append((key, str(item)))
    return base + ("?" + urlencode(pairs) if pairs else "")


def _tail(task_id: str) -> str:
    """The distinctive end of an id: UUIDv7s made together share their first characters."""
    return "…" + task_id[-8:]


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("duetime.api.ui", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        when=_when,
        ago=_ago,
        duration=charts.format_seconds,
        pretty=_pretty,
        pretty_text=_pretty_text,
        tail=_tail,
    )
    env.globals["url"] = url
    return env


ENV = _environment()


def html(request: Request, template: str, status_code: int = 200, **context: Any) -> Response:
    """The page ``template`` rendered with ``context`` (plus ``request``, ``path`` and the
    pending one-shot message), with the dashboard's security headers."""
    response = HTMLResponse("", status_code=status_code, headers=dict(SECURITY_HEADERS))
    flash = take_flash(request, response)
    body = ENV.get_template(template).render(
        request=request,
        path=request.url.path,
        here=request.url.path + (f"?{request.url.query}" if request.url.query else ""),
        flash=flash,
        **context,
    )
    response.body = body.encode()
    response.headers["content-length"] = str(len(response.body))
    return response


def error_page(request: Request, status: int, message: str, **context: Any) -> Response:
    return html(request, "error.html", status, status=status, message=message, **context)


def _send_to(request: Request, target: str) -> Response:
    if request.headers.get("hx-request"):
        # An htmx refresh must not swap a whole page into a panel: send the whole tab there.
        return Response(status_code=200, headers={"HX-Redirect": target})
    return RedirectResponse(target, 303)


def _to_login(request: Request) -> Response:
    response = _send_to(request, login_redirect(request))
    if request.cookies.get(SESSION_COOKIE):
        clear_session(response, request)
    return response


def _to_tenants(request: Request, missing: NoTenantChosen) -> Response:
    """An admin session without a tenant to view: the Tenants page, then back to the page
    asked for (the overview after a form post, which did nothing)."""
    back = COOKIE_PATH
    if request.method == "GET":
        back = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    response = _send_to(request, f"{COOKIE_PATH}/tenants?next={quote(back, safe='')}")
    if missing.gone:
        clear_tenant(response)
        set_flash(response, request, "the tenant you were viewing no longer exists", error=True)
    return response


async def serve(request: Request, view: View, *, tenant_required: bool = True) -> Response:
    """Authenticate, then render ``view``; a missing or bad key goes to the login page, an
    admin who has not picked a tenant to the Tenants page (unless ``tenant_required`` is False:
    the view gets a call with an empty ``tenant_id`` then)."""
    try:
        call = await authenticate(request, tenant_required=tenant_required)
    except Unauthorized:
        return _to_login(request)
    except NoTenantChosen as missing:
        return _to_tenants(request, missing)
    try:
        return await view(request, call)
    except Forbidden as exc:
        return error_page(request, 403, exc.detail, call=call)
    except NotFound as exc:
        return error_page(request, 404, exc.detail, call=call)
    except ValidationError as exc:
        where = f"{exc.field}: " if exc.field else ""
        return error_page(request, 422, where + exc.detail, call=call)
    except StoreUnavailable:
        return error_page(
            request,
            503,
            "the store cannot be reached right now; accepted work is safe, retry later",
            call=call,
        )


async def act(request: Request, action: Action, default_back: str) -> Response:
    """Run a form post's ``action`` and redirect (303) to the form's ``back`` field (a dashboard
    path) or ``default_back``, with the action's message — or its error — shown there once."""
    if not same_origin(request):
        return error_page(request, 403, "refused: this form was not posted from this dashboard")
    try:
        call = await authenticate(request)
    except Unauthorized:
        return _to_login(request)
    except NoTenantChosen as missing:
        return _to_tenants(request, missing)
    form = await read_form(request)
    response = RedirectResponse(local_path(first(form, "back"), default_back), 303)
    try:
        with acting_as(call.audit_actor()):  # audit: "admin", or the key as the API records it
            message = await action(call, form)
    except (Conflict, NotFound, ValidationError) as exc:
        set_flash(response, request, exc.detail, error=True)
    except StoreUnavailable:
        set_flash(response, request, "the store cannot be reached; nothing changed", error=True)
    else:
        set_flash(response, request, message)
    return response
