"""Workflows through the SDK against the real API (in process, on the selected stores), run by
an SDK Worker: a three-level DAG with a fan-out of 1,000 and a fan-in, each child seeing its
parents' results; chain / group / chord; ``result(timeout=...)`` of tasks and workflows;
children spawned by a handler and waited for."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from duetime.api.app import create_app
from duetime.clock import FakeClock
from duetime.config import Settings
from duetime.sdk import (
    AsyncClient,
    Client,
    Job,
    NonRetryable,
    TaskFailed,
    Worker,
    WorkerConfig,
    WorkflowFailed,
    chain,
    chord,
    group,
    step,
    worker_target,
)
from duetime.store import Store, store_from_url

ADMIN = "admin-token-for-tests"
BASE = "http://duetime.test"
FAST = WorkerConfig(wait_seconds=0.2, ack_flush_seconds=0.001, backoff_seconds=0.01)
FANOUT = 1000


@pytest.fixture
def transport(store: Store) -> httpx.ASGITransport:
    settings = Settings(admin_token=ADMIN, allow_private_targets=True)
    return httpx.ASGITransport(app=create_app(settings, store))


@pytest.fixture
async def client(transport: httpx.ASGITransport) -> AsyncIterator[AsyncClient]:
    async with AsyncClient(BASE, ADMIN, transport=transport) as admin:
        made = await admin.create_tenant("flows")
    async with AsyncClient(BASE, made.api_key, transport=transport, timeout=70) as api:
        yield api


def _worker(client: AsyncClient, concurrency: int = 50) -> Worker:
    return Worker(client, concurrency=concurrency, worker_id="w-flows", config=FAST)


async def _running(worker: Worker) -> asyncio.Task[Any]:
    return asyncio.create_task(worker.run())


async def _stop(worker: Worker, running: asyncio.Task[Any]) -> None:
    worker.stop()
    await asyncio.wait_for(running, 10)


async def test_a_fan_out_of_a_thousand_and_a_fan_in_see_their_parents_results(
    client: AsyncClient,
) -> None:
    worker = _worker(client)
    seen: dict[str, Any] = {}

    @worker.handler("root")
    async def root(job: Job) -> dict[str, int]:
        assert len(job.parents) == 0
        return {"seed": 7}

    @worker.handler("square")
    async def square(job: Job) -> int:
        (parent,) = job.parents.all
        assert parent.ref == "root" and parent.status == "succeeded"
        return int(job.parents["root"].result["seed"]) * int(job.payload)

    @worker.handler("total")
    async def total(job: Job) -> int:
        seen["count"] = len(job.parents)
        seen["refs"] = list(job.parents)[:3]
        return sum(p.result for p in job.parents.all)

    flow = chord(
        [step(f"part-{i}", name="square", payload=i) for i in range(FANOUT)],
        step("total", name="total"),
    )
    run = await client.create_workflow(
        chain(step("root", name="root"), flow), defaults={"target": worker_target()}
    )
    running = await _running(worker)
    try:
        results = await run.result(timeout=120)
    finally:
        await _stop(worker, running)
    assert results["root"] == {"seed": 7}
    assert results["part-999"] == 7 * 999
    assert results["total"] == 7 * sum(range(FANOUT))
    assert seen == {"count": FANOUT, "refs": ["part-0", "part-1", "part-2"]}
    assert run.workflow is not None and run.workflow.status == "succeeded"
    assert len(run.workflow.nodes) == FANOUT + 2


async def test_a_failed_node_fails_the_workflow_and_a_replay_runs_it_again(
    client: AsyncClient,
) -> None:
    worker = _worker(client, concurrency=4)
    tries: list[int] = []

    @worker.handler("flaky")
    async def flaky(job: Job) -> str:
        tries.append(job.attempt)
        if len(tries) == 1:
            raise NonRetryable("not yet")
        return "fine"

    @worker.handler("after")
    async def after(job: Job) -> Any:
        return job.parents["a"].result

    run = await client.create_workflow(
        chain(step("a", name="flaky"), group(step("b", name="after"), step("c", name="after"))),
        defaults={"target": worker_target()},
    )
    running = await _running(worker)
    try:
        with pytest.raises(WorkflowFailed) as failed:
            await run.result(timeout=30)
        assert failed.value.workflow.node("a").last_error == "NonRetryable: not yet"
        assert failed.value.workflow.node("b").status == "failed"
        await run.replay()
        assert await run.result(timeout=30) == {"a": "fine", "b": "fine", "c": "fine"}
    finally:
        await _stop(worker, running)


async def test_a_task_result_is_waited_for_and_a_failure_raises(client: AsyncClient) -> None:
    worker = _worker(client, concurrency=2)

    @worker.handler("echo")
    async def echo(job: Job) -> Any:
        if job.payload == "bad":
            raise NonRetryable("refused")
        await asyncio.sleep(0.05)
        return {"echo": job.payload}

    good = await client.submit(target=worker_target(), name="echo", payload="hi")
    bad = await client.submit(target=worker_target(), name="echo", payload="bad")
    with pytest.raises(TimeoutError):
        await good.result(timeout=0.05)  # no worker yet: still ready
    running = await _running(worker)
    try:
        assert await good.result(timeout=30) == {"echo": "hi"}
        with pytest.raises(TaskFailed) as failed:
            await bad.result(timeout=30)
        assert failed.value.error == "NonRetryable: refused" and failed.value.status == "failed"
        assert await client.task_run(good.id) == {"echo": "hi"}
    finally:
        await _stop(worker, running)


async def _promote(store: Store, clock: FakeClock) -> None:
    """The leader's promoter, reduced to its statement, on a clock that moves: retries fall
    due (no engine here)."""
    while True:
        clock.advance(1)
        await store.task_promote_due(100)
        await asyncio.sleep(0.01)


async def test_a_handler_spawns_children_and_ends_with_their_results(
    client: AsyncClient, store: Store, clock: FakeClock
) -> None:
    worker = _worker(client, concurrency=20)
    promoter = asyncio.create_task(_promote(store, clock))
    runs: list[int] = []

    @worker.handler("fan")
    async def fan(job: Job) -> int:
        runs.append(job.attempt)
        tasks = [{"target": worker_target(), "name": "leaf", "payload": i} for i in range(200)]
        results = await job.spawn(tasks, wait=True, timeout=60)
        if len(runs) == 1:
            raise RuntimeError("crash after spawning")  # retried: the same call spawns nothing
        return sum(results)

    @worker.handler("leaf")
    async def leaf(job: Job) -> int:
        return int(job.payload) * 2

    run = await client.submit(
        target=worker_target(), name="fan", retry={"max_attempts": 3, "initial_delay_seconds": 0.01}
    )
    running = await _running(worker)
    try:
        assert await run.result(timeout=60) == 2 * sum(range(200))
    finally:
        promoter.cancel()
        await _stop(worker, running)
    children, ended = await client.task_children(run.id)
    assert len(children) == 200 and ended and runs == [1, 2]


@pytest.fixture
async def sqlite_transport(sqlite_url: str) -> AsyncIterator[httpx.ASGITransport]:
    """The API over SQLite: the blocking client calls it from its own event loop, which an
    asyncpg pool (bound to the test's loop) could not serve."""
    store = store_from_url(sqlite_url)
    await store.open()
    await store.migrate()
    try:
        yield httpx.ASGITransport(app=create_app(Settings(admin_token=ADMIN), store))
    finally:
        await store.close()


async def test_the_blocking_client_waits_for_results_too(
    sqlite_transport: httpx.ASGITransport,
) -> None:
    await asyncio.to_thread(_blocking_calls, sqlite_transport)


def _blocking_calls(transport: httpx.ASGITransport) -> None:
    with Client(BASE, ADMIN, transport=transport) as admin:
        key = admin.create_tenant("sync").api_key
    with Client(BASE, key, transport=transport) as client:
        run = client.create_workflow([{"ref": "a", "target": worker_target(), "name": "a"}])
        assert run.wait(timeout=0.1).status == "running"
        cancelled = run.cancel()
        assert cancelled.status == "cancelled"
        with pytest.raises(WorkflowFailed):
            run.result(timeout=5)
        single = client.submit(target=worker_target(), name="x")
        client.cancel_task(single.id)
        with pytest.raises(TaskFailed):
            single.result(timeout=5)
        assert dataclasses.is_dataclass(step("z"))
