"""A circuit recorded open is a ``target.circuit_opened`` notification (SPEC §9), recorded in
the transaction of the circuit's record and sent by the leader's notifier, at most once per
window per tenant and type (a digest of the rest after it)."""

from __future__ import annotations

from datetime import timedelta

import orjson

from duetime.clock import FakeClock
from duetime.engine.leader import Leader
from duetime.engine.notifier import Notifier
from duetime.notify.events import CIRCUIT_OPENED, QUEUE
from duetime.store import Store
from duetime.types import TargetCircuit, TaskFilter

HOOK = {"type": "http", "url": "http://127.0.0.1:9/notify", "method": "POST", "headers": {}}


def _circuit(tenant: str, origin: str, state: str, clock: FakeClock) -> TargetCircuit:
    return TargetCircuit(
        tenant_id=tenant,
        origin=origin,
        state=state,
        failures=5,
        cooldown_seconds=5.0,
        open_until=clock.now() + timedelta(seconds=5) if state == "open" else None,
        changed_at=clock.now(),
    )


async def test_circuit_opened_notifies_once_per_window(store: Store, clock: FakeClock) -> None:
    tenant = (await store.tenant_create("acme")).id
    quiet = (await store.tenant_create("quiet")).id  # asked for nothing: records nothing
    await store.notification_put(tenant, [CIRCUIT_OPENED], HOOK)
    leader = Leader(store, "node-a", ttl_seconds=10, clock=clock)
    leader.is_leader = True
    notifier = Notifier(store, leader, clock, window=60)
    await store.circuit_put(_circuit(tenant, "https://a.example:443", "open", clock))
    await store.circuit_put(_circuit(tenant, "https://b.example:443", "closed", clock))
    await store.circuit_put(_circuit(quiet, "https://a.example:443", "open", clock))
    assert await store.notification_events_count() == 1
    assert await notifier.run_once() == 1
    [task] = await store.task_list(TaskFilter(tenant_id=tenant, queue=QUEUE))
    body = orjson.loads(task.payload_json)
    assert body["type"] == CIRCUIT_OPENED and body["count"] == 1
    assert body["items"][0]["origin"] == "https://a.example:443"
    assert body["items"][0]["failures"] == 5
    assert task.idempotency_key == body["id"] and body["id"].startswith("evt_")
    # Within the window the next openings wait; after it they go as one digest.
    for origin in ("https://c.example:443", "https://d.example:443"):
        await store.circuit_put(_circuit(tenant, origin, "open", clock))
    assert await notifier.run_once() == 0
    clock.advance(61)
    assert await notifier.run_once() == 1
    tasks = await store.task_list(TaskFilter(tenant_id=tenant, queue=QUEUE))
    digest = orjson.loads(tasks[0].payload_json)
    assert digest["count"] == 2 and digest["digest"] is True
    assert await store.notification_events_count() == 0
    # Only the leader sends.
    leader.is_leader = False
    await store.circuit_put(_circuit(tenant, "https://e.example:443", "open", clock))
    clock.advance(61)
    assert await notifier.run_once() == 0 and await store.notification_events_count() == 1
