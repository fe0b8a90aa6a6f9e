"""Typed use of the SDK: every place a task spec or its parts is accepted, written as a user
would. tests/sdk/test_typing.py runs ``mypy --strict`` on this file and expects no error."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from duetime import AsyncClient, Client, Job, Worker
from duetime.sdk import Page, RetryFields, TaskSpec, TaskSpecFields, http_target, worker_target
from duetime.sdk.models import Attempt, Task

worker = Worker(queues=["reports"])


@worker.task(queue="reports", retry={"max_attempts": 3}, timeout_seconds=60, priority=1)
async def send_report(job: Job) -> dict[str, int]:
    return {"pages": 3}


def produce(client: Client) -> list[Task]:
    soon = datetime.now(UTC) + timedelta(minutes=5)
    one = client.create_task(
        target=http_target("https://example.com/hook"),
        payload={"report": 42},
        delay_seconds=30,
        retry={"max_attempts": 5, "jitter": 0.2},
        labels={"team": "billing"},
    )
    spec = TaskSpec(target=worker_target(), name="send_report", run_at=soon)
    two = client.create_task(spec)
    item: TaskSpecFields = {"target": worker_target(), "priority": 2, "queue": "reports"}
    made = client.create_tasks([spec, item, {"target": worker_target(), "delay_seconds": 1.5}])
    retry: RetryFields = {"max_attempts": 2}
    three = send_report.defer({"day": "2026-12-01"}, delay_seconds=30, retry=retry, client=client)
    attempts: Page[Attempt] = client.list_attempts(one.id)
    for attempt in attempts:
        print(attempt.number, attempt.outcome)
    first: Attempt | None = attempts[0] if len(attempts) else None
    print(first, attempts.next_cursor)
    return [one, two, three, *made]


async def produce_async(client: AsyncClient) -> None:
    await send_report.defer_async(None, client=client, idempotency_key="r-1", priority=3)
    await client.create_schedule(
        cron="0 2 * * *",
        timezone="America/New_York",
        task={"target": worker_target(), "name": "send_report", "timeout_seconds": 60.0},
    )
    await client.ensure_schedule(
        "nightly", every="PT1H", task={"target": worker_target(), "retry": {"max_attempts": 1}}
    )
    for queue in await client.list_queues():
        print(queue.name)


send_report.schedule("0 2 * * *", key="nightly-report", tz="UTC", overlap="skip")
worker.schedule(
    every="PT15M", key="sweep", task={"timeout_seconds": 10.0, "labels": {"k": "v"}}, catchup="all"
)


def a_workflow(client: Client) -> None:
    from duetime.sdk import RetrySpec
    from duetime.sdk.workflows import chain, chord, group, step

    flow = chain(
        step("extract", name="extract", payload={"day": 1}, retry=RetrySpec(max_attempts=2)),
        chord(
            [step(f"part-{i}", name="part", priority=i, timeout_seconds=5.0) for i in range(3)],
            step("total", name="total", on_parent_failure="run"),
        ),
        group(step("tell", name="tell", labels={"k": "v"}), {"ref": "log", "name": "log"}),
    )
    run = client.create_workflow(flow, defaults={"target": worker_target(), "queue": "etl"})
    print(run.result(timeout=60.0))
