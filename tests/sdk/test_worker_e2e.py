"""The SDK worker end to end: a real ``duetime serve`` node and real ``duetime worker``
processes on loopback. A worker killed with SIGKILL loses nothing (its task is leased again after
expiry and its late ack is refused); SIGTERM finishes or fails back what it holds; heartbeats keep
a slow handler's lease past several lease lengths; failing and succeeding handlers end in the
right states with the right attempt histories."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from duetime.bench.harness import NodeOptions, Proc, start_node
from duetime.sdk import ApiStaleLease, AsyncClient, Task, worker_target
from duetime.sdk.worker import Job, NonRetryable, Worker, WorkerConfig
from duetime.types import AttemptOutcome, TaskStatus

pytestmark = pytest.mark.acceptance

NODE_ENV = {"DUETIME_POLL_INTERVAL_SECONDS": "0.05", "DUETIME_LEASE_GRACE_SECONDS": "0"}
FAST_RETRY = {"max_attempts": 3, "initial_delay_seconds": 0.05, "jitter": 0}

APP = """
import asyncio, os, pathlib, time
from duetime import Worker, WorkerConfig

MARKS = pathlib.Path(os.environ["E2E_MARKS"])
worker = Worker(
    "http://127.0.0.1:1",
    concurrency=4,
    config=WorkerConfig(
        lease_seconds=float(os.environ["E2E_LEASE"]),
        wait_seconds=1,
        shutdown_grace_seconds=float(os.environ["E2E_GRACE"]),
        final_flush_seconds=2,
    ),
)

def mark(job):
    # Written aside, then renamed: a reader that sees the mark sees all of it.
    aside = MARKS / f".{job.id}.{job.attempt}"
    aside.write_text(job.lease_id)
    aside.rename(MARKS / f"{job.id}.{job.attempt}")

@worker.handler("block")
def block(job):
    mark(job)
    time.sleep(job.payload["seconds"])
    return {"slept": job.payload["seconds"]}

@worker.handler("nap")
async def nap(job):
    mark(job)
    await asyncio.sleep(job.payload["seconds"])
    return "rested"
