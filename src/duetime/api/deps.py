"""What routes share: the store, the calling tenant (API key auth) and the admin check.

Auth (SPEC §3): ``Authorization: Bearer <api key>``. The key is hashed (SHA-256) and looked up in
the store; the answer is cached per process for :data:`AUTH_CACHE_TTL_SECONDS` because every call
pays for it. Consequence: a key deleted through *this* process stops working at once (the delete
call evicts it), but a key deleted through another node or straight in the store keeps working
here for up to the TTL. Unknown keys are cached for the same time (they are random, so a key that
is unknown now cannot be created a moment later).

Admin calls need ``Authorization: Bearer <DUETIME_ADMIN_TOKEN>``, compared in constant time.
Dev mode (no admin token): no auth at all; every call acts as tenant ``default``, created on first
use, and admin calls are open.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any, TypeVar

import pydantic
from fastapi import Depends, Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel

from duetime.api.bulk import Walks
from duetime.api.problems import RequestTooLarge, problem_responses
from duetime.auth import hash_api_key
from duetime.clock import SystemClock
from duetime.config import Settings
from duetime.engine.pressure import Pulse
from duetime.errors import Conflict, Forbidden, Unauthorized
from duetime.lifecycle.create import Creator, TaskBuilder
from duetime.lifecycle.lease import LeaseHub
from duetime.lifecycle.quotas import QuotaGate
from duetime.schedule.evaluation import EvaluationPool, node_pool
from duetime.store.protocols import ApiStore, TenantStore

AUTH_CACHE_TTL_SECONDS = 5.0
AUTH_CACHE_MAX_ENTRIES = 10_000
DEV_TENANT_ID = "default"

M = TypeVar("M", bound=BaseModel)


class AuthCache:
    """Key hash → (tenant id or None, key id), for ``ttl`` seconds, least recently used evicted."""

    def __init__(
        self,
        ttl: float = AUTH_CACHE_TTL_SECONDS,
        max_entries: int = AUTH_CACHE_MAX_ENTRIES,
        monotonic: Callable[[], float] = SystemClock().monotonic,
    ) -> None:
        self.ttl = ttl
        self.max_entries = max_entries
        self.monotonic = monotonic
        self._entries: OrderedDict[str, tuple[float, str | None, str | None]] = OrderedDict()

    def get(self, key_hash: str) -> tuple[bool, str | None]:
        """(hit, tenant id); a hit with ``None`` is a cached "no such key"."""
        entry = self._entries.get(key_hash)
        if entry is None:
            return False, None
        if entry[0] <= self.monotonic():
            del self._entries[key_hash]
            return False, None
        self._entries.move_to_end(key_hash)
        return True, entry[1]

    def put(self, key_hash: str, tenant_id: str | None, key_id: str | None) -> None:
        self._entries[key_hash] = (self.monotonic() + self.ttl, tenant_id, key_id)
        self._entries.move_to_end(key_hash)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)

    def evict_key(self, key_id: str) -> None:
        """Forget a deleted key at once (on this process)."""
        for key_hash in [h for h, e in self._entries.items() if e[2] == key_id]:
            del self._entries[key_hash]

    def evict_tenant(self, tenant_id: str) -> None:
        """Forget every key of a deleted tenant at once (on this process)."""
        for key_hash in [h for h, e in self._entries.items() if e[1] == tenant_id]:
            del self._entries[key_hash]


class Authenticator:
    """Answers "which tenant is calling?" and "is this the admin?" for one app."""

    def __init__(
        self, settings: Settings, store: TenantStore, cache: AuthCache | None = None
    ) -> None:
        self.dev_mode = settings.dev_mode
        self._admin_token = (settings.admin_token or "").encode()
        self.store = store
        self.cache = cache or AuthCache()
        self._dev_tenant_ready = False
        self._dev_lock = asyncio.Lock()

    async def tenant_id(self, api_key: str | None) -> str:
        """The tenant owning ``api_key``; ``Unauthorized`` when missing or unknown."""
        if self.dev_mode:
            if not self._dev_tenant_ready:
                await self._ensure_dev_tenant()
            return DEV_TENANT_ID
        if not api_key:
            raise Unauthorized("missing API key: send Authorization: Bearer <api key>")
        key_hash = hash_api_key(api_key)
        hit, tenant_id = self.cache.get(key_hash)
        if not hit:
            key = await self.store.api_key_get_by_hash(key_hash)
            tenant_id = key.tenant_id if key else None
            self.cache.put(key_hash, tenant_id, key.id if key else None)
        if tenant_id is None:
            raise Unauthorized("unknown or deleted API key")
        return tenant_id

    def actor(self, api_key: str | None) -> str:
        """Who calls, for the audit trail: ``key:<key id>`` (after :meth:`tenant_id` accepted
        the key), ``dev`` in dev mode."""
        if self.dev_mode or not api_key:
            return "dev"
        entry = self.cache._entries.get(hash_api_key(api_key))
        return f"key:{entry[2]}" if entry is not None and entry[2] else "api"

    def check_admin(self, token: str | None) -> None:
        """Raise ``Unauthorized`` unless ``token`` is the admin token (always fine in dev mode)."""
        if self.dev_mode:
            return
        if not token:
            raise Unauthorized("missing admin token: send Authorization: Bearer <admin token>")
        if not hmac.compare_digest(token.encode(), self._admin_token):
            raise Unauthorized("wrong admin token")

    async def _ensure_dev_tenant(self) -> None:
        async with self._dev_lock:
            if self._dev_tenant_ready:
                return
            if await self.store.tenant_get(DEV_TENANT_ID) is None:
                with contextlib.suppress(Conflict):  # another node made it first
                    await self.store.tenant_create(DEV_TENANT_ID, tenant_id=DEV_TENANT_ID)
            self._dev_tenant_ready = True


@dataclass(frozen=True, slots=True)
class Services:
    """What the routes of one app share; ``app.state.services``."""

    store: ApiStore
    settings: Settings
    auth: Authenticator
    creator: Creator
    """Creates, with their quotas and handoffs (:mod:`duetime.lifecycle.create`)."""
    leases: LeaseHub
    """Long polls, heart-beats and acks of pull workers (:mod:`duetime.lifecycle.lease`)."""
    body_limit: int
    """Largest request body accepted, in bytes (413 beyond)."""
    batch_body_limit: int
    """The same for ``POST /v1/tasks/batch``."""
    pulse: Pulse
    """The API's share of the hot path: tasks created, leased and acked (the node's history
    round waits while it is busy, :mod:`duetime.engine.pressure`)."""
    walks: Walks = field(default_factory=Walks)
    """Bulk replays and cancels running on this node; the node cancels them as it stops."""
    evaluations: EvaluationPool = field(default_factory=node_pool)
    """Where schedule expressions are evaluated, off the event loop
    (:mod:`duetime.schedule.evaluation`)."""

    @property
    def builder(self) -> TaskBuilder:
        return self.creator.builder

    @property
    def quotas(self) -> QuotaGate:
        return self.creator.quotas


def bearer_token(request: Request) -> str | None:
    """The credentials of an ``Authorization: Bearer <token>`` header (scheme case-insensitive)."""
    header = request.headers.get("authorization")
    if not header:
        return None
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer":
        return None
    return token.strip() or None


def services(request: Request) -> Services:
    """The app's shared services (no auth)."""
    found: Services = request.app.state.services
    return found


