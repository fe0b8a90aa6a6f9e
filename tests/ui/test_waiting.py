"""A waiting task says what it waits for and when it will be tried — an open circuit, a queue
limit, its parents, its backoff — and the task held by an open circuit (handed back
``scheduled`` after failing) is counted as such by the overview and the dead letters. A worker's
traceback is shown apart on its attempt."""

from __future__ import annotations

import asyncio
import re
from datetime import timedelta

import httpx
from ui_helpers import BASE, Tenant, create, get_json, page

from duetime.clock import FakeClock
from duetime.lifecycle.release import release
from duetime.sdk import AsyncClient, worker_target
from duetime.sdk.worker import Job, Worker, WorkerConfig
from duetime.states import after_attempt
from duetime.store import Store
from duetime.types import AttemptOutcome, ClaimRequest, Completion, TargetCircuit, TargetType

ORIGIN = "https://crm.example:8443"
HTTP = frozenset({TargetType.HTTP})


async def _fail_once(store: Store, tenant: Tenant, retry_in: float) -> None:
    """Deliver the tenant's ready webhook tasks once, each failing retryably (as the dispatcher
    records an HTTP 503)."""
    leases = await store.task_claim(
        ClaimRequest(worker_id="node-1", limit=10, target_types=HTTP, tenant_id=tenant.id)
    )
    assert leases
    failures = [
        Completion(
            lease.task.id,
            lease.lease_id,
            AttemptOutcome.FAILED,
            lease.task.started_at or lease.lease_expires_at,
            12.0,
            error="HTTP 503",
            http_status=503,
            retry_delay_seconds=retry_in,
            worker="node-1",
            status=after_attempt(False, retry_in),
        )
        for lease in leases
    ]
    await store.task_complete_many(failures)


async def test_a_task_held_by_an_open_circuit_says_so_everywhere(
    client: httpx.AsyncClient, store: Store, clock: FakeClock, acme: Tenant
) -> None:
    made = await create(client, acme, queue="crm", target={"type": "http", "url": f"{ORIGIN}/hook"})
    await _fail_once(store, acme, retry_in=0)
    await store.task_promote_due(100)
    (lease,) = await store.task_claim(
        ClaimRequest(worker_id="node-1", limit=10, target_types=HTTP, tenant_id=acme.id)
    )
    now = clock.now()
    await store.circuit_put(
        TargetCircuit(acme.id, ORIGIN, "open", 5, 60.0, now + timedelta(seconds=60), now, 1)
    )
    await release(store, [lease.lease_id], 90.0)  # what the dispatcher does while it is open
    task = await get_json(client, acme, f"/v1/tasks/{made['id']}")
    assert (task["status"], task["attempts"], task["last_error"]) == ("scheduled", 1, "HTTP 503")

    detail = await page(client, acme, f"/ui/tasks/{made['id']}")
    assert f"held: circuit open for {ORIGIN} until" in detail and "after 5 failures" in detail
    assert "handed back after failing, without spending an attempt" in detail
    assert re.search(r"next try \S+ \S+Z \(in 1m 30", detail)  # its due_at, past open_until
    listed = await page(client, acme, "/ui/tasks?queue=crm")
    assert f"held: circuit open for {ORIGIN} (in 1m 0" in listed
    overview = await page(client, acme, "/ui")
    assert re.search(r'<span class="n">1</span><span class="label">held after failing', overview)
    assert f'circuit open for <span class="mono">{ORIGIN}</span>' in overview
    letters = await page(client, acme, "/ui/dead-letters")
    assert "1 task(s): 0 in backoff (retrying), 1 held after failing" in letters
    assert f"held: circuit open for {ORIGIN}" in letters and "HTTP 503" in letters


async def test_backoff_limits_and_parents_are_named(
    client: httpx.AsyncClient, store: Store, acme: Tenant
) -> None:
    hook = await create(client, acme, queue="crm", target={"type": "http", "url": f"{ORIGIN}/h"})
    await _fail_once(store, acme, retry_in=120)
    backoff = await page(client, acme, f"/ui/tasks/{hook['id']}")
    assert "backoff after attempt 1 failed: next attempt at" in backoff and "(in 2m 0" in backoff

    parent = await create(client, acme, queue="etl", delay_seconds=3600)
    child = await create(client, acme, queue="etl", depends_on=[parent["id"]])
    blocked = await page(client, acme, f"/ui/tasks/{child['id']}")
    assert f"blocked: 1 of 1 parent(s) not succeeded (…{parent['id'][-8:]} scheduled)" in blocked
    listed = await page(client, acme, "/ui/tasks?queue=etl")  # the list reads no parents
    assert "blocked: waits for its 1 parent(s) to succeed" in listed
    assert "scheduled: due at" in await page(client, acme, f"/ui/tasks/{parent['id']}")

    put = await client.put("/v1/queues/jobs", json={"max_concurrency": 1}, headers=acme.bearer)
    assert put.status_code == 200
    first, second = [await create(client, acme, queue="jobs") for _ in range(2)]
    leased = await client.post(
        "/v1/queues/jobs/lease",
        json={"max_tasks": 1, "wait_seconds": 0, "worker_id": "w"},
        headers=acme.bearer,
    )
    (taken,) = leased.json()["leases"]
    waiting = second if taken["task"]["id"] == first["id"] else first
    held = await page(client, acme, f"/ui/tasks/{waiting['id']}")
    assert "queue jobs runs its max_concurrency of 1 already" in held
    assert "waits for a pull worker to claim it" in held
    assert "Waiting for" not in await page(client, acme, f"/ui/tasks/{taken['task']['id']}")

    await client.put("/v1/queues/jobs", json={"paused": True}, headers=acme.bearer)
    paused = await page(client, acme, f"/ui/tasks/{waiting['id']}")
    assert "queue jobs is paused: nothing of it starts until it is resumed" in paused
    assert "queue jobs paused" in await page(client, acme, "/ui/tasks?queue=jobs&status=ready")


