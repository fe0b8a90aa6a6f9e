"""A short-lived cache of each tenant's named credentials, so deliveries do not ask the store once
per request: all of a tenant's credentials (at most
:data:`~duetime.store.core.credentials.MAX_CREDENTIALS`) are read at once and kept ``ttl``
seconds. A credential put or replaced reaches every node within ``ttl``; a name the cache does not
know is read again at once (a credential just made is found, never reported missing from a stale
copy), and concurrent reads of one tenant share one store call."""

from __future__ import annotations

import asyncio

from duetime.clock import Clock
from duetime.store.protocols import CredentialStore
from duetime.types import Credential

_Entry = tuple[float, dict[str, Credential]]


class CredentialCache:
    """A :class:`~duetime.delivery.base.CredentialSource` over the store (see the module)."""

    def __init__(self, store: CredentialStore, clock: Clock, ttl: float = 5.0) -> None:
        self._store = store
        self._clock = clock
        self._ttl = ttl
        self._entries: dict[str, _Entry] = {}
        self._loading: dict[str, asyncio.Future[_Entry]] = {}

    async def get(self, tenant_id: str, name: str) -> Credential | None:
        entry = self._entries.get(tenant_id)
        if entry is not None and self._clock.monotonic() - entry[0] < self._ttl:
            found = entry[1].get(name)
            if found is not None:
                return found
        _, by_name = await self._load(tenant_id, after=None if entry is None else entry[0])
        return by_name.get(name)

    async def _load(self, tenant_id: str, after: float | None) -> _Entry:
        """The tenant's credentials read after ``after`` (monotonic time): a read in flight
        that started later is shared."""
        pending = self._loading.get(tenant_id)
        if pending is not None:
            return await asyncio.shield(pending)
        current = self._entries.get(tenant_id)
        if current is not None and after is not None and current[0] > after:
            return current  # another caller read it again meanwhile
        future: asyncio.Future[_Entry] = asyncio.get_running_loop().create_future()
        self._loading[tenant_id] = future
        started = self._clock.monotonic()
        try:
            found = await self._store.credential_list(tenant_id)
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # mark retrieved: waiters re-raise it themselves
            raise
        finally:
            del self._loading[tenant_id]
        entry = (started, {c.name: c for c in found})
        self._entries[tenant_id] = entry
        future.set_result(entry)
        return entry