@dataclass(frozen=True, slots=True)
class Caller:
    """An authenticated tenant's call: who calls, and the services it may use."""

    tenant_id: str
    store: ApiStore
    creator: Creator
    actor: str | None = None
    """Who calls, for the audit trail (see :mod:`duetime.history.actor`)."""
    evaluations: EvaluationPool = field(default_factory=node_pool)
    """Where this call evaluates schedule expressions (:mod:`duetime.schedule.evaluation`)."""

    @property
    def builder(self) -> TaskBuilder:
        return self.creator.builder

    @property
    def quotas(self) -> QuotaGate:
        return self.creator.quotas


async def tenant_call(request: Request) -> Caller:
    """The calling tenant and the app's services; ``Unauthorized`` without a valid key.

    As a FastAPI dependency (:data:`TenantCall`) it runs before the query and body are
    validated, so an unauthenticated caller learns nothing about them. The create calls invoke it
    directly instead: resolving dependencies costs more than the rest of the API layer there.
    """
    found: Services = request.app.state.services
    token = bearer_token(request)
    tenant_id = await found.auth.tenant_id(token)
    return Caller(tenant_id, found.store, found.creator, found.auth.actor(token), found.evaluations)


def admin_call(request: Request) -> Services:
    """The app's services, when the call carries the admin token; ``Unauthorized`` otherwise.
    ``Forbidden`` in dev mode: every call acts as tenant ``default`` there, so a tenant or key
    made there would silently act as ``default`` too."""
    found: Services = request.app.state.services
    if found.auth.dev_mode:
        raise Forbidden(
            "admin calls are refused in dev mode: every call acts as tenant 'default', so tenants "
            "and keys made here would too; start the server with DUETIME_ADMIN_TOKEN set"
        )
    found.auth.check_admin(bearer_token(request))
    return found


TenantCall = Annotated[Caller, Depends(tenant_call)]
AdminCall = Annotated[Services, Depends(admin_call)]


async def read_body(request: Request, limit: int) -> bytes:
    """The raw body, refused with ``RequestTooLarge`` as soon as it is known to pass ``limit``
    (from ``Content-Length`` before reading, or while streaming)."""
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise RequestTooLarge(f"the request body is over the {limit}-byte limit")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise RequestTooLarge(f"the request body is over the {limit}-byte limit")
        chunks.append(chunk)
    return b"".join(chunks)


async def json_body(
    request: Request, model: type[M], *, batch: bool = False, optional: bool = False
) -> M:
    """The request body read under the app's size cap, then parsed and validated in one pass by
    pydantic-core (faster than FastAPI's ``json.loads`` + validate). Every route with a body uses
    this, after authenticating, so no unauthenticated body is ever read in full.

    Errors are raised as FastAPI's ``RequestValidationError`` with ``body`` locations, so they
    become the same problems as a declared body's. ``optional``: an empty body means defaults.
    """
    found: Services = request.app.state.services
    raw = await read_body(request, found.batch_body_limit if batch else found.body_limit)
    if optional and not raw.strip():
        return model()
    return validated(raw, model)


def validated(raw: bytes, model: type[M]) -> M:
    """``raw`` parsed and validated as ``model`` (see :func:`json_body`, which reads the body
    first): errors are FastAPI's ``RequestValidationError`` with ``body`` locations."""
    try:
        return model.model_validate_json(raw)
    except pydantic.ValidationError as exc:
        errors = [{**e, "loc": ("body", *e["loc"])} for e in exc.errors(include_url=False)]
        raise RequestValidationError(errors) from None


def body_schema(model: type[BaseModel], *, required: bool = True) -> dict[str, Any]:
    """``openapi_extra`` documenting a body read with :func:`json_body` (the app adds ``model``
    to the document's components)."""
    ref = {"$ref": f"#/components/schemas/{model.__name__}"}
    content = {"application/json": {"schema": ref}}
    # Any body may be over the server's cap (RequestTooLarge): say so on every such route.
    return {
        "requestBody": {"required": required, "content": content},
        "responses": {"413": problem_responses(413)[413]},
    }
