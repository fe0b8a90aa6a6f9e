"""Store conformance for named credentials and the rows that hold sealed values: the contracts of
``credential_*`` and ``sealed_*`` in :mod:`duetime.store.protocols`, run unchanged against every
backend. The store keeps what it is given (the API seals secrets before it calls the store), so
the values here are opaque text.

Use it like :mod:`duetime.testing.conformance`, given ``store`` and ``clock`` fixtures::

    from duetime.testing.conformance_credentials import *  # noqa: F403
"""

from __future__ import annotations

from datetime import UTC, datetime

import orjson
import pytest

from duetime.clock import FakeClock
from duetime.errors import Conflict, ValidationError
from duetime.store.core.credentials import MAX_CREDENTIALS, SEALED_TABLES
from duetime.store.protocols import Store
from duetime.testing.conformance import _create, _tenant
from duetime.testing.conformance_schedules import _schedule
from duetime.types import SealedRow

SEALED = "dtenc2.00000000.0000000000000000.token"
"""Stands for a sealed value: the store neither reads nor checks it."""


async def test_credentials_are_put_replaced_listed_and_deleted_per_tenant(
    store: Store, clock: FakeClock
) -> None:
    a, b = await _tenant(store, "a"), await _tenant(store, "b")
    made, created = await store.credential_put(a, "billing-api", "header", "sealed-1")
    assert created and (made.name, made.kind, made.secret) == ("billing-api", "header", "sealed-1")
    assert made.created_at == made.updated_at == clock.now()
    clock.advance(5)
    again, created = await store.credential_put(a, "billing-api", "basic", "sealed-2")
    assert not created and (again.kind, again.secret) == ("basic", "sealed-2")
    assert again.created_at == made.created_at and again.updated_at == clock.now()
    await store.credential_put(a, "Api", "header", "sealed-3")
    await store.credential_put(b, "billing-api", "header", "sealed-b")
    assert [c.name for c in await store.credential_list(a)] == ["Api", "billing-api"]
    assert (await store.credential_get(b, "billing-api")).secret == "sealed-b"  # type: ignore[union-attr]
    assert await store.credential_get(b, "Api") is None, "another tenant's is not found"
    assert not await store.credential_delete(b, "Api")
    assert await store.credential_delete(a, "Api")
    assert await store.credential_get(a, "Api") is None
    assert [c.name for c in await store.credential_list(b)] == ["billing-api"]


async def test_a_tenant_holds_a_bounded_number_of_credentials(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    from duetime.store.core import credentials

    monkeypatch.setattr(credentials, "MAX_CREDENTIALS", 2)
    tenant = await _tenant(store)
    await store.credential_put(tenant, "one", "header", "s")
    await store.credential_put(tenant, "two", "header", "s")
    with pytest.raises(Conflict, match="2 credentials"):
        await store.credential_put(tenant, "three", "header", "s")
    await store.credential_put(tenant, "two", "basic", "s2")  # a replace is no new one
    assert MAX_CREDENTIALS >= 1000


async def test_sealed_rows_are_paged_in_key_order_and_replaced_only_as_read(
    store: Store, clock: FakeClock
) -> None:
    tenant = await _tenant(store)
    sealed_target = {"type": "http", "url": "https://h.example/", "headers": {"A": SEALED}}
    tasks = [await _create(store, tenant, target=sealed_target) for _ in range(3)]
    await _create(store, tenant, target={"type": "http", "url": "https://h.example/"})
    await _create(store, tenant, target={"type": "worker"})
    rows: list[SealedRow] = []
    after = None
    while page := await store.sealed_page("tasks", after, 2):
        rows += page
        after = page[-1]
    assert sorted(r.key for r in rows) == sorted(t.id for t in tasks), "only rows that may hold one"
    assert [r.key for r in rows] == sorted(r.key for r in rows)
    assert all(r.tenant_id == tenant and orjson.loads(r.raw) == sealed_target for r in rows)

    new = orjson.dumps({**sealed_target, "headers": {"A": "resealed"}}).decode()
    assert await store.sealed_replace(rows[0], new)
    assert not await store.sealed_replace(rows[0], new), "the row no longer holds what was read"
    found = await store.task_get(tenant, rows[0].key)
    assert found is not None and found.target["headers"] == {"A": "resealed"}
    assert found.version == tasks[0].version and found.updated_at == tasks[0].updated_at

    await _schedule(store, clock, tenant, task={"target": sealed_target, "name": "x"})
    await store.notification_put(tenant, ["task.dead_lettered"], sealed_target)
    await store.credential_put(tenant, "c", "header", SEALED)
    # What the node seals for itself: a client certificate's key, a signing key's private half.
    await store.client_certificate_put(
        tenant, "edge", "PEM", SEALED, "ab" * 32, "CN=edge", datetime(2030, 1, 1, tzinfo=UTC)
    )
    assert await store.signing_key_add("kid-c", 1, "ES256", {"kty": "EC"}, SEALED, 0)
    for table in SEALED_TABLES[1:]:
        [row] = await store.sealed_page(table, None, 10)
        owner = "" if table == "signing_keys" else tenant  # the node's keys: no tenant's
        assert row.tenant_id == owner and SEALED in row.raw, table
        assert await store.sealed_replace(row, row.raw.replace(SEALED, "again")), table
        assert SEALED not in (await store.sealed_page(table, None, 10))[0].raw
    with pytest.raises(ValidationError):
        await store.sealed_page("history", None, 10)
