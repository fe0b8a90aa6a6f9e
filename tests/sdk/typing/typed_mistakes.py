"""Mistakes a type checker must catch: each line marked ``# expect-error`` is one error that
``mypy --strict`` reports (tests/sdk/test_typing.py checks each is reported, and nothing else)."""

from __future__ import annotations

from duetime import Client, Job, Worker
from duetime.sdk import worker_target
from duetime.sdk.workflows import step

worker = Worker(queues=["reports"])


@worker.task(retry={"max_attempts": "three"})  # expect-error
async def send_report(job: Job) -> None:
    return None


def produce(client: Client) -> None:
    send_report.defer({"day": 1}, delay_seconds="soon")  # expect-error
    send_report.defer(None, target=worker_target())  # expect-error
    client.create_task(target=worker_target(), priority="high")  # expect-error
    client.create_tasks([{"target": worker_target(), "run_at": "tomorrow"}])  # expect-error
    client.create_schedule(cron="* * * * *", task={"name": "no-target"})  # expect-error
    client.create_schedule(cron="* * * * *", task={"target": {}, "run_at": None})  # expect-error
    send_report.schedule("0 2 * * *", key="k", overlap=3)  # expect-error
    worker.schedule("0 2 * * *", key="k2", task={"timeout_seconds": "60"})  # expect-error
    len(client.list_attempts("t").items) + "1"  # expect-error
    step("a", priority="high")  # expect-error
    client.create_workflow(step("b"), defaults={"timeout_seconds": "60"})  # expect-error
