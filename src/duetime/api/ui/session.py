"""Who is looking at the dashboard, and whether a form post may be trusted.

Auth is the API's (:class:`~duetime.api.deps.Authenticator`): a tenant's API key, the admin token
(outside dev mode: every tenant, one at a time), or nothing at all in dev mode. A browser cannot
send ``Authorization`` headers when it follows a link, so the login form takes the key or token
once and starts a **session**: the :data:`SESSION_COOKIE` cookie holds a random id (never the
credential), the store holds its SHA-256 with who logged in (the tenant and the key's id, or the
admin), when, and when it was last used. A session ends after ``ui_session_idle_seconds``
unused, ``ui_session_seconds`` after login at the latest, on logout (the row is deleted: the old
cookie no longer works anywhere), when its API key or tenant is deleted, and when the admin
revokes it (``POST /v1/admin/sessions/revoke``). The cookie is ``HttpOnly`` (no script reads
it), ``SameSite=Strict`` (no other site's page or link makes the browser send it), ``Path=/ui``
(the JSON API never sees it: it keeps to Bearer headers), and ``Secure`` whenever the node is
reached over TLS (``DUETIME_BEHIND_TLS``, an https ``DUETIME_PUBLIC_URL``, or the request
itself). An ``Authorization: Bearer`` header works too (scripts, tests).

An admin session views one tenant at a time: the one it picked on the Tenants page, kept in the
:data:`TENANT_COOKIE` cookie (same attributes). Only an admin session reads that cookie; a tenant
key's session always shows the key's own tenant, whatever the cookie says.

Every POST must also come from a page of this same origin (:func:`same_origin`): ``SameSite``
already keeps the cookie off cross-site posts, and the Origin check covers dev mode, where there is
no cookie to withhold.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from urllib.parse import parse_qs, quote, unquote, urlsplit

from fastapi import Request
from starlette.responses import Response

from duetime.api.deps import Services, bearer_token, read_body, services
from duetime.api.schedule_ops import DEV_ACTOR
from duetime.auth import hash_api_key
from duetime.errors import Unauthorized
from duetime.store.protocols import ApiStore

SESSION_COOKIE = "duetime_ui_session"
"""The cookie holding the session's random id."""
LEGACY_KEY_COOKIE = "duetime_ui_key"
"""Where older versions kept the credential itself: cleared at login and logout."""
SESSION_ID_MAX_CHARS = 100
TENANT_COOKIE = "duetime_ui_tenant"
"""The cookie holding the tenant an admin session is viewing (read only for admin sessions)."""
FLASH_COOKIE = "duetime_ui_flash"
"""A one-shot message for the page an action redirects to."""
COOKIE_PATH = "/ui"
FORM_LIMIT_BYTES = 64 * 1024
"""Largest form body accepted (a dead-letter group's replay posts up to a page of ids)."""
ADMIN_ACTOR = "admin"
"""Who an admin session's changes are attributed to (audit trail and schedule revisions)."""
TENANT_ID_MAX_CHARS = 200


class NoTenantChosen(Exception):
    """An admin session that has not picked a tenant to view (or whose tenant is gone)."""

    def __init__(self, gone: bool) -> None:
        super().__init__("no tenant chosen")
        self.gone = gone


@dataclass(frozen=True, slots=True)
class UiCall:
    """An authenticated dashboard request: the tenant, the store and the app's services.

    An admin session's ``tenant_id`` is the tenant it picked; it is empty only on the Tenants
    page before any was picked (:func:`authenticate` with ``tenant_required=False``)."""

    tenant_id: str
    store: ApiStore
    services: Services
    key_id: str | None
    """The id of the tenant key the user logged in with (None in dev mode and for the
    admin)."""
    tenant_name: str
    admin: bool = False
    """Logged in with the admin token: may view (and act on) any tenant."""

    async def actor(self) -> str | None:
        """Who made a change, for schedule revisions: the key's id, as the API records it;
        ``admin`` for the admin token."""
        if self.services.auth.dev_mode:
            return DEV_ACTOR
        if self.admin:
            return ADMIN_ACTOR
        return self.key_id

    def audit_actor(self) -> str:
        """Who made a change, for the audit trail (:mod:`duetime.history.actor`): ``admin``,
        else what the API records for the same caller (``key:<key id>``, ``dev`` in dev
        mode)."""
        if self.admin:
            return ADMIN_ACTOR
        if self.services.auth.dev_mode:
            return "dev"
        return f"key:{self.key_id}" if self.key_id else "api"


