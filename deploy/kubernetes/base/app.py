"""The compose file's example worker (``duetime worker app:worker``): replace with your own."""

from __future__ import annotations

from typing import Any

from duetime import Job, Worker

worker = Worker(queues=["default"], concurrency=10)  # $DUETIME_URL, $DUETIME_API_KEY

# Declared by key: every start of every copy leaves exactly one schedule.
worker.schedule("0 2 * * *", key="nightly-report", name="send-report", tz="UTC")


@worker.handler("send-report")
async def send_report(job: Job) -> dict[str, Any]:
    return {"sent": job.payload}
