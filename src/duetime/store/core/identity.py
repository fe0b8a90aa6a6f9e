"""Signing keys, client certificates, held payloads and dashboard sessions: the rules, once for
both backends (docs/security.md). What is sealed is sealed above the store: these rows hold
sealed text and never open it."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import orjson

from duetime.store.core.plan import NOW, Decode, Plan, Row, all_, count, execute, one
from duetime.store.core.runner import Runs
from duetime.types import ClientCertificate, HeldPayload, SigningKey, UiSession

SESSION_TOUCH_SECONDS = 60.0
"""A session's ``last_seen`` is written at most this often (a page view is not a write)."""


def _signing_key(r: Row, d: type[Decode]) -> SigningKey:
    return SigningKey(
        kid=r["kid"],
        generation=int(r["generation"]),
        algorithm=r["algorithm"],
        public_jwk=orjson.loads(r["public_jwk"]),
        private_key=r["private_key"],
        created_at=d.time(r["created_at"]),
        signs_from=d.time(r["signs_from"]),
    )


def _client_certificate(r: Row, d: type[Decode]) -> ClientCertificate:
    return ClientCertificate(
        tenant_id=r["tenant_id"],
        name=r["name"],
        certificate=r["certificate"],
        private_key=r["private_key"],
        fingerprint=r["fingerprint"],
        subject=r["subject"],
        not_after=d.time(r["not_after"]),
        created_at=d.time(r["created_at"]),
        updated_at=d.time(r["updated_at"]),
    )


def _held_payload(r: Row, d: type[Decode]) -> HeldPayload:
    return HeldPayload(
        id=r["id"],
        tenant_id=r["tenant_id"],
        task_id=d.opt_ident(r["task_id"]),
        payload_json=r["payload"],
        created_at=d.time(r["created_at"]),
    )


def _ui_session(r: Row, d: type[Decode]) -> UiSession:
    return UiSession(
        tenant_id=r["tenant_id"],
        key_id=r["key_id"],
        created_at=d.time(r["created_at"]),
        last_seen=d.time(r["last_seen"]),
        expires_at=d.time(r["expires_at"]),
    )


# -- signing keys ---------------------------------------------------------------------------


def signing_key_list() -> Plan[list[SigningKey]]:
    found: list[SigningKey] = yield all_("signing_key_list", _signing_key)
    return found


def signing_key_add(
    kid: str,
    generation: int,
    algorithm: str,
    public_jwk: dict[str, Any],
    private_key: str,
    signs_in_seconds: float,
) -> Plan[bool]:
    """Add the key of ``generation``, signing ``signs_in_seconds`` from now; False (nothing
    added) when that generation exists already (another node rotated first)."""
    now: datetime = yield NOW
    added = yield count(
        "signing_key_insert",
        kid=kid,
        generation=generation,
        algorithm=algorithm,
        public_jwk=orjson.dumps(public_jwk).decode(),
        private_key=private_key,
        signs_from=now + timedelta(seconds=max(0.0, signs_in_seconds)),
    )
    return bool(added)


def signing_key_delete(kids: Sequence[str]) -> Plan[int]:
    removed = 0
    for kid in kids:
        removed += yield count("signing_key_delete", kid=kid)
    return removed


# -- client certificates ----------------------------------------------------------------------


def client_certificate_put(
    tenant_id: str,
    name: str,
    certificate: str,
    private_key: str,
    fingerprint: str,
    subject: str,
    not_after: datetime,
) -> Plan[tuple[ClientCertificate, bool]]:
    """Create or replace; True when it was created."""
    before = yield one(
        "client_certificate_get", _client_certificate, tenant_id=tenant_id, name=name
    )
    stored: ClientCertificate = yield one(
        "client_certificate_put",
        _client_certificate,
        tenant_id=tenant_id,
        name=name,
        certificate=certificate,
        private_key=private_key,
        fingerprint=fingerprint,
        subject=subject,
        not_after=not_after,
    )
    return stored, before is None


def client_certificate_get(tenant_id: str, name: str) -> Plan[ClientCertificate | None]:
    found: ClientCertificate | None = yield one(
        "client_certificate_get", _client_certificate, tenant_id=tenant_id, name=name
    )
    return found


def client_certificate_list(tenant_id: str) -> Plan[list[ClientCertificate]]:
    found: list[ClientCertificate] = yield all_(
        "client_certificate_list", _client_certificate, tenant_id=tenant_id
    )
    return found


def client_certificate_delete(tenant_id: str, name: str) -> Plan[bool]:
    return bool((yield count("client_certificate_delete", tenant_id=tenant_id, name=name)))


# -- held payloads ----------------------------------------------------------------------------


def held_payload_put(hold_id: str, tenant_id: str, payload_json: str) -> Plan[None]:
    yield execute("held_payload_insert", id=hold_id, tenant_id=tenant_id, payload=payload_json)


def held_payload_link(hold_id: str, tenant_id: str, task_id: str) -> Plan[None]:
    yield execute("held_payload_link", id=hold_id, tenant_id=tenant_id, task_id=task_id)


def held_payload_get(tenant_id: str, hold_id: str) -> Plan[HeldPayload | None]:
    found: HeldPayload | None = yield one(
        "held_payload_get", _held_payload, id=hold_id, tenant_id=tenant_id
    )
    return found


def held_payload_delete(hold_id: str) -> Plan[bool]:
    return bool((yield count("held_payload_delete", id=hold_id)))


