"""duetime.Worker over a fake lease API (httpx.MockTransport): dispatch, batching of leases and
acks, exception mapping, timeouts, heartbeats, stale leases, outages and shutdown."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from worker_fakes import FakeLeaseApi, problem, task_json

import duetime
from duetime.sdk import ApiUnauthorized
from duetime.sdk.worker import Job, NonRetryable, Worker, WorkerConfig, WorkerStats, recent_pace

FAST = WorkerConfig(wait_seconds=0.05, ack_flush_seconds=0.001, backoff_seconds=0.01)


def make_worker(api: FakeLeaseApi, concurrency: int = 4, **config: Any) -> Worker:
    cfg = dataclasses.replace(FAST, **config)
    return Worker(api.client(), concurrency=concurrency, worker_id="w-test", config=cfg)


async def until(predicate: Callable[[], Any], within: float = 3.0) -> None:
    """Poll ``predicate()`` every few milliseconds until it holds."""
    for _ in range(int(within / 0.005)):
        if predicate():
            return
        await asyncio.sleep(0.005)
    raise AssertionError("condition not reached in time")


async def run_until(worker: Worker, predicate: Callable[[], Any]) -> None:
    """Run the worker until ``predicate()`` holds, then stop it gracefully."""
    running = asyncio.create_task(worker.run())
    await until(lambda: predicate() or running.done())
    assert not running.done(), running
    worker.stop()
    await asyncio.wait_for(running, 5)


def test_public_exports() -> None:
    assert duetime.Worker is Worker and duetime.NonRetryable is NonRetryable
    assert duetime.Job is Job and duetime.WorkerConfig is WorkerConfig
    assert list(duetime.__all__) == sorted(duetime.__all__)


async def test_sync_and_async_handlers_complete_in_batches() -> None:
    api = FakeLeaseApi()
    ids = [api.add("double", payload={"n": n}) for n in range(40)]
    ids += [api.add("shout", payload="hi") for _ in range(10)]
    worker = make_worker(api, concurrency=8)
    threads: set[str] = set()

    @worker.handler("double")
    async def double(job: Job) -> dict[str, int]:
        await asyncio.sleep(0.001)
        return {"n": job.payload["n"] * 2, "attempt": job.attempt}

    @worker.handler("shout")
    def shout(job: Job) -> str:
        threads.add(threading.current_thread().name)
        return str(job.payload).upper()

    stats = await asyncio.wait_for(worker.run(until_empty=True), 5)

    assert stats.succeeded == 50 and stats.leased == 50 and stats.failed == 0
    assert {api.outcomes[i][0] for i in ids} == {"complete"}
    assert api.outcomes[ids[3]][1]["result"] == {"n": 6, "attempt": 1}
    assert api.outcomes[ids[-1]][1]["result"] == "HI"
    assert threads and all(t.startswith("duetime-w-test") for t in threads)
    leases = api.bodies("/lease")
    assert all(b["names"] == ["double", "shout"] and b["worker_id"] == "w-test" for b in leases)
    # Free slots plus the default prefetch: one round of slots until handlers have finished.
    assert 1 <= leases[0]["max_tasks"] <= 8 + WorkerConfig().prefetch_for(8)
    assert all(1 <= b["max_tasks"] <= WorkerConfig().max_lease_batch for b in leases)
    assert all(b["wait_seconds"] == 0 for b in leases), "until_empty never long-polls"
    batches = api.bodies("/v1/leases/complete")
    assert sum(len(b["items"]) for b in batches) == 50
    assert len(batches) < 50, "acks were not batched"
    assert not api.bodies("/heartbeat"), "short tasks need no heartbeat"


async def test_lease_asks_for_free_slots_only_without_prefetch() -> None:
    api = FakeLeaseApi()
    for _ in range(12):
        api.add("slow")
    worker = make_worker(api, concurrency=3, prefetch=0)
    running = peak = 0

    @worker.handler("slow")
    async def slow(job: Job) -> None:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.02)
        running -= 1

    stats = await asyncio.wait_for(worker.run(until_empty=True), 5)
    assert stats.succeeded == 12 and peak == 3
    assert max(b["max_tasks"] for b in api.bodies("/lease")) == 3


async def test_prefetch_leases_ahead_but_runs_at_most_concurrency() -> None:
    api = FakeLeaseApi()
    for _ in range(20):
        api.add("slow")
    worker = make_worker(api, concurrency=2, prefetch=5, max_lease_batch=100)
    running = peak = 0

    @worker.handler("slow")
    async def slow(job: Job) -> None:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.01)
        running -= 1

    stats = await asyncio.wait_for(worker.run(until_empty=True), 5)
    asked = [b["max_tasks"] for b in api.bodies("/lease")]
    assert stats.succeeded == 20 and peak == 2
    assert asked[0] == 7 and max(asked) == 7, "2 slots + 5 prefetched, never more"


async def _drain_asking(
    api: FakeLeaseApi, worker: Worker, name: str
) -> tuple[WorkerStats, list[int]]:
    """Run ``worker`` with a 2 ms handler for ``name`` until the fake API is drained: its stats
    and the ``max_tasks`` of each lease call, in order."""

    @worker.handler(name)
    async def handle(job: Job) -> None:
        await asyncio.sleep(0.002)

    stats = await asyncio.wait_for(worker.run(until_empty=True), 10)
    return stats, [b["max_tasks"] for b in api.bodies("/lease")]


async def test_large_payloads_come_in_smaller_lease_batches() -> None:
    """A lease call asks for no more tasks than fit in ``max_lease_bytes`` at the size per lease
    the last answers had: the first call, knowing no size yet, asks for the whole window."""
    api = FakeLeaseApi()
    for _ in range(30):
        api.add("big", payload="x" * 100_000)
    worker = make_worker(
        api, concurrency=1, prefetch=20, max_lease_batch=100, max_lease_bytes=500_000
    )
    stats, asked = await _drain_asking(api, worker, "big")
    assert stats.succeeded == 30
    assert asked[0] == 21, asked  # 1 slot + 20 prefetched
    assert all(1 <= n <= 4 for n in asked[1:]), asked  # ~100 KB a lease: 500 KB is 4


async def test_the_default_prefetch_holds_at_most_four_lease_answers_of_bytes() -> None:
    """After a quick spell the default prefetch follows the worker's pace (here 125 finished
    at once: a pace of 500 a second), but never more leases than fit in 4 x
    ``max_lease_bytes`` at their recent size; a prefetch the caller fixed is left as it is."""
    loop = asyncio.get_running_loop()
    worker = make_worker(FakeLeaseApi(), concurrency=2, max_lease_bytes=1000)
    worker._loop = loop
    worker._finished.extend([loop.time()] * 125)
    assert worker._prefetch() == 500  # no answer seen yet: no size to go by
    worker._lease_sized(10_000, 100)  # 100 bytes a lease
    assert worker._prefetch() == 40
    worker._lease_sized(1_000_000, 10)  # then 100,000: the average follows within a call
    assert worker._prefetch() == 2  # never below concurrency
    fixed = make_worker(FakeLeaseApi(), concurrency=2, max_lease_bytes=1000, prefetch=300)
    fixed._loop = loop
    fixed._lease_sized(1_000_000, 10)
    assert fixed._prefetch() == 300


def test_max_lease_bytes_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_lease_bytes"):
        WorkerConfig(max_lease_bytes=0)


async def test_prefetch_refills_in_batches_not_one_by_one() -> None:
    api = FakeLeaseApi()
    for _ in range(40):
        api.add("quick")
    worker = make_worker(api, concurrency=1, prefetch=10, max_lease_batch=100)
    stats, asked = await _drain_asking(api, worker, "quick")
    assert stats.succeeded == 40
    assert asked[0] == 11 and min(asked) >= 5, asked  # never a lease call per freed slot


def test_the_pace_is_what_finished_in_the_horizon_or_its_rate_when_younger() -> None:
    now = 100.0
    assert recent_pace(deque(), now) == 0
    # Finishing for the whole second: the count. Older finishes are dropped.
    spread = deque([now - 1.5, now - 1.2] + [now - 1.0 + i * 0.01 for i in range(100)])
    assert recent_pace(spread, now) == 100 and len(spread) == 100
    # A worker that started finishing half a second ago: its rate over that half.
    assert recent_pace(deque([now - 0.5] + [now] * 99), now) == 200
    # The first calls of a burst: the rate over at least a quarter of a second, not 40 / 0.
    assert recent_pace(deque([now] * 40), now) == 160
    assert recent_pace(deque([now - 0.1] * 40), now) == 160


def test_default_prefetch_follows_the_pace_of_handlers() -> None:
    assert WorkerConfig().prefetch_for(10) == 10  # nothing finished yet: one round of slots
    assert WorkerConfig().prefetch_for(10, finished_recently=4) == 10
    assert WorkerConfig().prefetch_for(10, finished_recently=250) == 250
    assert WorkerConfig().prefetch_for(10, finished_recently=50_000) == 1000  # capped
    assert WorkerConfig().prefetch_for(2000, finished_recently=50_000) == 2000
    assert WorkerConfig(prefetch=0).prefetch_for(10, finished_recently=500) == 0
    assert WorkerConfig(prefetch=7).prefetch_for(10, finished_recently=500) == 7
    with pytest.raises(ValueError, match="prefetch"):
        WorkerConfig(prefetch=-1)


async def _lease_sizes(tasks: int, handler_seconds: float) -> list[int]:
    """Run a 2-slot worker at its default prefetch over ``tasks`` tasks whose handlers take
    ``handler_seconds``; the ``max_tasks`` of each lease call it made."""
    api = FakeLeaseApi()
    for _ in range(tasks):
        api.add("job")
    worker = make_worker(api, concurrency=2)

    @worker.handler("job")
    async def job(job: Job) -> None:
        if handler_seconds:
            await asyncio.sleep(handler_seconds)

    stats = await asyncio.wait_for(worker.run(until_empty=True), 10)
    assert stats.succeeded == tasks
    return [b["max_tasks"] for b in api.bodies("/lease")]


async def test_default_prefetch_grows_with_quick_handlers() -> None:
    """Handlers that finish at once let the window grow past one round of slots, so lease
    calls come back fuller (the burst case)."""
    asked = await _lease_sizes(300, 0)
    assert asked[0] == 4, asked  # 2 slots + 2 prefetched (the floor: concurrency)
    assert max(asked) >= 50, asked
    assert max(asked) <= WorkerConfig().max_lease_batch


async def test_a_burst_of_quick_tasks_reaches_full_lease_calls_within_a_dozen_calls(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The prefetch follows the pace of the first finishes, not their count over a second
    that has not passed yet (recent_pace): full calls within a dozen, where counting alone
    took more than sixteen (4, 4, 6, 6, 6, 12, 12, 16, 22, 30, 40, 52, 70, 96, 126, 172).
    Both spans are stretched alike, so a slow machine's ramp takes the same calls."""
    monkeypatch.setattr("duetime.sdk.worker.PREFETCH_HORIZON_SECONDS", 40.0)
    monkeypatch.setattr("duetime.sdk.worker.PREFETCH_MIN_SPAN_SECONDS", 10.0)
    asked = await _lease_sizes(3000, 0)
    full = WorkerConfig().max_lease_batch
    assert full in asked[:12], asked


