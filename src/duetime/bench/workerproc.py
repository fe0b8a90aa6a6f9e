"""A benchmark worker process: a :class:`duetime.Worker` whose no-op handler records, for each
task, the unix time its handler started. On SIGTERM it writes ``{task_id: started}`` as JSON.

``python -m duetime.bench.workerproc URL OUT QUEUE [CONCURRENCY]``
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import orjson


def main(argv: list[str] | None = None) -> None:
    from duetime import Job, Worker, WorkerConfig

    url, out, queue, *rest = sys.argv[1:] if argv is None else argv
    concurrency = int(rest[0]) if rest else 10
    started: dict[str, float] = {}
    worker = Worker(
        url, queues=[queue], concurrency=concurrency, config=WorkerConfig(wait_seconds=5)
    )

    @worker.handler("noop")
    async def noop(job: Job) -> None:
        started[job.id] = time.time()  # job.id reads the lease without parsing the task

    try:
        import uvloop

        runner = asyncio.Runner(loop_factory=uvloop.new_event_loop)
    except ImportError:  # pragma: no cover
        runner = asyncio.Runner()
    with runner:
        runner.run(worker.run(handle_signals=True))
    Path(out).write_bytes(orjson.dumps(started))


if __name__ == "__main__":
    main()
