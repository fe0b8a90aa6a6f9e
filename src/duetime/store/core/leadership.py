"""Leadership leases (one row per name in ``leaders``) and the liveness probe, for both backends.

A holder keeps a name until its ``expires_at`` passes; only then, or after it resigns, may another
node take it.
"""

from __future__ import annotations

from duetime.store.core.plan import Plan, execute, value
from duetime.store.core.runner import Runs


def leader_attempt_elect(name: str, node_id: str, ttl_seconds: float) -> Plan[bool]:
    """Take or renew ``name`` unless another node holds an unexpired claim."""
    holder = yield value("leader_elect", name=name, node_id=node_id, ttl_seconds=float(ttl_seconds))
    return bool(holder == node_id)


def leader_resign(name: str, node_id: str) -> Plan[None]:
    yield execute("leader_resign", name=name, node_id=node_id)


def ping() -> Plan[None]:
    yield value("ping")


class LeadershipMethods(Runs):
    """``leader_attempt_elect``, ``leader_resign`` and ``ping`` of both backends (each one
    statement: no transaction around it on PostgreSQL)."""

    async def leader_attempt_elect(self, name: str, node_id: str, ttl_seconds: float) -> bool:
        return await self._run(
            leader_attempt_elect(name, node_id, ttl_seconds), write=True, one=True
        )

    async def leader_resign(self, name: str, node_id: str) -> None:
        await self._run(leader_resign(name, node_id), write=True, one=True)

    async def ping(self) -> None:
        """One round trip; ``StoreUnavailable`` when it cannot be made."""
        await self._run(ping())