@dataclass(frozen=True, slots=True)
class _Who:
    """Who a credential or a session stands for: the admin, or a tenant and its key's id."""

    admin: bool
    tenant_id: str = ""
    key_id: str | None = None


async def _by_credential(found: Services, credential: str | None) -> _Who:
    """The admin token or a tenant's API key; ``Unauthorized`` for anything else."""
    if is_admin_token(found, credential):
        return _Who(admin=True)
    tenant_id = await found.auth.tenant_id(credential)
    key = None
    if credential and not found.auth.dev_mode:
        key = await found.store.api_key_get_by_hash(hash_api_key(credential))
    return _Who(admin=False, tenant_id=tenant_id, key_id=None if key is None else key.id)


async def _by_session(found: Services, request: Request) -> _Who:
    """The live session named by :data:`SESSION_COOKIE`; ``Unauthorized`` without one."""
    raw = request.cookies.get(SESSION_COOKIE) or ""
    if not raw or len(raw) > SESSION_ID_MAX_CHARS:
        raise Unauthorized("not logged in")
    idle = found.settings.ui_session_idle_seconds
    session = await found.store.ui_session_use(hash_api_key(raw), idle)
    if session is None:
        raise Unauthorized("the session ended: log in again")
    if session.admin:
        return _Who(admin=True)
    assert session.tenant_id is not None
    return _Who(admin=False, tenant_id=session.tenant_id, key_id=session.key_id)


async def start_session(found: Services, credential: str) -> str:
    """Check ``credential`` like the API would (the admin token in constant time) and start a
    session for it; returns the session id for the cookie. ``Unauthorized`` for a wrong one."""
    who = await _by_credential(found, credential)
    session_id = secrets.token_urlsafe(32)
    await found.store.ui_session_create(
        hash_api_key(session_id),
        None if who.admin else who.tenant_id,
        who.key_id,
        found.settings.ui_session_seconds,
        found.settings.ui_session_idle_seconds,
    )
    return session_id


async def end_session(request: Request) -> None:
    """Delete the request's session in the store (logout): its cookie no longer works, on any
    browser that kept a copy."""
    raw = request.cookies.get(SESSION_COOKIE) or ""
    if raw and len(raw) <= SESSION_ID_MAX_CHARS:
        await services(request).store.ui_session_delete(hash_api_key(raw))


def is_admin_token(found: Services, token: str | None) -> bool:
    """Whether ``token`` is the admin token (compared in constant time); never in dev mode,
    where there is no admin token and the dashboard acts as tenant ``default``."""
    if found.auth.dev_mode or not token:
        return False
    try:
        found.auth.check_admin(token)
    except Unauthorized:
        return False
    return True


def chosen_tenant(request: Request) -> str | None:
    """The tenant id in :data:`TENANT_COOKIE`, when it looks like one."""
    raw = request.cookies.get(TENANT_COOKIE) or ""
    if not raw or len(raw) > TENANT_ID_MAX_CHARS or not raw.isprintable():
        return None
    return raw


async def authenticate(request: Request, *, tenant_required: bool = True) -> UiCall:
    """The dashboard caller; ``Unauthorized`` (from the API's authenticator) without a valid
    key outside dev mode. An admin session views the tenant of :data:`TENANT_COOKIE`;
    ``NoTenantChosen`` when it has none (or it was deleted), unless ``tenant_required`` is
    False (the Tenants page)."""
    found = services(request)
    if found.auth.dev_mode:
        who = await _by_credential(found, None)
    else:
        token = bearer_token(request)
        who = await (_by_credential(found, token) if token else _by_session(found, request))
    if who.admin:
        chosen = chosen_tenant(request)
        picked = await found.store.tenant_get(chosen) if chosen else None
        if picked is None:
            if tenant_required:
                raise NoTenantChosen(gone=bool(request.cookies.get(TENANT_COOKIE)))
            return UiCall("", found.store, found, None, "", admin=True)
        return UiCall(picked.id, found.store, found, None, picked.name, admin=True)
    tenant = await found.store.tenant_get(who.tenant_id)
    name = tenant.name if tenant is not None else who.tenant_id
    return UiCall(who.tenant_id, found.store, found, who.key_id, name)


