"""A circuit opening is a ``target.circuit_opened`` notification (SPEC §9), through the same
rate-limited notifier as dead letters."""

from __future__ import annotations

from datetime import timedelta

import orjson

from duetime.clock import FakeClock
from duetime.delivery import circuit as circuit_module
from duetime.delivery.circuit import Circuit, CircuitState
from duetime.engine.notifier import Notifier
from duetime.notify.events import CIRCUIT_OPENED, QUEUE
from duetime.store import Store
from duetime.types import TaskFilter

HOOK = {"type": "http", "url": "http://127.0.0.1:9/notify", "method": "POST", "headers": {}}


async def test_circuit_opened_notifies_once_per_window(store: Store, clock: FakeClock) -> None:
    tenant = (await store.tenant_create("acme")).id
    await store.notification_put(tenant, [CIRCUIT_OPENED], HOOK)
    notifier = Notifier(store, clock, window=60)
    notifier.listen()
    try:
        opened = Circuit(
            tenant,
            "https://a.example:443",
            CircuitState.OPEN,
            failures=5,
            cooldown=5.0,
            open_until=clock.now() + timedelta(seconds=5),
        )
        for listener in list(circuit_module._listeners):
            listener(opened)
            listener(Circuit(tenant, "https://b.example:443", CircuitState.CLOSED))
        assert await notifier.flush(force=False) == 1
    finally:
        await notifier.close()
    [task] = await store.task_list(TaskFilter(tenant_id=tenant, queue=QUEUE))
    body = orjson.loads(task.payload_json)
    assert body["type"] == CIRCUIT_OPENED and body["count"] == 1
    assert body["items"][0]["origin"] == "https://a.example:443"
    assert body["items"][0]["failures"] == 5
