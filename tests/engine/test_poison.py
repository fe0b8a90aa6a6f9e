"""No row stops an engine loop (SPEC §7 "Bounded by construction"), on both stores: a batch that
fails for anything but a store outage is split until the item to blame is found; that task gets a
failed attempt saying why (or, if even that cannot be written, is skipped); the healthy items are
recorded exactly once; the loop goes on. Poison rows are made with raw SQL
(see ``poison_rows.py``)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest
from aiohttp import web
from poison_rows import refuse, set_columns, sql
from test_materializer import make_schedule, node, tasks_of
from test_services import leader_for

from duetime.clock import FakeClock
from duetime.delivery.base import Delivery, Outcome
from duetime.delivery.webhook import WebhookDeliverer
from duetime.engine.completer import Completer
from duetime.engine.dispatcher import Dispatcher
from duetime.engine.promoter import Promoter
from duetime.engine.reaper import Reaper
from duetime.lifecycle.finish import Ack
from duetime.lifecycle.lease import LeaseHub
from duetime.store import Store
from duetime.testing.fakes import FakeDeliverer
from duetime.types import (
    AttemptOutcome,
    ClaimRequest,
    Completion,
    Lease,
    NewTask,
    RetryPolicy,
    TargetType,
    TaskStatus,
)

WORKER = {"type": "worker"}
HTTP_TARGET = {"type": "http", "url": "http://127.0.0.1:9/hook", "method": "POST"}


async def running(store: Store, tenant: str, n: int, **fields: object) -> list[Lease]:
    made = await store.task_create_many(
        [NewTask(tenant_id=tenant, target=WORKER, queue="q", **fields) for _ in range(n)]  # type: ignore[arg-type]
    )
    leases = await store.task_claim(
        ClaimRequest(
            worker_id="w1",
            limit=n,
            target_types=frozenset({TargetType.WORKER}),
            lease_seconds=30,
            queue="q",
            tenant_id=tenant,
        )
    )
    assert {lease.task.id for lease in leases} == {m.task.id for m in made}
    return leases


def succeeded(lease: Lease) -> Completion:
    assert lease.task.started_at is not None
    return Completion(
        task_id=lease.task.id,
        lease_id=lease.lease_id,
        outcome=AttemptOutcome.SUCCEEDED,
        started_at=lease.task.started_at,
        duration_ms=3.0,
        result_json='{"ok": true}',
        worker="w1",
        status=TaskStatus.SUCCEEDED,
    )


async def ended(store: Store, lease: Lease) -> tuple[TaskStatus, str | None, int]:
    """The task's status, last error and number of attempts recorded."""
    task = await store.task_get(lease.task.tenant_id, lease.task.id)
    assert task is not None
    attempts = await store.attempt_list(lease.task.tenant_id, lease.task.id)
    return task.status, task.last_error, len(attempts)


# -- completer (the dispatcher's completions) ------------------------------------------------


async def test_completer_fails_the_completion_the_store_refuses_and_records_the_rest(
    store: Store, store_url: str
) -> None:
    tenant = (await store.tenant_create("acme")).id
    leases = await running(store, tenant, 7)
    bad = leases[3]
    await refuse(store_url, "attempts", "INSERT", bad.task.id, unless_error=True)
    completer = Completer(store, batch=100, linger=0.001)
    completer.start()
    for lease in leases:
        completer.add(succeeded(lease))
    await asyncio.wait_for(completer.close(10.0), 30)
    for lease in leases:
        status, error, attempts = await ended(store, lease)
        assert attempts == 1, "every completion is recorded exactly once"
        if lease is bad:
            assert status is TaskStatus.FAILED
            assert error is not None
            assert error.startswith("could not record succeeded: ")
            assert "poison row refused" in error
        else:
            assert (status, error) == (TaskStatus.SUCCEEDED, None)


