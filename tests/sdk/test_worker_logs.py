"""Attempt logs through the SDK against the real API (create_app over httpx.ASGITransport), on
each store: ``complete_lease``/``fail_lease`` and their batch forms take ``logs``, and a
:class:`duetime.Worker` handler attaches them with ``job.log(...)``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest

from duetime.api.app import create_app
from duetime.config import Settings
from duetime.sdk import AsyncClient, LeaseCompletion, LeaseFailure, worker_target
from duetime.sdk.worker import (
    LOG_LIMIT_CHARS,
    TRACEBACK_LIMIT_BYTES,
    Job,
    NonRetryable,
    Worker,
    WorkerConfig,
    logs_with_traceback,
    traceback_text,
)
from duetime.store import Store

ADMIN = "admin-token-for-tests"
BASE = "http://duetime.test"
FAST = WorkerConfig(wait_seconds=0.05, ack_flush_seconds=0.001, backoff_seconds=0.01)


@pytest.fixture
async def client(store: Store) -> AsyncIterator[AsyncClient]:
    transport = httpx.ASGITransport(app=create_app(Settings(admin_token=ADMIN), store))
    async with AsyncClient(BASE, ADMIN, transport=transport) as admin:
        made = await admin.create_tenant("acme")
    async with AsyncClient(BASE, made.api_key, transport=transport) as tenant:
        yield tenant


async def test_lease_calls_send_logs(client: AsyncClient) -> None:
    retry = {"max_attempts": 1}
    ids = [(await client.create_task(target=worker_target(), retry=retry)).id for _ in range(5)]
    leases = {x.task.id: x.lease_id for x in await client.lease_tasks(worker_id="w", max_tasks=5)}
    one, two, three, four, five = (leases[i] for i in ids)
    assert (await client.complete_lease(one, {"ok": 1}, logs="done\n")).task_status == "succeeded"
    failed = await client.fail_lease(two, "boom", retryable=False, logs="trace\n  line\n")
    assert failed.task_status == "failed"
    batch = await client.complete_leases(
        [LeaseCompletion(lease_id=three, result=3, logs="third"), {"lease_id": four}]
    )
    assert [r.status for r in batch] == ["ok", "ok"]
    (fifth,) = await client.fail_leases([LeaseFailure(lease_id=five, error="e", logs="fifth")])
    assert fifth.task_status == "failed"
    logs = [(await client.list_attempts(i))[0].logs for i in ids]
    assert logs == ["done\n", "trace\n  line\n", "third", None, "fifth"]
    assert (await client.get_task(ids[0])).result == {"ok": 1}


async def test_worker_handlers_attach_logs_with_job_log(client: AsyncClient) -> None:
    ok = (await client.create_task(target=worker_target(), name="ok", payload={"n": 2})).id
    bad = (await client.create_task(target=worker_target(), name="bad")).id
    quiet = (await client.create_task(target=worker_target(), name="quiet")).id
    worker = Worker(client, concurrency=2, worker_id="w-logs", config=FAST)

    @worker.handler("ok")
    async def run_ok(job: Job) -> int:
        job.log("doubling", job.payload["n"])
        job.log("done", sep="")
        return int(job.payload["n"]) * 2

    @worker.handler("bad")
    def run_bad(job: Job) -> None:  # a sync handler: logs from its thread
        job.log("about to fail")
        raise NonRetryable("no good")

    @worker.handler("quiet")
    async def run_quiet(job: Job) -> None:
        assert job.logs is None

    stats = await asyncio.wait_for(worker.run(until_empty=True), 10)
    assert (stats.succeeded, stats.failed) == (2, 1)
    (done,) = await client.list_attempts(ok)
    assert (done.outcome, done.logs, done.worker) == ("succeeded", "doubling 2\ndone", "w-logs")
    (failed,) = await client.list_attempts(bad)
    assert failed.outcome == "failed" and failed.logs is not None
    # The handler's lines, then its traceback (where it raised, and the exception last).
    assert failed.logs.startswith("about to fail\nTraceback (most recent call last):\n")
    assert "duetime/sdk/" not in failed.logs  # from the handler's frame on
    assert 'raise NonRetryable("no good")' in failed.logs
    assert failed.logs.endswith("NonRetryable: no good")
    assert "no good" in (failed.error or "")
    (silent,) = await client.list_attempts(quiet)
    assert silent.logs is None


def test_job_log_keeps_lines_up_to_its_limit() -> None:
    job = Job({"id": "t", "name": "n"}, 1, "l", "w")
    assert job.logs is None
    job.log("a", 1, None)
    job.log()
    line = "x" * 1000
    for _ in range(LOG_LIMIT_CHARS // 1000 + 10):
        job.log(line)
    text = job.logs or ""
    assert text.startswith("a 1 None\n\nxxx")
    # Lines stop being kept past the limit (the server keeps 64 KiB anyway).
    assert len(text) == LOG_LIMIT_CHARS
    huge = Job({"id": "t", "name": "n"}, 1, "l", "w")
    huge.log("y" * 2_000_000)  # one line past what the server accepts: cut, never refused
    assert huge.logs == "y" * LOG_LIMIT_CHARS


def test_run_handler_reports_the_logs() -> None:
    from duetime.testing import run_handler

    def handler(job: Job) -> int:
        job.log("working on", job.payload)
        return 1

    outcome = run_handler(handler, 7)
    assert (outcome.succeeded, outcome.logs) == (True, "working on 7")


def _raised(depth: int, message: str) -> Exception:
    # Two functions in turn: Python folds a run of one repeated frame into one line.
    def dive(n: int) -> None:
        if n == 0:
            raise RuntimeError(message)
        again(n - 1)

    def again(n: int) -> None:
        dive(n)

    try:
        dive(depth)
    except RuntimeError as exc:
        return exc
    raise AssertionError("unreachable")


def test_a_long_traceback_keeps_its_last_frames_and_the_logs_leave_it_room() -> None:
    deep = _raised(400, "the innermost é")  # hundreds of frames: far more than 8 KiB
    trace = traceback_text(deep)
    assert len(trace.encode()) <= TRACEBACK_LIMIT_BYTES
    assert trace.startswith("Traceback (most recent call last):\n  ... (earlier lines cut)\n")
    assert trace.endswith("RuntimeError: the innermost é")
    short = traceback_text(_raised(1, "shallow"))
    assert short.startswith("Traceback (most recent call last):\n  File ")
    # Full logs are cut so that the traceback still fits the 64 KiB the server keeps.
    logs = logs_with_traceback("ü" * LOG_LIMIT_CHARS, deep)
    assert len(logs.encode()) <= 64 * 1024 and logs.endswith(trace)
    assert logs_with_traceback(None, deep) == trace