"""


@dataclass
class WorkerProc:
    popen: subprocess.Popen[bytes]
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Proc]:
    workdir = tmp_path_factory.mktemp("node")
    proc = start_node(workdir, NodeOptions(db=f"sqlite:///{workdir / 'e2e.db'}", env=NODE_ENV))
    try:
        yield proc
    finally:
        proc.stop(5)


@pytest.fixture
async def client(node: Proc) -> AsyncIterator[AsyncClient]:
    async with AsyncClient(node.url) as api:
        yield api


@pytest.fixture
def spawn_worker(tmp_path: Path, node: Proc) -> Iterator[Callable[..., WorkerProc]]:
    (tmp_path / "e2e_app.py").write_text(textwrap.dedent(APP))
    marks = tmp_path / "marks"
    marks.mkdir()
    started: list[WorkerProc] = []

    def spawn(worker_id: str, queue: str, *, lease: float = 2, grace: float = 5) -> WorkerProc:
        env = {k: v for k, v in os.environ.items() if not k.startswith("DUETIME_")}
        env.update(E2E_MARKS=str(marks), E2E_LEASE=str(lease), E2E_GRACE=str(grace))
        log_path = tmp_path / f"{worker_id}.log"
        args = [sys.executable, "-m", "duetime", "worker", "e2e_app:worker", "--url", node.url]
        args += ["--worker-id", worker_id, "--queue", queue, "--log-level", "warning"]
        with log_path.open("wb") as log:
            popen = subprocess.Popen(args, cwd=tmp_path, env=env, stdout=log, stderr=log)
        started.append(WorkerProc(popen, log_path))
        return started[-1]

    try:
        yield spawn
    finally:
        for proc in started:
            if proc.popen.poll() is None:
                proc.popen.kill()
            proc.popen.wait(5)


async def eventually(check: Callable[[], Any], within: float = 10, what: str = "") -> Any:
    """Await ``check()`` (sync or async) until it returns something truthy."""
    deadline = time.monotonic() + within
    while True:
        value = check()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what or check}"
        await asyncio.sleep(0.02)


async def create(client: AsyncClient, name: str, queue: str, payload: Any, **over: Any) -> Task:
    fields: dict[str, Any] = {"retry": FAST_RETRY, "timeout_seconds": 60, **over}
    return await client.create_task(
        target=worker_target(), name=name, queue=queue, payload=payload, **fields
    )


async def status_of(client: AsyncClient, task_id: str, *wanted: TaskStatus) -> Task | None:
    task = await client.get_task(task_id)
    return task if task.status in wanted else None


def fast_worker(client: AsyncClient, queue: str, worker_id: str, **config: Any) -> Worker:
    cfg = WorkerConfig(wait_seconds=0.5, ack_flush_seconds=0.001, **config)
    return Worker(client, queues=[queue], concurrency=4, worker_id=worker_id, config=cfg)


async def drain(worker: Worker, done: Callable[[], Any], within: float = 10) -> None:
    running = asyncio.create_task(worker.run())
    try:
        await eventually(done, within, "the tasks to finish")
    finally:
        worker.stop()
        await asyncio.wait_for(running, 10)


async def test_sigkilled_worker_loses_nothing_and_its_late_ack_is_refused(
    client: AsyncClient, spawn_worker: Callable[..., WorkerProc], tmp_path: Path
) -> None:
    task = await create(client, "block", "kill", {"seconds": 30})
    doomed = spawn_worker("doomed", "kill", lease=1)
    mark = tmp_path / "marks" / f"{task.id}.1"
    await eventually(mark.exists, 15, "the first attempt to start")
    old_lease = mark.read_text()
    doomed.popen.send_signal(signal.SIGKILL)
    doomed.popen.wait(5)

    rescuer = fast_worker(client, "kill", "rescuer")
    rescuer.add_handler("block", lambda job: {"rescued_attempt": job.attempt})
    await drain(rescuer, lambda: status_of(client, task.id, TaskStatus.SUCCEEDED))

    done = await client.get_task(task.id)
    assert done.result == {"rescued_attempt": 2}
    attempts = await client.list_attempts(task.id)
    assert [a.outcome for a in attempts] == [
        AttemptOutcome.LEASE_EXPIRED,
        AttemptOutcome.SUCCEEDED,
    ]
    assert [a.worker for a in attempts] == ["doomed", "rescuer"]
    for late_ack in (
        client.complete_lease(old_lease, {"late": True}),
        client.fail_lease(old_lease, "late"),
        client.heartbeat(old_lease, 5),
    ):
        with pytest.raises(ApiStaleLease):
            await late_ack
    assert (await client.get_task(task.id)).result == {"rescued_attempt": 2}
    assert len(await client.list_attempts(task.id)) == 2


async def test_sigterm_lets_running_handlers_finish(
    client: AsyncClient, spawn_worker: Callable[..., WorkerProc], tmp_path: Path
) -> None:
    tasks = [await create(client, "nap", "finish", {"seconds": 0.4}) for _ in range(2)]
    tasks += [await create(client, "block", "finish", {"seconds": 0.4}) for _ in range(2)]
    proc = spawn_worker("finisher", "finish", grace=10)
    marks = [tmp_path / "marks" / f"{t.id}.1" for t in tasks]
    await eventually(lambda: all(m.exists() for m in marks), 15, "all four to start")
    proc.popen.send_signal(signal.SIGTERM)
    assert await asyncio.to_thread(proc.popen.wait, 10) == 0, proc.log()
    for task in tasks:
        done = await client.get_task(task.id)
        assert done.status is TaskStatus.SUCCEEDED, (done, proc.log())
        assert done.attempts == 1
    assert '"succeeded": 4' in proc.log()


async def test_sigterm_after_the_grace_period_fails_back_what_is_left(
    client: AsyncClient, spawn_worker: Callable[..., WorkerProc], tmp_path: Path
) -> None:
    task = await create(client, "block", "release", {"seconds": 30})
    proc = spawn_worker("leaver", "release", lease=30, grace=0.2)
    await eventually((tmp_path / "marks" / f"{task.id}.1").exists, 15, "the attempt to start")
    stopped_at = time.monotonic()
    proc.popen.send_signal(signal.SIGTERM)
    assert await asyncio.to_thread(proc.popen.wait, 10) == 0, proc.log()
    assert time.monotonic() - stopped_at < 5, "a stuck thread kept the worker alive"
    [attempt] = await client.list_attempts(task.id)
    assert attempt.outcome is AttemptOutcome.FAILED and attempt.error == "worker shutting down"
    assert attempt.worker == "leaver"

    # Failed back, not left to expire: the 30 s lease does not hold up the next worker.
    rescuer = fast_worker(client, "release", "rescuer")
    rescuer.add_handler("block", lambda job: "second")
    await drain(rescuer, lambda: status_of(client, task.id, TaskStatus.SUCCEEDED), within=5)
    attempts = await client.list_attempts(task.id)
    assert [a.outcome for a in attempts] == [AttemptOutcome.FAILED, AttemptOutcome.SUCCEEDED]


async def test_heartbeats_keep_a_slow_handler_past_several_lease_lengths(
    client: AsyncClient, spawn_worker: Callable[..., WorkerProc]
) -> None:
    task = await create(client, "nap", "slow", {"seconds": 2.5})
    proc = spawn_worker("sleeper", "slow", lease=0.75)  # beats every 0.25 s
    running = await eventually(
        lambda: status_of(client, task.id, TaskStatus.RUNNING), 15, "the task to run"
    )
    seen = await eventually(
        lambda: _worker_listed(client, "sleeper"), 5, "the worker in GET /v1/workers"
    )
    assert seen.leases >= 1
    await eventually(lambda: status_of(client, task.id, TaskStatus.SUCCEEDED), 10, "success")
    [attempt] = await client.list_attempts(task.id)
    assert attempt.outcome is AttemptOutcome.SUCCEEDED and attempt.worker == "sleeper"
    assert attempt.duration_ms is not None and attempt.duration_ms >= 2500
    assert running.started_at is not None
    proc.popen.send_signal(signal.SIGTERM)
    assert await asyncio.to_thread(proc.popen.wait, 10) == 0, proc.log()


async def _worker_listed(client: AsyncClient, worker_id: str) -> Any:
    for info in await client.list_workers():
        if info.worker_id == worker_id:
            return info
    return None


@pytest.fixture
async def any_store_client(store_url: str, tmp_path: Path) -> AsyncIterator[AsyncClient]:
    """A node on each selected store (``store_url``: SQLite by default, ``--store=both`` in CI)."""
    kind = store_url.partition(":")[0]
    proc = start_node(tmp_path, NodeOptions(db=store_url, env=NODE_ENV), f"mix-{kind}")
    try:
        async with AsyncClient(proc.url) as api:
            yield api
    finally:
        proc.stop(5)


async def test_failing_and_succeeding_handlers_end_in_the_right_states(
    any_store_client: AsyncClient,
) -> None:
    client = any_store_client
    ok = await create(client, "ok", "mix", {"n": 1})
    sync_ok = await create(client, "sync-ok", "mix", [1, 2])
    flaky = await create(client, "flaky", "mix", None)
    fatal = await create(client, "fatal", "mix", None)
    always = await create(client, "always", "mix", None, retry={**FAST_RETRY, "max_attempts": 2})
    slow = await create(client, "slow", "mix", None, timeout_seconds=0.2)
    unhandled = await create(client, "nobody-handles-this", "mix", None)
    worker = fast_worker(client, "mix", "mixer")

    @worker.handler("ok")
    async def echo(job: Job) -> Any:
        return job.payload

    @worker.handler("sync-ok")
    def total(job: Job) -> int:
        return sum(job.payload)

    @worker.handler("flaky")
    async def flaky_handler(job: Job) -> str:
        if job.attempt == 1:
            raise ConnectionError("upstream down")
        return f"ok on attempt {job.attempt}"

    @worker.handler("fatal")
    async def fatal_handler(job: Job) -> None:
        raise NonRetryable("bad input")

    @worker.handler("always")
    def always_handler(job: Job) -> None:
        raise RuntimeError(f"broken #{job.attempt}")

    @worker.handler("slow")
    async def slow_handler(job: Job) -> None:
        await asyncio.sleep(0 if job.attempt == 3 else 5)

    ended = [ok, sync_ok, flaky, fatal, always, slow]

    async def all_ended() -> bool:
        return all([(await client.get_task(t.id)).status.terminal for t in ended])

    await drain(worker, all_ended, within=15)

    async def check(task: Task, status: TaskStatus, result: Any, history: list[Any]) -> None:
        got = await client.get_task(task.id)
        assert got.status is status and got.result == result, got
        attempts = await client.list_attempts(task.id)
        assert [(a.outcome, a.error) for a in attempts] == history
        assert {a.worker for a in attempts} == {"mixer"}

    won, lost = AttemptOutcome.SUCCEEDED, AttemptOutcome.FAILED
    await check(ok, TaskStatus.SUCCEEDED, {"n": 1}, [(won, None)])
    await check(sync_ok, TaskStatus.SUCCEEDED, 3, [(won, None)])
    await check(
        flaky,
        TaskStatus.SUCCEEDED,
        "ok on attempt 2",
        [(lost, "ConnectionError: upstream down"), (won, None)],
    )
    await check(fatal, TaskStatus.FAILED, None, [(lost, "NonRetryable: bad input")])
    await check(
        always,
        TaskStatus.FAILED,
        None,
        [(lost, "RuntimeError: broken #1"), (lost, "RuntimeError: broken #2")],
    )
    timed_out = (await client.list_attempts(slow.id))[0]
    assert timed_out.outcome is AttemptOutcome.TIMED_OUT
    assert timed_out.error == "timed out after 0.2s"
    assert (await client.get_task(slow.id)).status is TaskStatus.SUCCEEDED
    assert (await client.get_task(unhandled.id)).status is TaskStatus.READY, "never leased"
    assert worker.stats.failed == 6 and worker.stats.succeeded == 4
    assert worker.stats.stale_acks == 0 and worker.stats.timed_out == 2