async def test_completer_skips_a_completion_that_cannot_be_recorded_at_all(
    store: Store, store_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    tenant = (await store.tenant_create("acme")).id
    leases = await running(store, tenant, 4)
    bad = leases[0]
    await refuse(store_url, "attempts", "INSERT", bad.task.id, unless_error=False)
    completer = Completer(store, batch=100, linger=0.001)
    completer.start()
    for lease in leases:
        completer.add(succeeded(lease))
    with caplog.at_level(logging.ERROR, "duetime.engine"):
        await asyncio.wait_for(completer.close(10.0), 30)
    assert await ended(store, bad) == (TaskStatus.RUNNING, None, 0)  # its lease will expire
    assert "could not record its failure either" in caplog.text
    for lease in leases[1:]:
        assert await ended(store, lease) == (TaskStatus.SUCCEEDED, None, 1)
    # The completer goes on: a later completion is recorded.
    [late] = await running(store, tenant, 1)
    completer = Completer(store, batch=100, linger=0.001)
    completer.start()
    completer.add(succeeded(late))
    await asyncio.wait_for(completer.close(10.0), 30)
    assert await ended(store, late) == (TaskStatus.SUCCEEDED, None, 1)


async def test_completer_close_ends_within_its_grace_while_flushes_keep_failing(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    tenant = (await store.tenant_create("acme")).id
    leases = await running(store, tenant, 3)
    await store.close()  # every flush now raises StoreUnavailable
    completer = Completer(store, batch=100, linger=0.001)
    completer.start()
    for lease in leases:
        completer.add(succeeded(lease))
    with caplog.at_level(logging.WARNING, "duetime.engine"):
        await asyncio.wait_for(completer.close(0.3), 10)
    assert completer.pending == 0
    assert "abandoning them" in caplog.text
    assert leases[0].task.id in caplog.text


# -- reaper ----------------------------------------------------------------------------------


async def test_reaper_goes_on_past_a_policy_whose_backoff_overflows_a_float(
    store: Store, store_url: str, clock: FakeClock
) -> None:
    leader = await leader_for(store, clock)
    leader.is_leader = True  # pinned: these tests move the clock past its TTL
    steep = RetryPolicy(max_attempts=1000, multiplier=100, jitter=0)
    [poisoned] = await running(store, (await store.tenant_create("a")).id, 1, retry=steep)
    [garbled] = await running(store, (await store.tenant_create("b")).id, 1)
    [healthy] = await running(store, (await store.tenant_create("c")).id, 1)
    # multiplier ** 199 overflows a float: unbounded, it would fail the reaper's whole round.
    await set_columns(store_url, "tasks", poisoned.task.id, attempts=200)
    retry_text = "'\"not a policy\"'" if store_url.startswith("sqlite:") else "'\"x\"'::jsonb"
    await set_columns(store_url, "tasks", garbled.task.id, retry=retry_text)
    clock.advance(60)
    reaper = Reaper(store, leader, clock, batch=100, interval=0.01)
    assert await reaper.run_once() == 3
    assert (await ended(store, poisoned))[0] is TaskStatus.RETRYING
    assert (await ended(store, garbled))[0] is TaskStatus.RETRYING
    assert (await ended(store, healthy))[0] is TaskStatus.RETRYING


async def test_reaper_fails_the_lease_ending_the_store_refuses_and_reaps_the_rest(
    store: Store, store_url: str, clock: FakeClock
) -> None:
    leader = await leader_for(store, clock)
    leader.is_leader = True  # pinned: these tests move the clock past its TTL
    leases = await running(store, (await store.tenant_create("a")).id, 5)
    bad = leases[2]
    await refuse(store_url, "attempts", "INSERT", bad.task.id, unless_error=True)
    clock.advance(60)
    reaper = Reaper(store, leader, clock, batch=100, interval=0.01)
    assert await reaper.run_once() == 5
    for lease in leases:
        status, error, attempts = await ended(store, lease)
        assert attempts == 1
        if lease is bad:
            assert status is TaskStatus.FAILED
            assert error is not None and error.startswith("could not record lease_expired: ")
        else:
            assert status is TaskStatus.RETRYING
    assert await reaper.run_once() == 0


# -- worker lease acks -------------------------------------------------------------------------


async def test_lease_acks_fail_the_one_the_store_refuses_and_record_the_rest(
    store: Store, store_url: str
) -> None:
    tenant = (await store.tenant_create("acme")).id
    leases = await running(store, tenant, 4)
    bad = leases[1]
    await refuse(store_url, "attempts", "INSERT", bad.task.id, unless_error=True)
    hub = LeaseHub(store)
    acks = [Ack(lease.lease_id, ok=True, result_json='{"n": 1}') for lease in leases[:2]]
    acks += [Ack(lease.lease_id, ok=False, error="worker says no\x00") for lease in leases[2:]]
    results = await hub.ack(tenant, acks)
    assert [r.task_status for r in results] == [
        TaskStatus.SUCCEEDED,
        TaskStatus.FAILED,
        TaskStatus.RETRYING,
        TaskStatus.RETRYING,
    ]
    status, error, attempts = await ended(store, bad)
    assert (status, attempts) == (TaskStatus.FAILED, 1)
    assert error is not None and error.startswith("could not record succeeded: ")
    assert (await ended(store, leases[2]))[1] == "worker says no\ufffd"


async def test_lease_fail_with_a_policy_whose_backoff_overflows_a_float_waits_the_cap(
    store: Store, store_url: str
) -> None:
    tenant = (await store.tenant_create("acme")).id
    steep = RetryPolicy(max_attempts=1000, multiplier=100, jitter=0, max_delay_seconds=60)
    [lease] = await running(store, tenant, 1, retry=steep)
    await set_columns(store_url, "tasks", lease.task.id, attempts=200)
    (result,) = await LeaseHub(store).ack(tenant, [Ack(lease.lease_id, ok=False, error="e")])
    assert result.task_status is TaskStatus.RETRYING
    task = await store.task_get(tenant, lease.task.id)
    assert task is not None
    assert task.due_at - await store.now() == timedelta(seconds=60)


# -- dispatcher: what a target answers ---------------------------------------------------------


@pytest.fixture
async def nul_receiver() -> AsyncIterator[str]:
    """A receiver on 127.0.0.1 whose replies hold NUL bytes (base URL)."""

    async def fail(request: web.Request) -> web.Response:
        return web.Response(status=500, body=b"bad\x00reply \x01\x1f end")

    async def succeed(request: web.Request) -> web.Response:
        return web.Response(status=200, body=b"ok\x00 not json")

    async def ok(request: web.Request) -> web.Response:
        return web.json_response({"fine": True})

    app = web.Application()
    app.router.add_post("/fail", fail)
    app.router.add_post("/succeed", succeed)
    app.router.add_post("/ok", ok)
    runner = web.AppRunner(app, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield f"http://127.0.0.1:{port}"
    await runner.cleanup()


async def test_a_nul_in_a_webhook_reply_is_recorded_alike_on_both_stores(
    store: Store, clock: FakeClock, nul_receiver: str
) -> None:
    # PostgreSQL refuses a NUL in text: stored raw, the batch would be put back and retried
    # forever, the healthy deliveries in it never recorded, and the node unable to stop.
    tenant = (await store.tenant_create("acme")).id
    ids = {}
    for path in ("fail", "succeed", "ok"):
        target = {"type": "http", "url": f"{nul_receiver}/{path}", "method": "POST"}
        [made] = await store.task_create_many([NewTask(tenant_id=tenant, target=target)])
        ids[path] = made.task.id
    deliverer = WebhookDeliverer(allow_private=True)
    dispatcher = Dispatcher(
        store,
        {TargetType.HTTP: deliverer},
        clock,
        node_id="node-a",
        concurrency=8,
        batch=8,
        poll_interval=0.01,
        lease_grace=5,
    )
    await dispatcher.start()
    try:
        assert await dispatcher.run_once() == 3
        await asyncio.wait_for(dispatcher.drain(grace=5), 30)
    finally:
        await deliverer.close()
    tasks = {path: await store.task_get(tenant, task_id) for path, task_id in ids.items()}
    failed, odd, fine = tasks["fail"], tasks["succeed"], tasks["ok"]
    assert failed is not None and odd is not None and fine is not None
    assert failed.status is TaskStatus.RETRYING
    assert failed.last_error == "HTTP 500: bad\ufffdreply \ufffd end"
    assert (odd.status, odd.result) == (TaskStatus.SUCCEEDED, "ok\ufffd not json")
    assert (fine.status, fine.result) == (TaskStatus.SUCCEEDED, {"fine": True})


# -- materializer ------------------------------------------------------------------------------


async def test_materializer_goes_on_past_schedules_it_cannot_read_plan_or_apply(
    store: Store, store_url: str, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    healthy = await make_schedule(store, clock, every="PT20S")
    unreadable = await make_schedule(store, clock, every="PT20S")
    unplannable = await make_schedule(store, clock, every="PT20S")
    refused = await make_schedule(store, clock, every="PT20S")
    # A value no release writes (the row cannot be read), an expression that cannot be
    # evaluated, and a schedule whose tasks the store refuses.
    await set_columns(store_url, "schedules", unreadable.id, resume_catchup="'bogus'")
    await set_columns(store_url, "schedules", unplannable.id, every="'not a duration'")
    await refuse_schedule_tasks(store_url, refused.id)
    materializer = await node(store, clock)
    with caplog.at_level(logging.ERROR, "duetime.engine"):
        assert await materializer.run_once() > 0
    assert len(await tasks_of(store, healthy)) == 3  # 0 s, 20 s, 40 s: within the horizon
    for broken in (unreadable, unplannable, refused):
        assert await tasks_of(store, broken) == []
    assert f"schedule {unreadable.id} cannot be read" in caplog.text
    assert f"schedule {unplannable.id} (version 1) is left alone" in caplog.text
    assert f"schedule {refused.id} (version 1) is left alone" in caplog.text
    # Later rounds go on for the healthy one and do not retry the broken ones every time.
    caplog.clear()
    clock.advance(60)
    with caplog.at_level(logging.ERROR, "duetime.engine"):
        assert await materializer.run_once() > 0
    assert len(await tasks_of(store, healthy)) == 6
    assert "left alone" not in caplog.text


async def refuse_schedule_tasks(url: str, schedule_id: str) -> None:
    if url.startswith("sqlite:"):
        await sql(
            url,
            f"CREATE TRIGGER poison_schedule BEFORE INSERT ON tasks WHEN NEW.schedule_id = "
            f"'{schedule_id}' BEGIN SELECT RAISE(ABORT, 'poison row refused'); END",
        )
        return
    await sql(
        url,
        "CREATE FUNCTION poison_schedule() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        f"IF NEW.schedule_id = '{schedule_id}' THEN RAISE EXCEPTION 'poison row refused' "
        "USING ERRCODE = '22000'; END IF; RETURN NEW; END $$",
        "CREATE TRIGGER poison_schedule BEFORE INSERT ON tasks FOR EACH ROW "
        "EXECUTE FUNCTION poison_schedule()",
    )


# -- promoter ----------------------------------------------------------------------------------


async def test_promoter_promotes_around_a_task_the_store_refuses_to_promote(
    store: Store, store_url: str, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    leader = await leader_for(store, clock)
    leader.is_leader = True  # pinned: these tests move the clock past its TTL
    tenant = (await store.tenant_create("acme")).id
    soon = clock.now() + timedelta(seconds=5)
    made = await store.task_create_many(
        [NewTask(tenant_id=tenant, target=WORKER, run_at=soon) for _ in range(6)]
    )
    ids = [m.task.id for m in made]
    bad = ids[0]
    await sql_refuse_ready(store_url, bad)
    clock.advance(10)
    promoter = Promoter(store, leader, clock, batch=100, poll_interval=0.01)
    with caplog.at_level(logging.ERROR, "duetime.engine"):
        assert await promoter.run_once() == 5
    assert f"task {bad}: could not promote" in caplog.text
    statuses = [(await store.task_get(tenant, i)).status for i in ids]  # type: ignore[union-attr]
    assert statuses == [TaskStatus.SCHEDULED] + [TaskStatus.READY] * 5
    # Later rounds go on (skipping the held task) and do not spin on it.
    [later] = await store.task_create_many(
        [NewTask(tenant_id=tenant, target=WORKER, run_at=clock.now() + timedelta(seconds=1))]
    )
    clock.advance(2)
    assert await promoter.run_once() == 1
    assert (await store.task_get(tenant, later.task.id)).status is TaskStatus.READY  # type: ignore[union-attr]
    await asyncio.wait_for(promoter.wait(0), 5)


async def sql_refuse_ready(url: str, task_id: str) -> None:
    """A trigger that refuses to make ``task_id`` ready."""
    if url.startswith("sqlite:"):
        await sql(
            url,
            "CREATE TRIGGER poison_promote BEFORE UPDATE ON tasks WHEN NEW.id = "
            f"'{task_id}' AND NEW.status = 'ready' BEGIN SELECT RAISE(ABORT, 'poison'); END",
        )
        return
    await sql(
        url,
        "CREATE FUNCTION poison_promote() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        f"IF NEW.id = '{task_id}'::uuid AND NEW.status = 'ready' THEN RAISE EXCEPTION 'poison' "
        "USING ERRCODE = '22000'; END IF; RETURN NEW; END $$",
        "CREATE TRIGGER poison_promote BEFORE UPDATE ON tasks FOR EACH ROW "
        "EXECUTE FUNCTION poison_promote()",
    )


async def test_reaper_holds_a_lease_whose_ending_cannot_be_recorded_at_all(
    store: Store, store_url: str, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    leader = await leader_for(store, clock)
    leader.is_leader = True  # pinned: these tests move the clock past its TTL
    tenant = (await store.tenant_create("a")).id
    [stuck] = await running(store, tenant, 1)
    await refuse(store_url, "attempts", "INSERT", stuck.task.id, unless_error=False)
    clock.advance(60)
    [other] = await running(store, tenant, 1)
    clock.advance(60)
    reaper = Reaper(store, leader, clock, batch=1, interval=0.01)  # the stuck one comes first
    with caplog.at_level(logging.ERROR, "duetime.engine"):
        assert await reaper.run_once() == 0
        assert "could not record its failure either" in caplog.text
        caplog.clear()
        assert await reaper.run_once() == 1  # the next round skips the held lease
    assert "could not record" not in caplog.text
    assert (await ended(store, other))[0] is TaskStatus.RETRYING
    assert await ended(store, stuck) == (TaskStatus.RUNNING, None, 0)


# -- stopping ----------------------------------------------------------------------------------


async def test_a_node_stops_within_its_grace_while_completions_cannot_be_written(
    store: Store, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    tenant = (await store.tenant_create("acme")).id
    await store.task_create_many([NewTask(tenant_id=tenant, target=HTTP_TARGET) for _ in range(3)])
    release = asyncio.Event()

    async def slow(delivery: Delivery) -> Outcome:
        await release.wait()
        return Outcome(AttemptOutcome.SUCCEEDED, retryable=False)

    dispatcher = Dispatcher(
        store,
        {TargetType.HTTP: FakeDeliverer(slow)},
        clock,
        node_id="node-a",
        concurrency=8,
        batch=8,
        poll_interval=0.01,
        lease_grace=5,
    )
    await dispatcher.start()
    assert await dispatcher.run_once() == 3
    await store.close()  # from here on every flush fails (as SIGTERM arrives)
    release.set()
    with caplog.at_level(logging.WARNING, "duetime.engine"):
        await asyncio.wait_for(dispatcher.drain(grace=0.5), 10)
    assert "could not flush 3 completions" in caplog.text
