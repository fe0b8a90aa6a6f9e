"""Store conformance for tenants and their quotas (SPEC §7 "Tenant quotas"): the contracts of
``tenant_*`` in :mod:`duetime.store.protocols`, run unchanged against every backend.

Use it like :mod:`duetime.testing.conformance`, given ``store`` and ``clock`` fixtures::

    from duetime.testing.conformance_tenants import *  # noqa: F403
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest

from duetime.clock import FakeClock
from duetime.errors import Conflict, NotFound
from duetime.store.protocols import Store
from duetime.testing.conformance import _create, _tenant
from duetime.testing.conformance_schedules import _schedule
from duetime.types import TargetCircuit, TenantQuotas


async def test_tenant_quotas_default_to_none_and_round_trip(store: Store) -> None:
    tenant = await store.tenant_create("acme")
    assert tenant.quotas == TenantQuotas()
    quotas = TenantQuotas(
        max_pending_tasks=10,
        max_creates_per_second=2.5,
        max_concurrency=4,
        max_schedules=3,
        weight=7,
    )
    updated = await store.tenant_quotas_put(tenant.id, quotas)
    assert updated.quotas == quotas
    found = await store.tenant_get(tenant.id)
    assert found is not None and found.quotas == quotas
    listed = {t.id: t for t in await store.tenant_list()}
    assert listed[tenant.id].quotas == quotas
    with pytest.raises(NotFound):
        await store.tenant_quotas_put("no-such-tenant", quotas)


async def test_tenant_list_is_oldest_first(store: Store, clock: FakeClock) -> None:
    first = await _tenant(store)
    clock.advance(1)
    second = await _tenant(store)
    ids = [t.id for t in await store.tenant_list()]
    assert ids.index(first) < ids.index(second)


async def test_usage_counts_tasks_not_ended(store: Store) -> None:
    tenant = await _tenant(store)
    assert (await store.tenant_usage(tenant)).pending_tasks == 0
    tasks = [await _create(store, tenant) for _ in range(3)]
    usage = await store.tenant_usage(tenant)
    assert usage.pending_tasks == 3 and usage.schedules == 0
    await store.task_cancel(tenant, tasks[0].id)
    assert (await store.tenant_usage(tenant)).pending_tasks == 2
    other = await _tenant(store)
    assert (await store.tenant_usage(other)).pending_tasks == 0
    many = await store.tenant_usage_many([tenant, other, "no-such-tenant"])
    assert {t: u.pending_tasks for t, u in many.items()} == {
        tenant: 2,
        other: 0,
        "no-such-tenant": 0,
    }
    assert await store.tenant_usage_many([]) == {}


async def test_create_bucket_refills_at_the_quota_rate(store: Store, clock: FakeClock) -> None:
    tenant = await _tenant(store)
    assert await store.tenant_creates_take(tenant, 1000) is None  # no quota: always
    await store.tenant_quotas_put(tenant, TenantQuotas(max_creates_per_second=2.0))
    assert await store.tenant_creates_take(tenant, 1) is None
    assert await store.tenant_creates_take(tenant, 1) is None
    wait = await store.tenant_creates_take(tenant, 1)
    assert wait == pytest.approx(0.5)
    clock.advance(0.5)
    assert await store.tenant_creates_take(tenant, 1) is None
    # A batch bigger than the bucket passes when it is full, then the debt is paid off.
    clock.advance(10)
    assert await store.tenant_creates_take(tenant, 6) is None
    wait = await store.tenant_creates_take(tenant, 1)
    assert wait == pytest.approx(2.5)
    clock.advance(2.5)
    assert await store.tenant_creates_take(tenant, 1) is None


async def test_delete_refuses_a_tenant_with_work_then_deletes(store: Store) -> None:
    tenant = await _tenant(store)
    task = await _create(store, tenant)
    with pytest.raises(Conflict, match="1 task"):
        await store.tenant_delete(tenant)
    await store.task_cancel(tenant, task.id)
    assert await store.tenant_delete(tenant) is True
    assert await store.tenant_get(tenant) is None
    assert await store.signing_secret_list(tenant) == []
    assert await store.tenant_delete(tenant) is False


async def test_usage_counts_live_schedules(store: Store, clock: FakeClock) -> None:
    tenant = await _tenant(store)
    schedule = await _schedule(store, clock, tenant)
    assert (await store.tenant_usage(tenant)).schedules == 1
    with pytest.raises(Conflict, match="1 schedule"):
        await store.tenant_delete(tenant)
    await store.schedule_delete(tenant, schedule.id, None, {})
    assert (await store.tenant_usage(tenant)).schedules == 0


async def test_circuits_round_trip_and_active_ones_expire(store: Store, clock: FakeClock) -> None:
    tenant = await _tenant(store)
    now = clock.now()
    opened = TargetCircuit(
        tenant_id=tenant,
        origin="https://hooks.example:443",
        state="open",
        failures=5,
        cooldown_seconds=5.0,
        open_until=now + timedelta(seconds=5),
        changed_at=now,
    )
    await store.circuit_put(opened)
    [listed] = await store.circuit_list(tenant)
    assert listed == dataclasses.replace(opened, opened=1)
    assert [c.origin for c in await store.circuit_active()] == [opened.origin]
    assert await store.circuit_list(await _tenant(store, "other")) == []
    clock.advance(6)
    assert await store.circuit_active() == []
    closed = dataclasses.replace(
        opened, state="closed", failures=0, cooldown_seconds=0.0, open_until=None
    )
    await store.circuit_put(closed)
    await store.circuit_put(dataclasses.replace(opened, open_until=clock.now() + timedelta(1)))
    [listed] = await store.circuit_list(tenant)
    assert listed.state == "open" and listed.opened == 2
    assert listed.changed_at == clock.now()
