"""Upkeep of what outbound identity keeps in the store, on the leader: held payloads no task
refers to any more are deleted, and the OIDC key ring is kept current (a key made by age and
retired keys pruned, even on a node that delivers nothing). See docs/security.md."""

from __future__ import annotations

from duetime.clock import Clock
from duetime.delivery.identity import KeyRing
from duetime.engine.leader import Leader
from duetime.engine.service import Service
from duetime.store.protocols import HeldPayloadStore

HELD_UNLINKED_SECONDS = 3600.0
"""A held payload no task took up (its create failed) is deleted after this long."""


class IdentityUpkeep(Service):
    """One round: sweep up to ``batch`` unreferenced held payloads, refresh the key ring."""

    name = "identity"

    def __init__(
        self,
        store: HeldPayloadStore,
        leader: Leader,
        clock: Clock,
        keys: KeyRing | None,
        *,
        interval: float = 60.0,
        batch: int = 1000,
    ) -> None:
        super().__init__(clock)
        self._store = store
        self._leader = leader
        self._keys = keys
        self._interval = interval
        self._batch = batch

    async def run_once(self) -> int:
        if not self._leader.is_leader:
            return 0
        swept = await self._store.held_payload_sweep(HELD_UNLINKED_SECONDS, self._batch)
        if self._keys is not None:
            await self._keys.upkeep()
        return swept

    async def wait(self, did: int) -> None:
        if did < self._batch:
            await self._pause(self._interval)
