"""An SDK worker process for the fault suite: a :class:`duetime.Worker` whose ``noop`` handler
appends one line ``task_id attempt`` to a file for every run it starts — every run, so a task
handled twice shows twice (flushed per line: a worker killed or frozen keeps what it wrote).

``python -m duetime.testing.faultworker URL OUT QUEUE [CONCURRENCY [LEASE_SECONDS]]``
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path


def handled(path: Path) -> dict[str, list[int]]:
    """The attempt numbers each task id was run with (one per run), from the file one or more
    workers appended to."""
    seen: dict[str, list[int]] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            if line.strip():
                task_id, attempt = line.split()
                seen.setdefault(task_id, []).append(int(attempt))
    return seen


def main(argv: list[str] | None = None) -> None:
    from duetime import Job, Worker, WorkerConfig

    url, out, queue, *rest = sys.argv[1:] if argv is None else argv
    concurrency = int(rest[0]) if rest else 20
    lease = float(rest[1]) if len(rest) > 1 else 5.0
    worker = Worker(
        url,
        queues=[queue],
        concurrency=concurrency,
        config=WorkerConfig(
            wait_seconds=2,
            lease_seconds=lease,
            backoff_seconds=0.1,
            max_backoff_seconds=1.0,
            request_timeout_seconds=10,
        ),
    )
    # Line-buffered: each run is on disk at once.
    with Path(out).open("a", buffering=1) as sink:

        @worker.handler("noop")
        async def noop(job: Job) -> None:
            sink.write(f"{job.task.id} {job.attempt}\n")

        asyncio.run(worker.run(handle_signals=True))


if __name__ == "__main__":
    main()
