"""Missed schedule ticks reach the notifier: a real materializer round after downtime (both
stores, pinned clock) tells the listeners and records the event in its own transaction, and the
leader's notifier turns it into a ``schedule.tick_missed`` notification task on the
notifications queue."""

from __future__ import annotations

import orjson

from duetime.clock import FakeClock
from duetime.engine.leader import Leader
from duetime.engine.materializer import TICK_LISTENERS, Materializer, MaterializerConfig
from duetime.engine.notifier import Notifier
from duetime.notify.events import QUEUE, SCHEDULE_TICK_MISSED
from duetime.schedule.plan import PlanLimits
from duetime.store import Store
from duetime.types import CatchupPolicy, NewSchedule, ScheduleConfig, TaskFilter

LIMITS = PlanLimits(horizon_seconds=0, late_seconds=5)


async def materializer(store: Store, clock: FakeClock, name: str) -> Materializer:
    leader = Leader(store, name, ttl_seconds=10, clock=clock)
    leader.is_leader = True
    return Materializer(store, leader, clock, MaterializerConfig(limits=LIMITS))


async def test_downtime_notifies_missed_ticks(store: Store, clock: FakeClock) -> None:
    tenant = await store.tenant_create("t1", tenant_id="t1")
    now = clock.now()
    schedule = await store.schedule_create(
        NewSchedule(
            tenant_id=tenant.id,
            config=ScheduleConfig(
                every="PT1M",
                catchup=CatchupPolicy.NONE,
                task={"target": {"type": "worker"}, "name": "tick"},
            ),
            anchor_at=now,
            materialized_until=now,
        )
    )
    target = {"type": "http", "url": "http://127.0.0.1:9/notify", "method": "POST"}
    await store.notification_put(tenant.id, [SCHEDULE_TICK_MISSED], target)
    leader = Leader(store, "new", ttl_seconds=10, clock=clock)
    leader.is_leader = True
    notifier = Notifier(store, leader, clock, window=60)
    heard: list[tuple[object, ...]] = []

    def hear(*args: object) -> None:
        heard.append(args)

    TICK_LISTENERS.append(hear)
    try:
        await (await materializer(store, clock, "old")).run_once()
        clock.advance(4 * 60)  # the node was down for four minutes
        await (await materializer(store, clock, "new")).run_once()
        assert heard == [("t1", schedule.id, 3)]
        assert await store.notification_events_count() == 1  # durable before it is sent
        assert await notifier.run_once() == 1
        assert await store.notification_events_count() == 0
        assert await notifier.run_once() == 0  # each event is in one notification
    finally:
        TICK_LISTENERS.remove(hear)
    (task,) = await store.task_list(TaskFilter(tenant_id=tenant.id, queue=QUEUE))
    body = orjson.loads(task.payload_json)
    assert body["type"] == SCHEDULE_TICK_MISSED and body["count"] == 1
    assert body["items"] == [{"schedule_id": schedule.id, "missed": 3}]
    assert task.target["url"] == target["url"] and task.name == SCHEDULE_TICK_MISSED