async def test_a_failing_handlers_traceback_is_shown_on_its_attempt(
    client: httpx.AsyncClient, store: Store, acme: Tenant
) -> None:
    transport = client._transport  # the same app, through the SDK
    async with AsyncClient(BASE, acme.api_key, transport=transport) as sdk:
        made = await sdk.create_task(
            target=worker_target(), name="report", retry={"max_attempts": 1}
        )
        worker = Worker(sdk, worker_id="w-tb", config=WorkerConfig(wait_seconds=0.05))

        @worker.handler("report")
        def build_report(job: Job) -> None:
            job.log("loading <month>")
            {"a": 1}["missing"]

        await asyncio.wait_for(worker.run(until_empty=True), 10)
    detail = await page(client, acme, f"/ui/tasks/{made.id}")
    assert '<pre class="error">KeyError: &#39;missing&#39;</pre>' in detail
    trace = re.search(r'<pre class="traceback">(.*?)</pre>', detail, re.S)
    assert trace is not None
    assert trace.group(1).startswith("Traceback (most recent call last):")
    assert "in build_report" in trace.group(1) and trace.group(1).endswith(
        "KeyError: &#39;missing&#39;"
    )
    logs = re.search(
        r"<summary class=\"small\">Logs</summary><pre class=\"json\">(.*?)</pre>", detail
    )
    assert logs is not None and logs.group(1) == "loading &lt;month&gt;"  # the traceback apart

    leased = await client.post(
        "/v1/queues/default/lease", json={"wait_seconds": 0, "worker_id": "w"}, headers=acme.bearer
    )
    assert leased.json()["leases"] == []
    other = await create(client, acme, name="long", retry={"max_attempts": 1})
    (lease,) = (
        await client.post(
            "/v1/queues/default/lease",
            json={"wait_seconds": 0, "worker_id": "w"},
            headers=acme.bearer,
        )
    ).json()["leases"]
    frames = "".join(f'  File "app.py", line {n}, in step_{n}\n    step()\n' for n in range(400))
    long_trace = f"Traceback (most recent call last):\n{frames}ValueError: deep"
    failed = await client.post(
        f"/v1/leases/{lease['lease_id']}/fail",
        json={"error": "ValueError: deep", "retryable": False, "logs": long_trace},
        headers=acme.bearer,
    )
    assert failed.status_code == 200, failed.text
    shown = await page(client, acme, f"/ui/tasks/{other['id']}")
    assert "Traceback (its last 8 KiB)" in shown and "step_399" in shown and "step_3\n" not in shown


async def test_a_task_held_by_its_key_debounced_or_throttled_says_so(
    client: httpx.AsyncClient, clock: FakeClock, acme: Tenant
) -> None:
    """Keyed flow control in "why a task waits": a ready task whose key is at its rate limit
    (until its next start), a debounced task (what it absorbed, at the latest when), a
    throttled one (its key's slot); the queues page lists the rules and the busiest keys."""
    rules = {
        "key_limit": {"key": "payload.customer", "rate": "1/s"},
        "throttle": {"key": "labels.region", "rate": "1/m"},
    }
    put = await client.put("/v1/queues/keyed", json=rules, headers=acme.bearer)
    assert put.status_code == 200, put.text
    first, second = [await create(client, acme, queue="keyed", payload={"customer": "c7"})
                     for _ in range(2)]  # fmt: skip
    leased = await client.post(
        "/v1/queues/keyed/lease",
        json={"max_tasks": 5, "wait_seconds": 0, "worker_id": "w"},
        headers=acme.bearer,
    )
    (taken,) = leased.json()["leases"]
    waiting = second if taken["task"]["id"] == first["id"] else first
    held = await page(client, acme, f"/ui/tasks/{waiting['id']}")
    assert "rate limit of key c7 (1/s) in queue keyed: next start at" in held
    queues = await page(client, acme, "/ui/queues")
    assert "payload.customer" in queues and "c7</code>: 1 ready, 1 running" in queues

    for _ in range(2):
        made = await client.post(
            "/v1/tasks",
            json={"target": {"type": "worker"}, "queue": "keyed", "labels": {"region": "eu"}},
            headers=acme.bearer,
        )
    throttled = await page(client, acme, f"/ui/tasks/{made.json()['id']}")
    assert "throttle of key eu in queue keyed (1/m): runs at its key&#39;s slot" in throttled

    debounce = {"debounce": {"key": "labels.user", "period": "PT10S", "max_wait": "PT1M"}}
    await client.put("/v1/queues/burst", json=debounce, headers=acme.bearer)
    for n in range(3):
        made = await client.post(
            "/v1/tasks",
            json={
                "target": {"type": "worker"},
                "queue": "burst",
                "labels": {"user": "u"},
                "payload": {"n": n},
            },
            headers=acme.bearer,
        )
        clock.advance(1)
    detail = await page(client, acme, f"/ui/tasks/{made.json()['id']}")
    assert "debounce of key u in queue burst: absorbed 2 more create(s)" in detail
    assert "unless another create of the key comes first (then PT10S after it)" in detail
