"""The dispatcher's cache of named credentials: one store read per tenant for ``ttl`` seconds,
shared by concurrent deliveries; a name it does not know is read again at once, so a credential
just put is never reported missing from a stale copy."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from duetime.clock import FakeClock
from duetime.engine.credential_cache import CredentialCache
from duetime.types import Credential

T0 = datetime(2030, 1, 1, tzinfo=UTC)


class _Store:
    def __init__(self) -> None:
        self.rows: dict[str, list[Credential]] = {}
        self.reads = 0
        self.gate: asyncio.Event | None = None

    def put(self, tenant: str, name: str, secret: str) -> None:
        kept = [c for c in self.rows.get(tenant, []) if c.name != name]
        self.rows[tenant] = [*kept, Credential(tenant, name, "header", secret, T0, T0)]

    async def credential_list(self, tenant_id: str) -> list[Credential]:
        self.reads += 1
        if self.gate is not None:
            await self.gate.wait()
        return list(self.rows.get(tenant_id, []))


async def test_one_read_per_tenant_within_the_ttl_then_again() -> None:
    store, clock = _Store(), FakeClock(T0)
    cache = CredentialCache(store, clock, ttl=5.0)  # type: ignore[arg-type]
    store.put("t", "a", "s1")
    assert (await cache.get("t", "a")).secret == "s1"  # type: ignore[union-attr]
    store.put("t", "a", "s2")
    assert (await cache.get("t", "a")).secret == "s1"  # type: ignore[union-attr]
    assert store.reads == 1
    clock.advance(5.0)
    assert (await cache.get("t", "a")).secret == "s2"  # type: ignore[union-attr]
    assert store.reads == 2


async def test_a_name_not_known_is_read_again_at_once() -> None:
    store, clock = _Store(), FakeClock(T0)
    cache = CredentialCache(store, clock, ttl=5.0)  # type: ignore[arg-type]
    assert await cache.get("t", "new") is None
    store.put("t", "new", "s")
    found = await cache.get("t", "new")
    assert found is not None and found.secret == "s" and store.reads == 2


async def test_concurrent_deliveries_share_one_read() -> None:
    store, clock = _Store(), FakeClock(T0)
    store.put("t", "a", "s")
    store.gate = asyncio.Event()
    cache = CredentialCache(store, clock, ttl=5.0)  # type: ignore[arg-type]
    waiting = [asyncio.create_task(cache.get("t", "a")) for _ in range(20)]
    await asyncio.sleep(0)
    store.gate.set()
    assert {c.secret for c in await asyncio.gather(*waiting) if c} == {"s"}
    assert store.reads == 1
