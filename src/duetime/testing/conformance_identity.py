"""Store conformance for signing keys, client certificates, held payloads and dashboard sessions
(docs/security.md): the contracts of :class:`~duetime.store.protocols.SigningKeyStore`,
:class:`~duetime.store.protocols.ClientCertificateStore`,
:class:`~duetime.store.protocols.HeldPayloadStore` and
:class:`~duetime.store.protocols.SessionStore`, run unchanged against every backend.

Use it like :mod:`duetime.testing.conformance`, given ``store`` and ``clock`` fixtures::

    from duetime.testing.conformance_identity import *  # noqa: F403
"""

from __future__ import annotations

from datetime import timedelta

from duetime.clock import FakeClock
from duetime.history.retention import RetentionPolicy
from duetime.store.protocols import Store
from duetime.testing.conformance import _create, _tenant

_JWK = {"kty": "EC", "crv": "P-256", "x": "x", "y": "y"}


async def test_signing_keys_one_per_generation_oldest_first(store: Store, clock: FakeClock) -> None:
    assert await store.signing_key_list() == []
    assert await store.signing_key_add("k1", 1, "ES256", _JWK, "sealed-1", 0)
    clock.advance(10)
    assert await store.signing_key_add("k2", 2, "ES256", _JWK, "sealed-2", 900)
    # Another node rotating at the same moment makes no second key of that generation.
    assert not await store.signing_key_add("k2-other", 2, "ES256", _JWK, "sealed-x", 900)
    keys = await store.signing_key_list()
    assert [k.kid for k in keys] == ["k1", "k2"]
    first, second = keys
    assert first.public_jwk == _JWK and first.private_key == "sealed-1"
    assert first.signs_from == first.created_at
    assert second.created_at == first.created_at + timedelta(seconds=10)
    assert second.signs_from == second.created_at + timedelta(seconds=900)
    assert await store.signing_key_delete(["k1", "nope"]) == 1
    assert [k.kid for k in await store.signing_key_list()] == ["k2"]


async def test_client_certificates_are_per_tenant_and_replaced_by_name(
    store: Store, clock: FakeClock
) -> None:
    acme, globex = await _tenant(store, "acme"), await _tenant(store, "globex")
    not_after = clock.now() + timedelta(days=30)
    cert, created = await store.client_certificate_put(
        acme, "billing", "PEM1", "sealed1", "ab" * 32, "CN=a", not_after
    )
    assert created and cert.tenant_id == acme and cert.not_after == not_after
    clock.advance(5)
    cert2, created = await store.client_certificate_put(
        acme, "billing", "PEM2", "sealed2", "cd" * 32, "CN=b", not_after
    )
    assert not created
    assert (cert2.certificate, cert2.private_key, cert2.subject) == ("PEM2", "sealed2", "CN=b")
    assert cert2.created_at == cert.created_at
    assert cert2.updated_at == cert.created_at + timedelta(seconds=5)
    assert await store.client_certificate_get(globex, "billing") is None
    assert [c.name for c in await store.client_certificate_list(acme)] == ["billing"]
    assert await store.client_certificate_list(globex) == []
    assert not await store.client_certificate_delete(globex, "billing")
    assert await store.client_certificate_delete(acme, "billing")
    assert await store.client_certificate_get(acme, "billing") is None


async def test_held_payloads_are_read_by_tenant_and_swept_when_unreferenced(
    store: Store, clock: FakeClock
) -> None:
    acme, globex = await _tenant(store, "acme"), await _tenant(store, "globex")
    task = await _create(store, acme, name="held")
    await store.held_payload_put("hp-linked", acme, '{"big": 1}')
    await store.held_payload_link("hp-linked", acme, task.id)
    await store.held_payload_put("hp-orphan", acme, "[1]")
    held = await store.held_payload_get(acme, "hp-linked")
    assert held is not None and held.task_id == task.id and held.payload_json == '{"big": 1}'
    assert await store.held_payload_get(globex, "hp-linked") is None
    # A fresh unlinked hold may still be linked by the create that made it.
    assert await store.held_payload_sweep(3600, 100) == 0
    clock.advance(3601)
    assert await store.held_payload_sweep(3600, 100) == 1
    assert await store.held_payload_get(acme, "hp-orphan") is None
    assert await store.held_payload_get(acme, "hp-linked") is not None
    # The task ends and retention removes it: its hold goes with the next sweep.
    await store.task_cancel(acme, task.id)
    clock.advance(10)
    assert await store.task_retention_sweep(RetentionPolicy(1, 1, 1), 100) == 1
    assert await store.held_payload_sweep(3600, 100) == 1
    assert await store.held_payload_get(acme, "hp-linked") is None
    await store.held_payload_put("hp-gone", acme, "null")
    assert await store.held_payload_delete("hp-gone")
    assert not await store.held_payload_delete("hp-gone")


async def test_sessions_end_at_their_absolute_and_idle_limits(
    store: Store, clock: FakeClock
) -> None:
    acme = await _tenant(store, "acme")
    await store.api_key_create(acme, "key1", "hash-of-key1")
    made = await store.ui_session_create("s1", acme, "key1", 3600, 600)
    assert made.tenant_id == acme and not made.admin
    assert made.expires_at == made.created_at + timedelta(seconds=3600)
    for _ in range(6):  # used every 9 minutes: never idle for 10
        clock.advance(540)
        assert await store.ui_session_use("s1", 600) is not None
    clock.advance(540)  # 3780 s after login: past the absolute limit
    assert await store.ui_session_use("s1", 600) is None
    await store.ui_session_create("s2", acme, "key1", 3600, 600)
    clock.advance(601)
    assert await store.ui_session_use("s2", 600) is None
    assert await store.ui_session_use("unknown", 600) is None


async def test_sessions_end_on_logout_revocation_and_key_deletion(
    store: Store, clock: FakeClock
) -> None:
    acme, globex = await _tenant(store, "acme"), await _tenant(store, "globex")
    await store.api_key_create(acme, "ka", "hash-a")
    await store.api_key_create(globex, "kg", "hash-g")
    await store.ui_session_create("a1", acme, "ka", 3600, 600)
    await store.ui_session_create("a2", acme, "ka", 3600, 600)
    await store.ui_session_create("g1", globex, "kg", 3600, 600)
    admin = await store.ui_session_create("admin", None, None, 3600, 600)
    assert admin.admin
    assert await store.ui_session_delete("a1")
    assert await store.ui_session_use("a1", 600) is None
    assert await store.ui_session_revoke(acme) == 1
    assert await store.ui_session_use("a2", 600) is None
    assert await store.ui_session_use("g1", 600) is not None
    assert await store.api_key_delete("kg")
    assert await store.ui_session_use("g1", 600) is None  # its key is gone
    assert await store.ui_session_use("admin", 600) is not None
    assert await store.ui_session_revoke(None) == 2  # g1's row and the admin's
    assert await store.ui_session_use("admin", 600) is None