def held_payload_sweep(unlinked_seconds: float, limit: int) -> Plan[int]:
    """Delete up to ``limit`` held payloads no task refers to: never linked to one for
    ``unlinked_seconds`` (their create failed), or whose task is gone."""
    now: datetime = yield NOW
    before = now - timedelta(seconds=unlinked_seconds)
    removed: int = yield count("held_payload_sweep", before=before, limit=limit)
    return removed


# -- dashboard sessions -----------------------------------------------------------------------


def ui_session_create(
    token_hash: str,
    tenant_id: str | None,
    key_id: str | None,
    lifetime_seconds: float,
    idle_seconds: float,
) -> Plan[UiSession]:
    """A new session lasting at most ``lifetime_seconds``; sessions past either limit are
    removed on the way (each login sweeps)."""
    now: datetime = yield NOW
    yield execute("ui_session_delete_expired", idle_since=now - timedelta(seconds=idle_seconds))
    session: UiSession = yield one(
        "ui_session_insert",
        _ui_session,
        token_hash=token_hash,
        tenant_id=tenant_id,
        key_id=key_id,
        expires_at=now + timedelta(seconds=lifetime_seconds),
    )
    return session


def ui_session_use(token_hash: str, idle_seconds: float) -> Plan[UiSession | None]:
    """The live session of ``token_hash`` (None when unknown, revoked, past its absolute or
    idle limit, or its API key deleted), its ``last_seen`` moved to now (at most once per
    :data:`SESSION_TOUCH_SECONDS`)."""
    now: datetime = yield NOW
    found: UiSession | None = yield one(
        "ui_session_get",
        _ui_session,
        token_hash=token_hash,
        idle_since=now - timedelta(seconds=idle_seconds),
    )
    if found is not None and (now - found.last_seen).total_seconds() >= SESSION_TOUCH_SECONDS:
        yield execute("ui_session_touch", token_hash=token_hash)
    return found


def ui_session_delete(token_hash: str) -> Plan[bool]:
    return bool((yield count("ui_session_delete", token_hash=token_hash)))


def ui_session_revoke(tenant_id: str | None) -> Plan[int]:
    if tenant_id is None:
        return int((yield count("ui_session_revoke_all")))
    return int((yield count("ui_session_revoke_tenant", tenant_id=tenant_id)))


class IdentityMethods(Runs):
    """The identity methods of :class:`~duetime.store.protocols.Store`, for both backends."""

    async def signing_key_list(self) -> list[SigningKey]:
        return await self._run(signing_key_list())

    async def signing_key_add(
        self,
        kid: str,
        generation: int,
        algorithm: str,
        public_jwk: dict[str, Any],
        private_key: str,
        signs_in_seconds: float,
    ) -> bool:
        plan = signing_key_add(
            kid, generation, algorithm, public_jwk, private_key, signs_in_seconds
        )
        return await self._run(plan, write=True)

    async def signing_key_delete(self, kids: Sequence[str]) -> int:
        return await self._run(signing_key_delete(kids), write=True)

    async def client_certificate_put(
        self,
        tenant_id: str,
        name: str,
        certificate: str,
        private_key: str,
        fingerprint: str,
        subject: str,
        not_after: datetime,
    ) -> tuple[ClientCertificate, bool]:
        plan = client_certificate_put(
            tenant_id, name, certificate, private_key, fingerprint, subject, not_after
        )
        return await self._run(plan, write=True)

    async def client_certificate_get(self, tenant_id: str, name: str) -> ClientCertificate | None:
        return await self._run(client_certificate_get(tenant_id, name))

    async def client_certificate_list(self, tenant_id: str) -> list[ClientCertificate]:
        return await self._run(client_certificate_list(tenant_id))

    async def client_certificate_delete(self, tenant_id: str, name: str) -> bool:
        return await self._run(client_certificate_delete(tenant_id, name), write=True)

    async def held_payload_put(self, hold_id: str, tenant_id: str, payload_json: str) -> None:
        await self._run(held_payload_put(hold_id, tenant_id, payload_json), write=True)

    async def held_payload_link(self, hold_id: str, tenant_id: str, task_id: str) -> None:
        await self._run(held_payload_link(hold_id, tenant_id, task_id), write=True)

    async def held_payload_get(self, tenant_id: str, hold_id: str) -> HeldPayload | None:
        return await self._run(held_payload_get(tenant_id, hold_id))

    async def held_payload_delete(self, hold_id: str) -> bool:
        return await self._run(held_payload_delete(hold_id), write=True)

    async def held_payload_sweep(self, unlinked_seconds: float, limit: int) -> int:
        return await self._run(held_payload_sweep(unlinked_seconds, limit), write=True)

    async def ui_session_create(
        self,
        token_hash: str,
        tenant_id: str | None,
        key_id: str | None,
        lifetime_seconds: float,
        idle_seconds: float,
    ) -> UiSession:
        plan = ui_session_create(token_hash, tenant_id, key_id, lifetime_seconds, idle_seconds)
        return await self._run(plan, write=True)

    async def ui_session_use(self, token_hash: str, idle_seconds: float) -> UiSession | None:
        return await self._run(ui_session_use(token_hash, idle_seconds), write=True)

    async def ui_session_delete(self, token_hash: str) -> bool:
        return await self._run(ui_session_delete(token_hash), write=True)

    async def ui_session_revoke(self, tenant_id: str | None) -> int:
        return await self._run(ui_session_revoke(tenant_id), write=True)
