"""Producer ergonomics: ``@worker.task`` handles (defaults, ``defer``/``defer_async``,
``schedule``), ``Retry(after=...)`` from a handler, typed payloads and the ``duetime.testing``
helpers; against the real API (create_app over httpx.ASGITransport) on a real SQLite store."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta

import httpx
import pytest
from pydantic import BaseModel

from duetime import Job, NonRetryable, Retry, Worker
from duetime.api.app import create_app
from duetime.config import Settings
from duetime.sdk import AsyncClient, Client
from duetime.store import Store, store_from_url
from duetime.testing import make_job, run_handler, run_handler_async

BASE = "http://127.0.0.1:8080"


class Report(BaseModel):
    day: str
    pages: int = 1


@pytest.fixture
async def transport(sqlite_url: str) -> AsyncIterator[httpx.ASGITransport]:
    store: Store = store_from_url(sqlite_url)
    await store.open()
    await store.migrate()
    try:
        yield httpx.ASGITransport(app=create_app(Settings(), store))
    finally:
        await store.close()


def make_worker(client: AsyncClient) -> tuple[Worker, list[Report]]:
    worker = Worker(client, queues=["reports"])
    seen: list[Report] = []

    @worker.task(retry={"max_attempts": 3}, timeout_seconds=30, labels={"team": "billing"})
    async def send_report(job: Job) -> dict[str, int]:
        report = job.payload_as(Report)
        seen.append(report)
        return {"pages": report.pages}

    worker.send_report = send_report  # type: ignore[attr-defined]
    return worker, seen


async def test_defer_uses_the_handle_defaults_and_the_worker_runs_it(
    transport: httpx.ASGITransport,
) -> None:
    async with AsyncClient(BASE, transport=transport) as client:
        worker, seen = make_worker(client)
        handle = worker.send_report  # type: ignore[attr-defined]
        task = await handle.defer_async(Report(day="2026-12-01", pages=3))
        assert task.name == "send_report" and task.queue == "reports"
        assert task.retry.max_attempts == 3 and task.timeout_seconds == 30
        assert task.labels == {"team": "billing"} and task.payload == {
            "day": "2026-12-01",
            "pages": 3,
        }
        later = await handle.defer_async({"day": "x"}, queue="other", delay_seconds=60)
        assert later.queue == "other" and later.status == "scheduled"
        await asyncio.wait_for(worker.run(until_empty=True), 10)
        assert seen == [Report(day="2026-12-01", pages=3)]
        assert (await client.get_task(task.id)).result == {"pages": 3}
        # The handle is still the function.
        assert await handle(make_job({"day": "d"})) == {"pages": 1}


async def test_blocking_defer_with_a_client(transport: httpx.ASGITransport) -> None:
    async with AsyncClient(BASE, transport=transport) as client:
        worker, _ = make_worker(client)
    with Client(BASE, transport=transport) as sync_client:
        task = await asyncio.to_thread(
            worker.send_report.defer,  # type: ignore[attr-defined]
            {"day": "d"},
            client=sync_client,
            idempotency_key="r-1",
        )
    assert task.name == "send_report" and task.created is True


async def test_retry_after_sets_the_next_attempt(transport: httpx.ASGITransport) -> None:
    async with AsyncClient(BASE, transport=transport) as client:
        worker = Worker(client)

        @worker.task()
        def flaky(job: Job) -> None:
            raise Retry(after=600, reason="upstream not ready")

        task = await flaky.defer_async()
        await asyncio.wait_for(worker.run(until_empty=True), 10)
        after = await client.get_task(task.id)
        assert after.status == "retrying" and after.last_error == "upstream not ready"
        assert after.next_attempt_at is not None
        wait = after.next_attempt_at - after.updated_at
        assert timedelta(seconds=590) <= wait <= timedelta(seconds=610), wait


async def test_handle_schedule_declares_with_the_handle_defaults(
    transport: httpx.ASGITransport,
) -> None:
    async with AsyncClient(BASE, transport=transport) as client:
        worker, _ = make_worker(client)
        worker.send_report.schedule("0 2 * * *", key="nightly", tz="UTC")  # type: ignore[attr-defined]
        await asyncio.wait_for(worker.run(until_empty=True), 10)
        [schedule] = (await client.list_schedules()).items
        assert schedule.key == "nightly" and schedule.task["name"] == "send_report"
        assert schedule.task["queue"] == "reports" and schedule.task["timeout_seconds"] == 30


def test_run_handler_reports_like_the_worker() -> None:
    worker = Worker("http://127.0.0.1:1")

    @worker.task(queue="reports")
    def count(job: Job) -> int:
        report = job.payload_as(Report)
        if report.pages < 0:
            raise NonRetryable("negative pages")
        if report.pages == 0:
            raise Retry(after=30)
        return report.pages

    ok = run_handler(count, {"day": "d", "pages": 4})
    assert ok.succeeded and ok.result == 4
    retry = run_handler(count, {"day": "d", "pages": 0})
    assert retry.status == "retry" and retry.retry_after == 30
    bad = run_handler(count, {"day": "d", "pages": -1})
    assert (
        bad.status == "failed" and not bad.retryable and bad.error == "NonRetryable: negative pages"
    )
    invalid = run_handler(count, {"pages": "many"})
    assert (
        invalid.status == "failed" and invalid.retryable and "ValidationError" in str(invalid.error)
    )
    assert make_job(name="count", attempt=2).attempt == 2


async def test_run_handler_async_awaits_and_checks_the_result_encodes() -> None:
    async def returns_a_set(job: Job) -> object:
        return {1, 2}

    outcome = await run_handler_async(returns_a_set)
    assert outcome.status == "failed" and "TypeError" in str(outcome.error)


async def test_payload_ref_reaches_the_handler_as_is(transport: httpx.ASGITransport) -> None:
    async with AsyncClient(BASE, transport=transport) as client:
        worker = Worker(client)
        seen: list[tuple[str | None, object]] = []

        @worker.task()
        def fetch(job: Job) -> None:
            seen.append((job.payload_ref, job.payload))

        task = await fetch.defer_async(payload_ref="s3://bucket/object?v=2")
        assert task.payload_ref == "s3://bucket/object?v=2" and task.payload is None
        await asyncio.wait_for(worker.run(until_empty=True), 10)
        assert seen == [("s3://bucket/object?v=2", None)]