def same_origin(request: Request) -> bool:
    """True when the request says it comes from a page of this server: its ``Origin`` (or, when
    a browser left that out, its ``Referer``) names the host the request was sent to. A request
    with neither is refused: every browser this dashboard supports sends Origin on a POST."""
    host = request.headers.get("host")
    if not host:
        return False
    source = request.headers.get("origin") or request.headers.get("referer")
    if not source or source == "null":
        return False
    parts = urlsplit(source)
    return parts.scheme in ("http", "https") and parts.netloc.lower() == host.lower()


async def read_form(request: Request) -> dict[str, list[str]]:
    """An ``application/x-www-form-urlencoded`` body, capped at :data:`FORM_LIMIT_BYTES`."""
    raw = await read_body(request, FORM_LIMIT_BYTES)
    return parse_qs(raw.decode("utf-8", errors="replace"), keep_blank_values=True)


def first(form: dict[str, list[str]], name: str, default: str = "") -> str:
    values = form.get(name)
    return values[0] if values else default


def local_path(candidate: str | None, default: str) -> str:
    """``candidate`` when it is a path inside the dashboard (so a redirect can never leave the
    site), else ``default``."""
    if (
        candidate
        and candidate.startswith(COOKIE_PATH)
        and not candidate.startswith("//")
        and "\\" not in candidate
        and not urlsplit(candidate).netloc
    ):
        return candidate
    return default


def login_redirect(request: Request) -> str:
    """The login page, remembering where the user was going."""
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return f"{COOKIE_PATH}/login?next={quote(target, safe='')}"


def secure_cookies(request: Request) -> bool:
    """Whether cookies set for ``request`` are ``Secure``: always when the node is told it is
    reached over TLS (``behind_tls``, an https ``public_url``), else when this request was."""
    return services(request).settings.tls_cookies or request.url.scheme == "https"


def set_session(response: Response, request: Request, session_id: str) -> None:
    """Give the browser the session's cookie (and drop a credential an older version kept)."""
    response.set_cookie(
        SESSION_COOKIE,
        session_id,
        max_age=int(services(request).settings.ui_session_seconds),
        path=COOKIE_PATH,
        httponly=True,
        samesite="strict",
        secure=secure_cookies(request),
    )
    if request.cookies.get(LEGACY_KEY_COOKIE):
        _drop(response, LEGACY_KEY_COOKIE)


def clear_session(response: Response, request: Request) -> None:
    """Forget the session in the browser: its cookie and an admin's tenant choice (the store's
    row goes with :func:`end_session`)."""
    _drop(response, SESSION_COOKIE)
    if request.cookies.get(LEGACY_KEY_COOKIE):
        _drop(response, LEGACY_KEY_COOKIE)
    clear_tenant(response)


def _drop(response: Response, name: str) -> None:
    response.delete_cookie(name, path=COOKIE_PATH, httponly=True, samesite="strict")


def set_tenant(response: Response, request: Request, tenant_id: str) -> None:
    """Keep the tenant an admin session views (the same attributes as the key's cookie)."""
    response.set_cookie(
        TENANT_COOKIE,
        tenant_id,
        max_age=int(services(request).settings.ui_session_seconds),
        path=COOKIE_PATH,
        httponly=True,
        samesite="strict",
        secure=secure_cookies(request),
    )


def clear_tenant(response: Response) -> None:
    _drop(response, TENANT_COOKIE)


def set_flash(response: Response, request: Request, message: str, *, error: bool = False) -> None:
    """A message the next page shows once (``!`` first marks an error)."""
    text = ("!" if error else "") + message[:300]
    response.set_cookie(
        FLASH_COOKIE,
        quote(text, safe=""),
        max_age=60,
        path=COOKIE_PATH,
        httponly=True,
        samesite="strict",
        secure=secure_cookies(request),
    )


def take_flash(request: Request, response: Response) -> tuple[str, bool] | None:
    """The pending message (text, is_error), cleared from the browser by ``response``."""
    raw = request.cookies.get(FLASH_COOKIE)
    if not raw:
        return None
    response.delete_cookie(FLASH_COOKIE, path=COOKIE_PATH, httponly=True, samesite="strict")
    text = unquote(raw)
    return (text[1:], True) if text.startswith("!") else (text, False)
