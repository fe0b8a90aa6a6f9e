"""Direct handoff: a lone worker task created while a lease poll of its queue waits on the node
is claimed for that poll in the create's own transaction (both stores; with the setting off,
the poll claims after its wake-up instead). Either way the poll gets the task once, with one
attempt and the life cycle ready -> running; a poll gone before its handoff lands gives the
task back unspent, and queue limits hold."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from api_helpers import ADMIN_TOKEN, TenantKey, make_tenant
from fastapi import FastAPI
from lease_helpers import create, lease, polls_waiting, task

from duetime.api.app import create_app
from duetime.config import Settings
from duetime.lifecycle.lease import LeaseHub
from duetime.store import Store
from duetime.store.protocols import CreateHandoff
from duetime.types import ClaimRequest, Lease, NewTask, TargetType


def _handoff(store: Store) -> bool:
    return isinstance(store, CreateHandoff)


async def _history(api: httpx.AsyncClient, task_id: str) -> list[tuple[Any, Any]]:
    resp = await api.get("/v1/history", params={"task_id": task_id})
    assert resp.status_code == 200, resp.text
    records = sorted(resp.json()["items"], key=lambda r: (r["at"], r["id"]))
    return [(r["from_status"], r["to_status"]) for r in records if r["kind"] == "task"]


async def test_a_create_goes_to_the_waiting_poll(
    api: httpx.AsyncClient, app: FastAPI, store: Store
) -> None:
    poll = asyncio.ensure_future(lease(api, "q", wait_seconds=5, worker_id="w-1"))
    await polls_waiting(app, 1)
    made = await create(api, queue="q", name="now")
    (got,) = await asyncio.wait_for(poll, 5)
    assert got["task"]["id"] == made["id"] and got["attempt"] == 1
    # Handed over in the create's transaction, the task is answered as it is: running.
    assert made["status"] == ("running" if _handoff(store) else "ready")
    shown = await task(api, made["id"])
    assert shown["status"] == "running" and shown["attempts"] == 1
    # The life cycle is the same: created ready, then claimed by the worker.
    assert await _history(api, made["id"]) == [(None, "ready"), ("ready", "running")]
    ack = await api.post(f"/v1/leases/{got['lease_id']}/complete", json={"result": 1})
    assert ack.status_code == 200, ack.text
    assert (await task(api, made["id"]))["status"] == "succeeded"
    assert hub_waiters(app) == 0


def hub_waiters(app: FastAPI) -> int:
    return sum(len(w) for w in hub_of(app)._waiters.values())


async def test_without_a_waiting_poll_a_create_stays_ready(
    api: httpx.AsyncClient, app: FastAPI
) -> None:
    made = await create(api, queue="q")
    assert made["status"] == "ready"
    other = asyncio.ensure_future(lease(api, "elsewhere", wait_seconds=5))
    await polls_waiting(app, 1)
    second = await create(api, queue="q")  # a poll waits, but on another queue
    assert second["status"] == "ready"
    assert {x["task"]["id"] for x in await lease(api, "q", max_tasks=5)} == {
        made["id"],
        second["id"],
    }
    await create(api, queue="elsewhere")
    assert len(await asyncio.wait_for(other, 5)) == 1
    assert hub_waiters(app) == 0


async def test_a_handoff_keeps_the_queue_limit(api: httpx.AsyncClient, app: FastAPI) -> None:
    """A full limited queue hands nothing over (PostgreSQL leaves limited queues to the poll's
    own locked claim; SQLite claims them in its one writer's transaction, within the limit):
    the new task waits, and the poll gets it once the running one ends."""
    resp = await api.put("/v1/queues/q", json={"max_concurrency": 1})
    assert resp.status_code == 200, resp.text
    await create(api, queue="q")
    (held,) = await lease(api, "q")  # running: the queue is full
    poll = asyncio.ensure_future(lease(api, "q", wait_seconds=5))
    await polls_waiting(app, 1)
    second = await create(api, queue="q")
    assert second["status"] == "ready"
    await asyncio.sleep(0.05)
    assert not poll.done()
    done = await api.post(f"/v1/leases/{held['lease_id']}/complete", json={"result": 1})
    assert done.status_code == 200, done.text
    (got,) = await asyncio.wait_for(poll, 5)
    assert got["task"]["id"] == second["id"]


async def test_a_poll_gone_before_the_handoff_gives_the_task_back(
    api: httpx.AsyncClient, app: FastAPI, store: Store, tenant: TenantKey
) -> None:
    """The create reserved a poll that then went away (its caller hung up): the task it
    claimed is released at once, ready again with its attempt unspent, not left to its lease's
    expiry."""
    await create(api, queue="warm")  # the app's lease hub exists from here on
    claim = _claim_q(tenant.id, limit=1, worker_id="w-gone")
    leases = hub_of(app)
    waiter = leases._await_handoff(claim, tenant.id, "q")
    waiter.handed.cancel()  # the poll left before taking itself off the list
    made = await create(api, queue="q")
    assert made["status"] == "ready"
    shown = await task(api, made["id"])
    assert shown["status"] == "ready" and shown["attempts"] == 0
    (got,) = await lease(api, "q")
    assert got["task"]["id"] == made["id"] and got["attempt"] == 1
    # A store without handoffs never takes a waiter off the list.
    assert hub_waiters(app) == (0 if _handoff(store) else 1)


def hub_of(app: FastAPI) -> LeaseHub:
    found = app.state.services.leases
    assert isinstance(found, LeaseHub)
    return found


async def test_handoffs_can_be_turned_off(store: Store) -> None:
    """``DUETIME_LEASE_HANDOFF=false``: the create commits alone, the poll claims after its
    wake-up (the create answers ``ready``)."""
    app = create_app(Settings(admin_token=ADMIN_TOKEN, lease_handoff=False), store)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://duetime.test") as client:
        client.headers.update((await make_tenant(client, "acme")).headers)
        poll = asyncio.ensure_future(lease(client, "q", wait_seconds=5))
        await polls_waiting(app, 1)
        made = await create(client, queue="q")
        assert made["status"] == "ready"
        (got,) = await asyncio.wait_for(poll, 5)
        assert got["task"]["id"] == made["id"]
        assert hub_waiters(app) == 0


def _claim_q(tenant_id: str, *, limit: int, worker_id: str = "w-1") -> ClaimRequest:
    """A worker claim of queue ``q`` (what a lease poll asks the store for)."""
    return ClaimRequest(
        worker_id=worker_id,
        limit=limit,
        target_types=frozenset({TargetType.WORKER}),
        lease_seconds=60,
        queue="q",
        tenant_id=tenant_id,
    )


async def _two_leases(store: Store, tenant_id: str) -> list[Lease]:
    made = await store.task_create_many(
        [NewTask(tenant_id=tenant_id, target={"type": "worker"}, queue="q") for _ in range(2)]
    )
    leases = await store.task_claim(_claim_q(tenant_id, limit=2))
    assert {lease.task.id for lease in leases} == {m.task.id for m in made}
    return leases


async def test_a_poll_that_claimed_for_itself_gives_back_a_late_handoff(
    store: Store, tenant: TenantKey
) -> None:
    """A poll reserved by a create claimed tasks of its own before the handoff landed: it
    answers with its own (never more than max_tasks) and the handed-over task goes back to
    ready at once, its attempt unspent."""
    own, handed = await _two_leases(store, tenant.id)
    hub_ = LeaseHub(store)
    waiter = hub_._await_handoff(_claim_q(tenant.id, limit=1), tenant.id, "q")
    assert hub_._take_waiter(tenant.id, "q") is waiter  # a create reserved it
    ending = asyncio.ensure_future(hub_._end_handoff(waiter, [own], gone=False))
    await asyncio.sleep(0)
    assert not ending.done()  # it waits for the handoff in flight
    waiter.handed.set_result([handed])
    assert await ending == [own]
    back = await store.task_get(tenant.id, handed.task.id)
    assert back is not None and back.status.value == "ready" and back.attempts == 0
    kept = await store.task_get(tenant.id, own.task.id)
    assert kept is not None and kept.status.value == "running"


async def test_a_poll_gone_releases_a_handoff_it_did_not_take(
    store: Store, tenant: TenantKey
) -> None:
    own, handed = await _two_leases(store, tenant.id)
    hub_ = LeaseHub(store)
    waiter = hub_._await_handoff(_claim_q(tenant.id, limit=1), tenant.id, "q")
    assert hub_._take_waiter(tenant.id, "q") is waiter
    waiter.handed.set_result([handed])  # landed, but the caller hung up first
    assert await hub_._end_handoff(waiter, [own], gone=True) == []
    for ended in (own, handed):
        back = await store.task_get(tenant.id, ended.task.id)
        assert back is not None and back.status.value == "ready" and back.attempts == 0
