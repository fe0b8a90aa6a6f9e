"""A short-lived cache of each tenant's live signing secrets, so deliveries do not ask the store
once per request. A rotation reaches every node within ``ttl`` seconds; the old secret stays valid
for the rotation's overlap, which is far longer."""

from __future__ import annotations

import asyncio

from duetime.clock import Clock
from duetime.store.protocols import SecretStore


class SecretCache:
    def __init__(self, store: SecretStore, clock: Clock, ttl: float = 5.0) -> None:
        self._store = store
        self._clock = clock
        self._ttl = ttl
        self._entries: dict[str, tuple[float, tuple[str, ...]]] = {}
        self._loading: dict[str, asyncio.Future[tuple[str, ...]]] = {}

    async def get(self, tenant_id: str) -> tuple[str, ...]:
        entry = self._entries.get(tenant_id)
        now = self._clock.monotonic()
        if entry is not None and now - entry[0] < self._ttl:
            return entry[1]
        pending = self._loading.get(tenant_id)
        if pending is not None:
            return await asyncio.shield(pending)
        future: asyncio.Future[tuple[str, ...]] = asyncio.get_running_loop().create_future()
        self._loading[tenant_id] = future
        try:
            secrets = tuple(s.secret for s in await self._store.signing_secret_list(tenant_id))
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # mark retrieved: waiters re-raise it themselves
            raise
        finally:
            del self._loading[tenant_id]
        self._entries[tenant_id] = (now, secrets)
        future.set_result(secrets)
        return secrets