async def test_default_prefetch_does_not_hoard_slow_tasks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Handlers slower than the horizon keep the prefetch at one round of slots."""
    monkeypatch.setattr("duetime.sdk.worker.PREFETCH_HORIZON_SECONDS", 0.02)
    asked = await _lease_sizes(12, 0.03)
    assert max(asked) <= 4, asked  # 2 slots + 2 prefetched, however many are queued


async def test_stop_releases_prefetched_leases_that_never_started() -> None:
    """They are handed back (``/v1/leases/release``): no attempt spent, so a task's last
    attempt is handed back too instead of failing the task unrun."""
    api = FakeLeaseApi()
    ids = [api.add("block") for _ in range(4)]
    last = api.add("block", attempts=3, retry={"max_attempts": 3})
    worker = make_worker(api, concurrency=1, prefetch=4, shutdown_grace_seconds=5)
    release = asyncio.Event()
    started: list[str] = []

    @worker.handler("block")
    async def block(job: Job) -> str:
        started.append(job.id)
        await release.wait()
        return "done"

    running = asyncio.create_task(worker.run())
    await until(lambda: worker.stats.leased == 5 and started)
    worker.stop()
    waiting = [i for i in [*ids, last] if i not in started]
    # The four waiting leases are handed back at once, while the running one still runs.
    await until(lambda: all(i in api.outcomes for i in waiting))
    assert started == [ids[0]] and len(waiting) == 4 and last in waiting
    assert {api.outcomes[i][0] for i in waiting} == {"release"}
    assert api.bodies("/v1/leases/release")  # one batch call, not one per lease
    release.set()  # the running one finishes within its grace
    stats = await asyncio.wait_for(running, 5)
    assert started == [ids[0]] and api.outcomes[ids[0]][0] == "complete"
    assert stats.released == 4 and stats.succeeded == 1


async def test_a_hard_stop_hands_back_waiting_leases_and_fails_running_ones() -> None:
    api = FakeLeaseApi()
    first = api.add("block")
    last = api.add("block", attempts=2, retry={"max_attempts": 2})
    worker = make_worker(api, concurrency=1, prefetch=1, shutdown_grace_seconds=5)

    @worker.handler("block")
    async def block(job: Job) -> None:
        await asyncio.sleep(30)

    running = asyncio.create_task(worker.run())
    await until(lambda: worker.stats.leased == 2)
    worker.stop(graceful=False)
    stats = await asyncio.wait_for(running, 5)
    assert api.outcomes[first][0] == "fail" and api.outcomes[last][0] == "release"
    assert stats.released == 2


def test_job_reads_the_lease_lazily() -> None:
    data = task_json("t-1", "x", payload={"a": 1}, timeout_seconds=2)
    job = Job(data, 1, "l-1", "w")
    assert (job.id, job.name, job.payload, job.timeout_seconds) == ("t-1", "x", {"a": 1}, 2.0)
    assert not job.last_attempt  # no policy in the lease: not known to be the last
    assert Job({**data, "retry": {"max_attempts": 1}}, 1, "l", "w").last_attempt
    assert job.task.payload == {"a": 1} and job.task.status.value == "running"
    assert job.task is job.task  # parsed once


async def test_exceptions_map_to_retryable_and_non_retryable_failures() -> None:
    api = FakeLeaseApi()
    boom = api.add("boom")
    final = api.add("final")
    sync_boom = api.add("sync-boom")
    odd = api.add("odd-result")
    worker = make_worker(api)

    @worker.handler("boom")
    async def fails(job: Job) -> None:
        raise ValueError("bad value\nsecond line")

    @worker.handler("final")
    async def refuses(job: Job) -> None:
        raise NonRetryable("never again")

    @worker.handler("sync-boom")
    def sync_fails(job: Job) -> None:
        raise KeyError("k")

    @worker.handler("odd-result")
    async def unencodable(job: Job) -> object:
        return object()

    stats = await asyncio.wait_for(worker.run(until_empty=True), 5)
    assert stats.failed == 4 and stats.succeeded == 0
    kind, body = api.outcomes[boom]
    assert kind == "fail" and body["retryable"] is True
    assert body["error"] == "ValueError: bad value\nsecond line"
    assert api.outcomes[final][1] == {
        "lease_id": api.outcomes[final][1]["lease_id"],
        "error": "NonRetryable: never again",
        "retryable": False,
        "retry_after_seconds": None,
        "timed_out": False,
        "logs": api.outcomes[final][1]["logs"],
    }
    # The attempt's logs carry the traceback: where the handler raised, the exception last.
    trace = api.outcomes[boom][1]["logs"]
    assert trace.startswith("Traceback (most recent call last):\n")
    assert 'raise ValueError("bad value\\nsecond line")' in trace
    assert trace.endswith("ValueError: bad value\nsecond line")
    assert api.outcomes[sync_boom][1]["error"] == "KeyError: 'k'"
    assert api.outcomes[sync_boom][1]["retryable"] is True
    assert api.outcomes[odd][1]["retryable"] is False
    assert "not JSON" in api.outcomes[odd][1]["error"]


async def test_error_text_is_cut_to_max_error_chars() -> None:
    api = FakeLeaseApi()
    task = api.add("long")
    worker = make_worker(api, max_error_chars=20)

    @worker.handler("long")
    async def long_error(job: Job) -> None:
        raise RuntimeError("x" * 500)

    await asyncio.wait_for(worker.run(until_empty=True), 5)
    assert api.outcomes[task][1]["error"] == "RuntimeError: xxxxxx"


async def test_task_without_handler_fails_non_retryable() -> None:
    # The server normally filters by names; a task that slips through still ends cleanly.
    api = FakeLeaseApi()
    stray = api.add("unknown")
    worker = make_worker(api)
    worker.add_handler("known", lambda job: None)
    api.queues["default"][0]["name"] = "unknown"

    async def lease_ignoring_names(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/lease"):
            body = request.content.replace(b'"names":["known"]', b'"names":null')
            request = httpx.Request(request.method, request.url, content=body)
        return await api.handle(request)

    worker = Worker(
        duetime.AsyncClient("http://x", transport=httpx.MockTransport(lease_ignoring_names)),
        config=FAST,
    )
    worker.add_handler("known", lambda job: None)
    stats = await asyncio.wait_for(worker.run(until_empty=True), 5)
    assert stats.failed == 1
    kind, body = api.outcomes[stray]
    assert kind == "fail" and body["retryable"] is False
    assert body["error"] == "no handler for task name 'unknown'"


async def test_async_handler_timeout_fails_retryable() -> None:
    api = FakeLeaseApi()
    task = api.add("sleepy", timeout_seconds=0.05)
    worker = make_worker(api)
    cancelled = asyncio.Event()

    @worker.handler("sleepy")
    async def sleepy(job: Job) -> None:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    # Done within 20 s of a 60 s handler: the 0.05 s timeout cut it (generous for a loaded box).
    stats = await asyncio.wait_for(worker.run(until_empty=True), 20)
    assert cancelled.is_set() and stats.timed_out == 1 and stats.failed == 1
    assert api.outcomes[task][1]["error"] == "timed out after 0.05s"
    assert api.outcomes[task][1]["retryable"] is True
    assert api.outcomes[task][1]["timed_out"] is True


async def test_handler_raising_its_own_timeout_error_is_an_ordinary_failure() -> None:
    api = FakeLeaseApi()
    task = api.add("own-timeout", timeout_seconds=5)
    worker = make_worker(api)

    @worker.handler("own-timeout")
    async def own(job: Job) -> None:
        raise TimeoutError("upstream slow")

    stats = await asyncio.wait_for(worker.run(until_empty=True), 5)
    assert stats.timed_out == 0
    assert api.outcomes[task][1]["error"] == "TimeoutError: upstream slow"


async def test_sync_handler_timeout_is_reported_at_once_and_keeps_its_slot() -> None:
    api = FakeLeaseApi()
    stuck = api.add("block", timeout_seconds=0.05)
    after = api.add("quick")
    worker = make_worker(api, concurrency=1)
    release = threading.Event()
    quick_started_at: list[float] = []

    @worker.handler("block")
    def block(job: Job) -> str:
        release.wait(5)
        return "late"

    @worker.handler("quick")
    def quick(job: Job) -> None:
        quick_started_at.append(time.monotonic())

    running = asyncio.create_task(worker.run(until_empty=True))
    await until(lambda: stuck in api.outcomes)
    assert api.outcomes[stuck][1]["error"] == "timed out after 0.05s"
    await asyncio.sleep(0.1)
    assert not quick_started_at, "the slot of a thread still running was given away"
    released_at = time.monotonic()
    release.set()
    stats = await asyncio.wait_for(running, 5)
    assert quick_started_at and quick_started_at[0] >= released_at
    assert api.outcomes[after][0] == "complete"
    assert api.outcomes[stuck][0] == "fail", "the late result must be dropped"
    assert stats.timed_out == 1 and stats.succeeded == 1


async def test_long_handlers_are_kept_alive_by_heartbeats() -> None:
    api = FakeLeaseApi()
    task = api.add("long")
    quick = api.add("short")
    worker = make_worker(api, lease_seconds=0.3)  # a beat every 0.1 s

    def heartbeats() -> list[Any]:
        return [c for c in api.calls if c.path.endswith("/heartbeat")]

    @worker.handler("long")
    async def long(job: Job) -> str:
        await until(lambda: len(heartbeats()) >= 3, within=20)  # kept alive past its lease
        return "done"

    @worker.handler("short")
    def short(job: Job) -> None:
        return None

    started = time.monotonic()
    stats = await asyncio.wait_for(worker.run(until_empty=True), 30)
    beats = heartbeats()
    assert len(beats) >= 3, beats
    # ... and not beaten faster than a third of the lease: three beats take 0.3 s. (A lower
    # bound on elapsed time: a loaded machine only makes it longer.)
    assert time.monotonic() - started >= 0.25
    assert all(f"lease-{task}-" in c.path for c in beats), "only the long task is beaten"
    assert all(c.body == {"extend_seconds": 0.3} for c in beats)
    assert stats.heartbeats == len(beats)
    assert api.outcomes[task][1]["result"] == "done" and api.outcomes[quick][0] == "complete"


async def test_lost_lease_cancels_async_handler_and_sends_no_ack() -> None:
    api = FakeLeaseApi()
    task = api.add("long")
    worker = make_worker(api, lease_seconds=0.15)
    cancelled = asyncio.Event()

    @worker.handler("long")
    async def long(job: Job) -> None:
        api.stale.add(job.lease_id)  # e.g. the server reclaimed it after a network split
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    stats = await asyncio.wait_for(worker.run(until_empty=True), 5)
    assert cancelled.is_set() and stats.lost_leases == 1
    assert task not in api.outcomes and not api.bodies("/complete") and not api.bodies("/fail")


async def test_stale_acks_are_counted_not_raised() -> None:
    api = FakeLeaseApi()
    first, second = api.add("job"), api.add("job")
    worker = make_worker(api)

    @worker.handler("job")
    async def job(job: Job) -> None:
        if job.id == first:
            api.stale.add(job.lease_id)

    stats = await asyncio.wait_for(worker.run(until_empty=True), 5)
    assert stats.stale_acks == 1 and stats.succeeded == 1
    assert first not in api.outcomes and api.outcomes[second][0] == "complete"


async def test_outage_backs_off_and_recovers() -> None:
    api = FakeLeaseApi()
    task = api.add("job")
    api.lease_failures = [
        problem(503, "unavailable"),
        httpx.ConnectError("refused"),
        httpx.Response(502, text="bad gateway"),
    ]
    worker = make_worker(api)
    worker.add_handler("job", lambda job: "ok")
    stats = await asyncio.wait_for(worker.run(until_empty=True), 5)
    assert stats.server_errors == 3 and stats.succeeded == 1
    assert api.outcomes[task][1]["result"] == "ok"


async def test_acks_survive_an_outage() -> None:
    api = FakeLeaseApi()
    task = api.add("job")
    worker = make_worker(api)
    worker.add_handler("job", lambda job: 1)
    outage = [problem(503, "unavailable"), problem(503, "unavailable")]
    real = api.handle

    async def flaky(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/leases/complete" and outage:
            return outage.pop()
        return await real(request)

    api.handle = flaky  # type: ignore[method-assign]
    worker = Worker(
        duetime.AsyncClient("http://x", transport=httpx.MockTransport(flaky)), config=FAST
    )
    worker.add_handler("job", lambda job: 1)
    stats = await asyncio.wait_for(worker.run(until_empty=True), 5)
    assert stats.succeeded == 1 and api.outcomes[task][1]["result"] == 1
    assert len(api.bodies("/v1/leases/complete")) == 1  # the two 503s never reached the fake


async def test_rejected_batch_is_retried_one_by_one() -> None:
    api = FakeLeaseApi()
    good, bad = api.add("job", payload=1), api.add("job", payload=2)
    api.batch_refusal = problem(422, "validation", "items.1.result: too large")

    def refuse_big(action: str, body: Any) -> httpx.Response | None:
        if action == "complete" and body["result"] == "big":
            return problem(422, "validation", "result too large")
        return None

    api.single_refusal = refuse_big
    worker = make_worker(api)
    worker.add_handler("job", lambda job: "small" if job.payload == 1 else "big")
    stats = await asyncio.wait_for(worker.run(until_empty=True), 5)
    assert api.outcomes[good] == ("complete", {"result": "small"})
    kind, body = api.outcomes[bad]
    assert kind == "fail" and body["retryable"] is False
    assert body["error"].startswith("result rejected by the server: result too large")
    assert stats.succeeded == 1 and stats.failed == 1 and stats.ack_errors == 0


async def test_unauthorized_stops_the_worker_with_the_error() -> None:
    api = FakeLeaseApi()
    api.lease_failures = [problem(401, "unauthorized", "unknown API key")]
    worker = make_worker(api)
    worker.add_handler("job", lambda job: None)
    with pytest.raises(ApiUnauthorized):
        await asyncio.wait_for(worker.run(), 5)


async def test_run_without_handlers_is_refused() -> None:
    with pytest.raises(ValueError, match="handler"):
        await Worker(FakeLeaseApi().client()).run()


def test_handler_registration_checks() -> None:
    worker = Worker("http://127.0.0.1:1")
    worker.add_handler("a", lambda job: None)
    with pytest.raises(ValueError, match="already"):
        worker.add_handler("a", lambda job: None)
    with pytest.raises(ValueError):
        Worker("http://127.0.0.1:1", queues="default")
    with pytest.raises(ValueError):
        Worker("http://127.0.0.1:1", concurrency=0)
    with pytest.raises(ValueError):
        WorkerConfig(lease_seconds=0)
    assert WorkerConfig(lease_seconds=9).heartbeat_interval == 3


async def test_stop_during_a_long_poll_returns_promptly() -> None:
    api = FakeLeaseApi(max_long_poll=60)
    worker = make_worker(api, wait_seconds=60)
    worker.add_handler("job", lambda job: None)
    running = asyncio.create_task(worker.run())
    await until(lambda: api.bodies("/lease"))
    worker.stop()
    # Within 20 s of a 60 s long poll: the stop ended it (generous for a loaded machine).
    await asyncio.wait_for(running, 20)
    assert api.bodies("/lease")[0]["wait_seconds"] == 60


async def test_graceful_stop_lets_running_handlers_finish() -> None:
    api = FakeLeaseApi()
    task = api.add("job")
    worker = make_worker(api, shutdown_grace_seconds=2)
    started = asyncio.Event()

    @worker.handler("job")
    async def job(job: Job) -> str:
        started.set()
        await asyncio.sleep(0.1)
        return "finished"

    running = asyncio.create_task(worker.run())
    await started.wait()
    worker.stop()
    polls = len(api.bodies("/lease"))
    stats = await asyncio.wait_for(running, 10)
    assert api.outcomes[task][1]["result"] == "finished"
    assert stats.released == 0 and stats.succeeded == 1
    assert len(api.bodies("/lease")) == polls, "no leasing after stop"


async def test_grace_period_over_fails_the_rest_back_as_retryable() -> None:
    api = FakeLeaseApi()
    a_task, s_task = api.add("async-slow"), api.add("sync-slow")
    worker = make_worker(api, shutdown_grace_seconds=0.1)
    both = asyncio.Event()
    seen: set[str] = set()
    release = threading.Event()

    @worker.handler("async-slow")
    async def async_slow(job: Job) -> None:
        seen.add("a")
        await asyncio.sleep(60)

    @worker.handler("sync-slow")
    def sync_slow(job: Job) -> None:
        seen.add("s")
        release.wait(60)

    running = asyncio.create_task(worker.run())
    await until(lambda: seen == {"a", "s"})
    both.set()
    started = time.monotonic()
    worker.stop()
    stats = await asyncio.wait_for(running, 30)
    # The grace (0.1 s) passed, then the stop gave up on handlers that would run 60 s: the upper
    # bound is generous for a loaded machine and still far below them.
    assert 0.1 <= time.monotonic() - started < 10
    release.set()
    for task in (a_task, s_task):
        kind, body = api.outcomes[task]
        assert kind == "fail" and body["error"] == "worker shutting down"
        assert body["retryable"] is True
    assert stats.released == 2 and stats.failed == 0


async def test_second_stop_skips_the_grace_period() -> None:
    api = FakeLeaseApi()
    task = api.add("job")
    worker = make_worker(api, shutdown_grace_seconds=30)
    started = asyncio.Event()

    @worker.handler("job")
    async def job(job: Job) -> None:
        started.set()
        await asyncio.sleep(30)

    running = asyncio.create_task(worker.run())
    await started.wait()
    worker.stop()
    await asyncio.sleep(0.05)
    assert not running.done()
    worker.stop()
    await asyncio.wait_for(running, 10)  # far below the 30 s grace: stop() again skips it
    assert api.outcomes[task][1]["error"] == "worker shutting down"


async def test_several_queues_are_swept_before_long_polling() -> None:
    api = FakeLeaseApi()
    a = api.add("job", queue="a")
    b = api.add("job", queue="b")
    worker = Worker(api.client(), queues=["a", "b"], config=FAST)
    worker.add_handler("job", lambda job: job.task.queue)
    await run_until(worker, lambda: len(api.outcomes) == 2)
    assert api.outcomes[a][1]["result"] == "a" and api.outcomes[b][1]["result"] == "b"
    polled = {c.path.split("/")[3] for c in api.calls if c.path.endswith("/lease")}
    assert polled == {"a", "b"}


async def test_stop_from_another_thread() -> None:
    api = FakeLeaseApi()
    worker = make_worker(api)
    worker.add_handler("job", lambda job: None)
    running = asyncio.create_task(worker.run())
    await until(lambda: api.bodies("/lease"))
    await asyncio.to_thread(worker.stop)
    await asyncio.wait_for(running, 10)
