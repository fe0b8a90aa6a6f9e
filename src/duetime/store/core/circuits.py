"""Circuit breakers' shared state (SPEC §7 "Target protection"): what each process saw last,
written on every change of state (:mod:`duetime.delivery.circuit`)."""

from __future__ import annotations

from duetime.store.core.outbox import CIRCUIT_OPENED, event_record
from duetime.store.core.plan import Decode, Plan, Row, all_, execute
from duetime.store.core.runner import Runs
from duetime.types import TargetCircuit


def circuit(r: Row, d: type[Decode]) -> TargetCircuit:
    return TargetCircuit(
        tenant_id=r["tenant_id"],
        origin=r["origin"],
        state=r["state"],
        failures=r["failures"],
        cooldown_seconds=r["cooldown_seconds"],
        open_until=d.opt_time(r["open_until"]),
        changed_at=d.time(r["changed_at"]),
        opened=r["opened"],
    )


def circuit_put(c: TargetCircuit) -> Plan[None]:
    yield execute(
        "circuit_put",
        tenant_id=c.tenant_id,
        origin=c.origin,
        state=c.state,
        failures=c.failures,
        cooldown_seconds=c.cooldown_seconds,
        open_until=c.open_until,
    )
    if c.state == "open":  # the tenant's notification, in the transaction of the record
        item = {
            "origin": c.origin,
            "failures": c.failures,
            "cooldown_seconds": c.cooldown_seconds,
            "open_until": None if c.open_until is None else c.open_until.isoformat(),
        }
        yield from event_record(c.tenant_id, CIRCUIT_OPENED, item)


def circuit_list(tenant_id: str) -> Plan[list[TargetCircuit]]:
    found: list[TargetCircuit] = yield all_("circuit_list", circuit, tenant_id=tenant_id)
    return found


def circuit_active(limit: int) -> Plan[list[TargetCircuit]]:
    found: list[TargetCircuit] = yield all_("circuit_active", circuit, limit=limit)
    return found


class CircuitMethods(Runs):
    async def circuit_put(self, circuit: TargetCircuit) -> None:
        await self._run(circuit_put(circuit), write=True)

    async def circuit_list(self, tenant_id: str) -> list[TargetCircuit]:
        return await self._run(circuit_list(tenant_id))

    async def circuit_active(self, limit: int = 10_000) -> list[TargetCircuit]:
        return await self._run(circuit_active(limit))
