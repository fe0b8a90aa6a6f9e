"""Store conformance for declarative schedule keys (SPEC §3 ``PUT /v1/schedules/by-key/{key}``):
a key is unique per tenant among live schedules, so N processes declaring one schedule at once
make exactly one. Use it like :mod:`duetime.testing.conformance_schedules`."""

from __future__ import annotations

import asyncio

import pytest

from duetime.clock import FakeClock
from duetime.errors import Conflict
from duetime.store.protocols import Store
from duetime.types import NewSchedule, Schedule, ScheduleConfig, ScheduleFilter

_CONFIG = ScheduleConfig(
    cron="0 2 * * *", task={"target": {"type": "worker"}, "name": "report", "queue": "default"}
)


async def _keyed(store: Store, clock: FakeClock, tenant: str, key: str | None) -> Schedule:
    now = clock.now()
    return await store.schedule_create(
        NewSchedule(
            tenant_id=tenant,
            config=_CONFIG,
            anchor_at=now,
            materialized_until=now,
            revision={"cron": "0 2 * * *"},
            key=key,
        )
    )


async def test_schedule_key_is_unique_per_tenant_among_live_schedules(
    store: Store, clock: FakeClock
) -> None:
    """schedule_create with a key a live schedule of the tenant holds: Conflict, nothing made;
    another tenant may use it; deleting the schedule frees it; schedule_get_by_key finds it."""
    a = (await store.tenant_create("a")).id
    b = (await store.tenant_create("b")).id
    first = await _keyed(store, clock, a, "nightly")
    assert first.key == "nightly"
    assert await store.schedule_get_by_key(a, "nightly") == first
    assert await store.schedule_get_by_key(b, "nightly") is None
    assert await store.schedule_get_by_key(a, "other") is None
    with pytest.raises(Conflict):
        await _keyed(store, clock, a, "nightly")
    assert [s.id for s in await store.schedule_list(ScheduleFilter(tenant_id=a))] == [first.id]
    assert (await _keyed(store, clock, b, "nightly")).key == "nightly"
    # Keyless schedules never collide.
    await _keyed(store, clock, a, None)
    await _keyed(store, clock, a, None)
    await store.schedule_delete(a, first.id, None, {})
    assert await store.schedule_get_by_key(a, "nightly") is None
    again = await _keyed(store, clock, a, "nightly")
    assert await store.schedule_get_by_key(a, "nightly") == again


async def test_concurrent_creates_with_one_key_make_one_schedule(
    store: Store, clock: FakeClock
) -> None:
    """Eight creates of one key at once: exactly one succeeds, the others are Conflict."""
    tenant = (await store.tenant_create("a")).id
    results = await asyncio.gather(
        *(_keyed(store, clock, tenant, "race") for _ in range(8)), return_exceptions=True
    )
    made = [r for r in results if isinstance(r, Schedule)]
    refused = [r for r in results if isinstance(r, Conflict)]
    assert len(made) == 1 and len(refused) == 7, results
    listed = await store.schedule_list(ScheduleFilter(tenant_id=tenant))
    assert [s.id for s in listed] == [made[0].id]
