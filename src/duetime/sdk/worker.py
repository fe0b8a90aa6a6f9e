"""The pull worker: runs your Python functions as duetime tasks (SPEC §3 "Queues and pull
workers", §5).

::

    worker = duetime.Worker("http://127.0.0.1:8080", queues=["default"], concurrency=20,
                            api_key="dt_...")

    @worker.handler("send-report")
    async def send_report(job: duetime.Job) -> dict[str, int]:
        report = await build(job.payload["report"])
        job.log("built", report.pages, "pages")  # kept with this attempt (its logs)
        return {"pages": report.pages}          # becomes the task's result (JSON)

    @worker.handler("resize")
    def resize(job: duetime.Job) -> None:       # sync handlers run in a thread pool
        if job.payload is None:
            raise duetime.NonRetryable("nothing to resize")   # fails for good
        ...

    worker.run_sync()                  # or: await worker.run();  duetime worker app:worker

A handler receives a :class:`Job` (the leased task, its payload, the attempt number). It
succeeds by returning (the value, JSON-encoded, becomes the task's ``result``), and fails by
raising: :class:`NonRetryable` fails the task for good, any other exception is a retryable
failure recorded as ``"TypeName: message"``. Lines a handler adds with :meth:`Job.log` (like
``print``) are sent with the completion or failure and kept with the attempt (``GET
/v1/tasks/{id}/attempts``, the history; the first 64 KiB); a handler that raised adds its
traceback after them (its last 8 KiB, from the ``Traceback (most recent call last):`` line; the
dashboard's task page shows it apart). A handler that overruns the task's
``timeout_seconds`` fails (retryable) with ``"timed out after Ns"``: an async one is cancelled,
a sync one is left to finish in its thread (its slot stays taken until it does) and its result
is dropped.

How it runs: one loop leases tasks ahead of free slots — up to ``concurrency`` running plus
``prefetch`` waiting for a slot, as Celery's prefetch does — long-polling when idle and asking only
for task names it has handlers for; it leases again once at most half the prefetch still waits,
so each call brings a fuller batch. By default the prefetch follows the handlers' pace: about
as many tasks as the worker finishes in a second at its recent pace (at least ``concurrency``,
at most 1,000), so quick tasks come in full batches while the next call travels, and slow ones
are not hoarded while other workers idle. A prefetched lease is heart-beaten like a running
one, so its lease covers the wait for a slot; a lease is read without model validation
(``job.task`` is parsed on first use). Each task runs on its own
(async handlers in the event loop, sync ones in a thread pool of ``concurrency`` threads);
leases held longer than a third of ``lease_seconds`` are extended by heartbeats; completions and
failures are sent in batches a few milliseconds apart. A lease the server says is stale (409:
expired and given to another worker, or cancelled) is logged and counted, and the handler's work
is dropped — never an exception. A server outage (503, no connection) is ridden out with
backoff. With several queues, each round asks every queue (without waiting) before long-polling
one of them for at most a second, in turn.

Stopping: :meth:`Worker.stop` (or SIGTERM/SIGINT under :meth:`Worker.run_sync`) stops leasing at
once, hands back the prefetched leases that have not started (``POST /v1/leases/release``: they
wait for another worker and their attempts are not spent), lets running handlers finish for
``shutdown_grace_seconds``,
fails the rest back as retryable (``"worker shutting down"``) so another worker takes them
without waiting for their leases to expire, and flushes every ack. A second signal skips the
grace period.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import os
import random
import secrets
import signal
import socket
import threading
import traceback
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar, Unpack

from duetime.observe.logs import quiet_http_clients
from duetime.sdk.acks import AckBatcher, AckOutcome, encode_result
from duetime.sdk.declared import DeclaredSchedule, declaration, declare_all
from duetime.sdk.errors import (
    ApiConflict,
    ApiError,
    ApiNotFound,
    ApiUnauthorized,
    ApiUnavailable,
    ApiValidationError,
    TransportError,
)
from duetime.sdk.handles import Retry, TaskHandle
from duetime.sdk.held import HeldPayload
from duetime.sdk.models import Parent, RetryFields, ScheduleSettings, Task, TemplateFields
from duetime.sdk.runs import outcome
from duetime.sdk.threads import DaemonThreadPool
from duetime.sdk.workflows import Parents

if TYPE_CHECKING:
    from duetime.sdk.client import AsyncClient

__all__ = [
    "Handler",
    "Job",
    "NonRetryable",
    "Retry",
    "TaskHandle",
    "Worker",
    "WorkerConfig",
    "WorkerStats",
]

log = logging.getLogger("duetime.worker")

F = TypeVar("F", bound=Callable[..., Any])
P = TypeVar("P")
R = TypeVar("R")
Handler = Callable[["Job"], Any]
"""A handler: ``def f(job) -> result`` or ``async def f(job) -> result``."""

SHUTDOWN_ERROR = "worker shutting down"
LOG_LIMIT_CHARS = 64 * 1024
""":attr:`Job.logs` holds at most this many characters (the server keeps the first 64 KiB of
UTF-8), so one huge line cannot make the server refuse the ack."""
LOGS_LIMIT_BYTES = 64 * 1024
"""The UTF-8 the server keeps of an attempt's logs."""
TRACEBACK_LIMIT_BYTES = 8 * 1024
"""A failing handler's traceback is cut to its last this many bytes of UTF-8."""
TRACEBACK_HEAD = "Traceback (most recent call last):"
_SDK_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
MAX_HANDLERS = 100
"""A lease call names at most this many tasks (the server's limit)."""
MAX_DEFAULT_PREFETCH = 1000
"""The default prefetch never holds more than this many waiting leases."""
PREFETCH_HORIZON_SECONDS = 1.0
"""The default prefetch holds about as many leases as the worker finishes in this many seconds
at its recent pace."""
PREFETCH_MIN_SPAN_SECONDS = 0.25
"""A pace is never taken from a shorter stretch of finished tasks than this (see
:func:`recent_pace`)."""
PREFETCH_BYTES_FACTOR = 4
"""The default prefetch holds at most this many ``max_lease_bytes`` of leases."""


def recent_pace(finished: deque[float], now: float) -> int:
    """How many tasks a worker finishes in :data:`PREFETCH_HORIZON_SECONDS` at its recent
    pace, from the times its handlers finished (oldest first; those older than the horizon
    are dropped from ``finished``).

    A worker that has been finishing tasks for the whole horizon counts what it finished.
    One that only started finishing ``span`` seconds ago — the first calls of a burst — has
    its count scaled up to the horizon, ``span`` taken as at least
    :data:`PREFETCH_MIN_SPAN_SECONDS`: 40 quick tasks in the first 0.1 s are a pace of 160,
    where the count alone would make the prefetch grow by half a call per call, for a
    second. Slow handlers are unaffected: until one
    finishes, the pace is 0.
    """
    horizon = now - PREFETCH_HORIZON_SECONDS
    while finished and finished[0] < horizon:
        finished.popleft()
    if not finished:
        return 0
    span = max(now - finished[0], PREFETCH_MIN_SPAN_SECONDS)
    if span >= PREFETCH_HORIZON_SECONDS:
        return len(finished)
    return int(len(finished) * PREFETCH_HORIZON_SECONDS / span)


class NonRetryable(Exception):
    """Raise from a handler to fail the task for good: no further attempts, whatever its retry
    policy. The message becomes the attempt's error."""


@dataclass(frozen=True, slots=True)
class WorkerConfig:
    """How a :class:`Worker` leases, beats, acks and stops; the defaults suit most workers.

    - ``lease_seconds``: how long each lease lasts without a heartbeat (and each heartbeat
      extends it by as much). A crashed worker's tasks come back after at most this long.
    - ``heartbeat_seconds``: how often a running task's lease is extended; default a third of
      ``lease_seconds``.
    - ``wait_seconds``: how long one lease call long-polls when nothing is due.
    - ``max_lease_batch``: the most tasks asked for in one lease call. The prefetch below is
      what bounds how many a worker holds; this only caps one call (500: a burst of quick
      tasks then costs a fifth of the lease calls of 100, measured ~22 % faster in
      ``benchmarks/worker_burst.py --concurrency 0``).
    - ``max_lease_bytes``: about how many bytes one lease answer may bring: a call asks for no
      more tasks than fit at the size per lease the last answers had (at least one), so large
      payloads come in smaller batches (256 KiB payloads: 32 a call at the default 8 MiB).
    - ``prefetch``: how many leased tasks may wait for a free slot (beyond ``concurrency``
      running ones). None (the default) follows the handlers' pace: as many as the worker
      finishes in :data:`PREFETCH_HORIZON_SECONDS` at its recent pace (:func:`recent_pace`),
      at least ``concurrency`` and at most 1,000. Quick tasks then arrive in full batches
      (``max_lease_batch`` a call) while the next call travels; slow ones wait in at most
      one round of slots, not behind this worker while another idles. Leases taken during a
      quick spell stay held if the handlers then slow down (at most 1,000, and at most what
      fits in four times ``max_lease_bytes`` at the size per lease of recent answers). They
      are heart-beaten while they wait (one call per lease each ``heartbeat_interval``) and
      released at a stop. A number fixes it; 0 leases only for free slots.
    - ``ack_flush_seconds``, ``ack_batch_size``: acks wait at most this long, or until this many
      are buffered, before they are sent.
    - ``shutdown_grace_seconds``: how long running handlers may finish after a stop request.
    - ``final_flush_seconds``: how long to keep trying to send the last acks when stopping.
    - ``backoff_seconds``, ``max_backoff_seconds``: waits between retries while the server is
      unreachable or unavailable (doubling, with jitter).
    - ``request_timeout_seconds``: the timeout of each API call (a long poll adds its wait),
      used when the worker builds its own client from a URL.
    - ``max_error_chars``: a failure's error text is cut to this length.
    """

    lease_seconds: float = 30.0
    heartbeat_seconds: float | None = None
    wait_seconds: float = 20.0
    max_lease_batch: int = 500
    max_lease_bytes: int = 8 * 1024 * 1024
    prefetch: int | None = None
    ack_flush_seconds: float = 0.002
    ack_batch_size: int = 500
    shutdown_grace_seconds: float = 30.0
    final_flush_seconds: float = 5.0
    backoff_seconds: float = 0.1
    max_backoff_seconds: float = 5.0
    request_timeout_seconds: float = 10.0
    max_error_chars: int = 2000

    def __post_init__(self) -> None:
        if self.heartbeat_seconds is not None and not self.heartbeat_seconds > 0:
            raise ValueError("heartbeat_seconds must be > 0")
        if self.shutdown_grace_seconds < 0:
            raise ValueError("shutdown_grace_seconds must be >= 0")
        if not (1 <= self.max_lease_batch <= 1000 and 1 <= self.ack_batch_size <= 1000):
            raise ValueError("max_lease_batch and ack_batch_size must be in 1..1000")
        if self.prefetch is not None and self.prefetch < 0:
            raise ValueError("prefetch must be >= 0")
        if self.max_lease_bytes < 1:
            raise ValueError("max_lease_bytes must be >= 1")
        if self.lease_seconds < 0.1 or not 0 <= self.wait_seconds <= 60:
            raise ValueError("lease_seconds must be >= 0.1 and wait_seconds in 0..60")

    @property
    def heartbeat_interval(self) -> float:
        """Seconds between two heartbeats of one lease."""
        return self.heartbeat_seconds or self.lease_seconds / 3

    def prefetch_for(self, concurrency: int, finished_recently: int = 0) -> int:
        """Leased tasks that may wait for a slot, for a worker of ``concurrency`` slots whose
        handlers finish ``finished_recently`` tasks in :data:`PREFETCH_HORIZON_SECONDS` at
        their recent pace (:func:`recent_pace`)."""
        if self.prefetch is not None:
            return self.prefetch
        return max(concurrency, min(finished_recently, MAX_DEFAULT_PREFETCH))


class Job:
    """One leased run of a task, as a handler receives it.

    ``task`` is the task as ``GET /v1/tasks/{id}`` shows it (a :class:`Task`, parsed from the
    lease on first use: a handler that reads only ``payload``, ``id`` or ``name`` costs no model
    validation); ``attempt`` is this attempt's number (1 for the first); ``lease_id`` is the
    fencing token the worker acks with; ``traceparent`` is the W3C trace context the task was
    created with (None without one): a handler that traces continues the creator's trace from it.

    :meth:`log` attaches text to this attempt: it is sent with the completion or failure and
    shown by ``GET /v1/tasks/{id}/attempts`` and the history (the first 64 KiB).
    """

    __slots__ = (
        "_client",
        "_data",
        "_held",
        "_log_chars",
        "_logs",
        "_loop",
        "_parents",
        "_parents_data",
        "_spawns",
        "_task",
        "attempt",
        "lease_id",
        "traceparent",
        "worker_id",
    )

    def __init__(
        self,
        task: Task | Mapping[str, Any],
        attempt: int,
        lease_id: str,
        worker_id: str,
        traceparent: str | None = None,
        *,
        parents: Sequence[Mapping[str, Any]] | None = None,
        client: AsyncClient | None = None,
    ) -> None:
        self._task: Task | None = task if isinstance(task, Task) else None
        self._data: Mapping[str, Any] = {} if isinstance(task, Task) else task
        self.attempt = attempt
        self.lease_id = lease_id
        self.worker_id = worker_id
        self.traceparent = traceparent
        self._logs: list[str] | None = None
        self._log_chars = 0
        self._parents_data = parents or ()
        self._parents: Parents | None = None
        self._client = client
        self._loop: asyncio.AbstractEventLoop | None = None
        self._spawns = 0
        self._held: HeldPayload | None = None

    async def held_payload(self) -> Any:
        """The payload duetime holds for this task (created with ``payload_held``), fetched
        from the server on first call with this attempt's token, then kept. Raises
        ``LookupError`` for a task that holds none, the SDK's ``ApiError`` when the server
        refuses (403: the attempt is over)."""
        if self._held is None:
            raise LookupError(
                f"task {self.id} holds no payload (it was not made with payload_held)"
            )
        return await self._held.get()

    def log(self, *parts: object, sep: str = " ") -> None:
        """Add a line to this attempt's logs, like ``print``: the parts as text, joined by
        ``sep``. Safe from a sync handler's thread. The server keeps the first 64 KiB of UTF-8;
        lines past that are not even kept here."""
        if self._logs is None:
            self._logs, self._log_chars = [], 0
        elif self._log_chars >= LOG_LIMIT_CHARS:
            return
        line = sep.join(map(str, parts))
        self._logs.append(line)
        self._log_chars += len(line) + 1

    @property
    def logs(self) -> str | None:
        """The lines :meth:`log` added, one per line, cut to :data:`LOG_LIMIT_CHARS` characters
        (None: none)."""
        if not self._logs:
            return None
        return "\n".join(self._logs)[:LOG_LIMIT_CHARS]

    @property
    def task(self) -> Task:
        """The leased task (raises pydantic's ``ValidationError`` if the server sent a task this
        SDK cannot read)."""
        if self._task is None:
            self._task = Task.model_validate(self._data)
        return self._task

    @property
    def payload(self) -> Any:
        """The task's payload (any JSON value)."""
        return self._data.get("payload") if self._task is None else self._task.payload

    @property
    def id(self) -> str:
        """The task's id."""
        return str(self._data["id"]) if self._task is None else self._task.id

    @property
    def name(self) -> str | None:
        """The task's name (the handler it was dispatched to)."""
        return self._data.get("name") if self._task is None else self._task.name

    @property
    def last_attempt(self) -> bool:
        """Whether this attempt is the last one the task's retry policy allows (failing it back
        would fail the task for good)."""
        if self._task is not None:
            return self.attempt >= self._task.retry.max_attempts
        retry = self._data.get("retry")
        limit = retry.get("max_attempts") if isinstance(retry, Mapping) else None
        return isinstance(limit, int) and self.attempt >= limit

    @property
    def timeout_seconds(self) -> float | None:
        """The task's timeout (None: none)."""
        if self._task is not None:
            return self._task.timeout_seconds
        value = self._data.get("timeout_seconds")
        return None if value is None else float(value)

    def __repr__(self) -> str:
        return f"Job(id={self.id!r}, name={self.name!r}, attempt={self.attempt})"

    @property
    def payload_ref(self) -> str | None:
        """The opaque reference the task carries instead of a payload (None without one):
        fetch what it names yourself; duetime never reads it."""
        return self.task.payload_ref

    @property
    def parents(self) -> Parents:
        """The outcomes of the task's parents (``depends_on``; empty without any), by ref in
        its workflow or by task id: ``job.parents["extract"].result``. A parent that failed
        shows its ``error`` (a child with ``on_parent_failure: run`` runs anyway)."""
        if self._parents is None:
            self._parents = Parents([Parent.model_validate(p) for p in self._parents_data])
        return self._parents

    async def parent_result(self, key: str) -> Any:
        """A parent's result, read from the server when it travelled by reference (over 64
        KiB). ``KeyError`` for no such parent."""
        parent = self.parents[key]
        if parent.result_ref is None:
            return parent.result
        return await self._api().read_result(parent.result_ref)

    async def spawn(
        self,
        tasks: Sequence[Mapping[str, Any]],
        *,
        wait: bool = False,
        timeout: float | None = None,
        key: str | None = None,
    ) -> list[Any]:
        """Create children of this task (up to 10,000 in one call, all or nothing), each a
        ``create_task`` field dict. Returns the children (:class:`Task`); with ``wait``, waits
        until every child ended (at most ``timeout`` seconds; the task's own timeout bounds
        the handler anyway) and returns their results in order, raising
        :class:`~duetime.sdk.runs.TaskFailed` for the first that failed or was cancelled.

        Never spawned twice: each call of a handler run is numbered (or named by ``key``), and
        the same call of a later run — after a crash of this worker, or a retry — gets the
        children the first run made. While waiting the task holds its slot and its lease is
        heart-beaten, as for any running handler."""
        api = self._api()
        self._spawns += 1
        name = key if key is not None else str(self._spawns)
        children = await api.spawn_children(self.lease_id, tasks, key=name)
        if not wait:
            return list(children)
        until = None if timeout is None else asyncio.get_running_loop().time() + timeout
        while True:
            left = None if until is None else until - asyncio.get_running_loop().time()
            if left is not None and left <= 0:
                raise TimeoutError(f"children of task {self.id} still running")
            found, ended = await api.task_children(self.id, wait=min(left or 60.0, 60.0))
            if ended:
                by_id = {c.id: c for c in found}
                return [outcome(by_id[c.id]) for c in children]

    def spawn_blocking(
        self,
        tasks: Sequence[Mapping[str, Any]],
        *,
        wait: bool = False,
        timeout: float | None = None,
        key: str | None = None,
    ) -> list[Any]:
        """:meth:`spawn` from a sync handler (its thread); an async handler awaits
        :meth:`spawn` instead."""
        loop = self._loop
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:  # a sync handler's thread: no loop of its own
            running = None
        if loop is None or running is loop:
            raise RuntimeError("spawn_blocking() is for sync handlers; await job.spawn()")
        coro = self.spawn(tasks, wait=wait, timeout=timeout, key=key)
        return asyncio.run_coroutine_threadsafe(coro, loop).result()

    def _api(self) -> AsyncClient:
        if self._client is None:
            raise RuntimeError("this Job has no client: it was not leased by a duetime.Worker")
        return self._client

    def payload_as(self, kind: type[P]) -> P:
        """The payload validated as ``kind`` (a pydantic model, a dataclass, ``list[int]``...);
        a payload that does not fit raises ``pydantic.ValidationError`` (a retryable failure,
        or wrap it in :class:`NonRetryable`)."""
        from pydantic import TypeAdapter

        return TypeAdapter(kind).validate_python(self.task.payload)


@dataclass(slots=True)
class WorkerStats:
    """Running counts of what the worker did (read them at any time, e.g. after ``run``)."""

    leased: int = 0
    succeeded: int = 0
    failed: int = 0
    timed_out: int = 0
    released: int = 0
    stale_acks: int = 0
    ack_errors: int = 0
    heartbeats: int = 0
    lost_leases: int = 0
    server_errors: int = 0
    cancelled: int = 0  # handlers stopped because their task was cancelled while running


@dataclass(frozen=True, slots=True)
class _Registered:
    fn: Handler
    is_async: bool


@dataclass(eq=False, slots=True)
class _Held:
    """A lease this worker holds: running, or ended and waiting for its ack to land."""

    job: Job
    next_beat: float
    registered: _Registered | None = None
    is_async: bool = True
    runner: asyncio.Task[None] | None = None
    timer: asyncio.TimerHandle | None = None  # the task's timeout
    timed_out: bool = False
    kind: str | None = None  # "complete", "fail" or "release" (failed back at shutdown)
    ended: bool = False  # the outcome is decided (ack buffered, or dropped)
    lost: bool = False  # the server refused a heartbeat: someone else owns the task now


def _default_worker_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(2)}"


def _is_async(fn: Callable[..., Any]) -> bool:
    call = getattr(fn, "__call__", None)  # noqa: B004 - async callable objects count too
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(call)


class Worker:
    """Leases ``worker`` tasks from ``queues`` and runs their handlers, at most ``concurrency``
    at a time (see the module docs for the full behaviour).

    ``client`` is an :class:`~duetime.AsyncClient` (borrowed: the worker does not close it) or a
    server URL (the worker builds its own client with ``api_key``). ``worker_id`` names this
    worker in ``GET /v1/workers`` and in attempt histories (default ``host-pid-random``).
    ``config`` tunes leasing, heartbeats, acks and shutdown (:class:`WorkerConfig`).
    """

    def __init__(
        self,
        client: AsyncClient | str | None = None,
        queues: Sequence[str] = ("default",),
        concurrency: int = 10,
        *,
        api_key: str | None = None,
        worker_id: str | None = None,
        config: WorkerConfig | None = None,
    ) -> None:
        self._handlers: dict[str, _Registered] = {}
        self._declared: list[DeclaredSchedule] = []
        self._client: AsyncClient | None = None
        self._client_in_use: AsyncClient | None = None
        self._url: str | None = None
        self._api_key = api_key
        if client is None or isinstance(client, str):
            self._url = client  # None: $DUETIME_URL, else the default local server
        else:
            self._client = client
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread = 0
        self.queues: tuple[str, ...] = ()
        self.concurrency = 0
        self.configure(queues=queues, concurrency=concurrency)
        self.worker_id = worker_id or _default_worker_id()
        self.config = config or WorkerConfig()
        self.stats = WorkerStats()
        self._held: dict[str, _Held] = {}
        self._waiting: deque[_Held] = deque()  # prefetched: leased, waiting for a slot
        self._busy = 0  # slots taken: handlers (or their threads) still running
        self._finished: deque[float] = deque()  # loop times of the last horizon's finishes
        self._lease_size = 0.0  # bytes per lease in recent lease answers (0: none seen yet)
        self._stopping: asyncio.Event | None = None
        self._changed: asyncio.Event | None = None  # a slot freed or a lease let go
        self._hard_stop = False
        self._acks: AckBatcher | None = None
        self._pool: DaemonThreadPool | None = None

    # -- set up ------------------------------------------------------------------------------

    def handler(self, name: str) -> Callable[[F], F]:
        """Decorator: run ``fn(job)`` for tasks named ``name`` (sync or async; see the module
        docs for results and errors). Registering a name twice is a ``ValueError``."""

        def register(fn: F) -> F:
            self.add_handler(name, fn)
            return fn

        return register

    def task(
        self,
        name: str | None = None,
        *,
        queue: str | None = None,
        retry: RetryFields | None = None,
        timeout_seconds: float | None = None,
        priority: int | None = None,
        labels: Mapping[str, str] | None = None,
        concurrency_key: str | None = None,
        unique: Mapping[str, Any] | None = None,
    ) -> Callable[[Callable[..., R]], TaskHandle[R]]:
        """Decorator: register ``fn`` as the handler of tasks named ``name`` (default: the
        function's name) and return a :class:`~duetime.sdk.handles.TaskHandle` whose
        ``defer``/``defer_async`` create such tasks with these defaults (``queue``: the
        worker's first; ``retry``, ``timeout_seconds``, ``priority``, ``labels``,
        ``concurrency_key``, ``unique`` (each task's own uniqueness window, e.g.
        ``{"key_from": "payload.order", "period": "PT1H"}``): the server's unless given)."""

        def register(fn: Callable[..., R]) -> TaskHandle[R]:
            task_name: str = name or str(getattr(fn, "__name__", ""))
            self.add_handler(task_name, fn)
            defaults = {
                "queue": queue,
                "retry": None if retry is None else dict(retry),
                "timeout_seconds": timeout_seconds,
                "priority": priority,
                "labels": None if labels is None else dict(labels),
                "concurrency_key": concurrency_key,
                "unique": None if unique is None else dict(unique),
            }
            return TaskHandle(self, fn, task_name, defaults)

        return register

    @property
    def url(self) -> str | None:
        """The server URL the worker uses (None: its client's, or ``$DUETIME_URL``)."""
        return self._client.base_url if self._client is not None else self._url

    @property
    def api_key(self) -> str | None:
        """The API key the worker was given (None: its client's, or ``$DUETIME_API_KEY``)."""
        return self._api_key

    def async_client(self) -> AsyncClient | None:
        """The :class:`~duetime.AsyncClient` the worker was given, if any."""
        return self._client

    def add_handler(self, name: str, fn: Handler) -> None:
        """Register ``fn`` for tasks named ``name`` (what :meth:`handler` does)."""
        if not name:
            raise ValueError("a handler needs a task name")
        if name in self._handlers:
            raise ValueError(f"a handler for {name!r} is already registered")
        self._handlers[name] = _Registered(fn, _is_async(fn))

    def schedule(
        self,
        cron: str | None = None,
        *,
        key: str,
        name: str | None = None,
        every: str | None = None,
        rrule: str | None = None,
        tz: str | None = None,
        queue: str | None = None,
        payload: Any = None,
        task: TemplateFields | None = None,
        **settings: Unpack[ScheduleSettings],
    ) -> None:
        """Declare a recurring schedule, applied when the worker starts: its occurrences are
        tasks named ``name`` (default: ``key``) on ``queue`` (default: the worker's first) for
        a worker. Declared by ``key`` (:meth:`~duetime.AsyncClient.ensure_schedule`), so every
        start of every copy of the worker leaves exactly one schedule, matching this call.
        ``task`` adds template fields (``retry``, ``timeout_seconds``, ``labels``...);
        ``settings`` are the other schedule fields (``overlap``, ``catchup``, ``jitter_seconds``).

        ::

            worker.schedule("0 2 * * *", key="nightly-report", name="send-report",
                            tz="America/New_York")
        """
        if self._loop is not None:
            raise RuntimeError("schedule() must be called before run()")
        if any(d.key == key for d in self._declared):
            raise ValueError(f"schedule {key!r} is declared twice")
        self._declared.append(
            declaration(
                key,
                name=name or key,
                queue=queue,
                cron=cron,
                every=every,
                rrule=rrule,
                tz=tz,
                payload=payload,
                task=task,
                settings=settings,
            )
        )

    @property
    def handler_names(self) -> list[str]:
        """The task names this worker leases, sorted."""
        return sorted(self._handlers)

    def configure(
        self,
        *,
        url: str | None = None,
        api_key: str | None = None,
        queues: Sequence[str] | None = None,
        concurrency: int | None = None,
        worker_id: str | None = None,
    ) -> None:
        """Change settings before :meth:`run` (``duetime worker`` applies its flags this way).
        A new ``url`` or ``api_key`` makes the worker build its own client, replacing one it was
        given."""
        if self._loop is not None:
            raise RuntimeError("configure() must be called before run()")
        if url is not None or api_key is not None:
            if url is None and self._client is not None:
                url = self._client.base_url
            self._url = url or self._url
            self._api_key = api_key if api_key is not None else self._api_key
            self._client = None
        if queues is not None:
            if isinstance(queues, str) or not queues or not all(queues):
                raise ValueError("queues must be a non-empty list of queue names")
            self.queues = tuple(queues)
        if concurrency is not None:
            if concurrency < 1:
                raise ValueError("concurrency must be >= 1")
            self.concurrency = concurrency
        if worker_id is not None:
            self.worker_id = worker_id

    # -- running -----------------------------------------------------------------------------

    def run_sync(
        self,
        *,
        until_empty: bool = False,
        loop_factory: Callable[[], asyncio.AbstractEventLoop] | None = None,
    ) -> WorkerStats:
        """Blocking :meth:`run` in a new event loop (made by ``loop_factory``, e.g.
        ``uvloop.new_event_loop``); SIGTERM/SIGINT stop it gracefully when called from the main
        thread (a second signal skips the grace period)."""
        main = threading.current_thread() is threading.main_thread()
        with asyncio.Runner(loop_factory=loop_factory) as runner:
            return runner.run(self.run(until_empty=until_empty, handle_signals=main))

    async def run(self, *, until_empty: bool = False, handle_signals: bool = False) -> WorkerStats:
        """Lease and run tasks until :meth:`stop` — or, with ``until_empty``, until no task of
        the queues is due and nothing is in flight (drain and exit, for tests and batch jobs).
        Then shut down as the module docs say and return the stats.

        A Worker runs once. Raises ``ValueError`` with no handlers registered, and the API's
        error when the server refuses the worker for good (``ApiUnauthorized``,
        ``ApiValidationError``), after failing back what it held.
        """
        if not self._handlers:
            raise ValueError("register at least one handler before run()")
        if len(self._handlers) > MAX_HANDLERS:
            raise ValueError(f"a worker leases at most {MAX_HANDLERS} task names; split it")
        if self._loop is not None:
            raise RuntimeError("this Worker is already running (or has run)")
        quiet_http_clients()  # httpx logs one INFO line per request: thousands a second here
        loop = self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._stopping, self._changed = asyncio.Event(), asyncio.Event()
        client, owned = self._open_client()
        self._client_in_use = client  # jobs spawn children and read parents' results with it
        if any(not h.is_async for h in self._handlers.values()):
            self._pool = DaemonThreadPool(self.concurrency, name=f"duetime-{self.worker_id}")
        cfg = self.config
        self._acks = AckBatcher(
            client,
            self._ack_done,
            flush_seconds=cfg.ack_flush_seconds,
            batch_size=cfg.ack_batch_size,
            backoff_seconds=cfg.backoff_seconds,
            max_backoff_seconds=cfg.max_backoff_seconds,
        )
        signals = (signal.SIGTERM, signal.SIGINT) if handle_signals else ()
        for sig in signals:
            loop.add_signal_handler(sig, self._on_signal, sig)
        flusher = asyncio.create_task(self._acks.run(), name="duetime-worker-acks")
        beats = asyncio.create_task(self._heartbeat_loop(client), name="duetime-worker-beats")
        log.info(
            "worker %s leasing %s from %s (concurrency %d)",
            self.worker_id,
            ", ".join(self.handler_names),
            ", ".join(self.queues),
            self.concurrency,
        )
        try:
            await declare_all(
                client,
                self._declared,
                self._stopping,
                default_queue=self.queues[0],
                backoff_seconds=cfg.backoff_seconds,
                max_backoff_seconds=cfg.max_backoff_seconds,
            )
            await self._lease_loop(client, until_empty)
        finally:
            self._stopping.set()
            try:
                await self._shut_down()
            finally:
                for task in (flusher, beats):
                    task.cancel()
                await asyncio.gather(flusher, beats, return_exceptions=True)
                for sig in signals:
                    loop.remove_signal_handler(sig)
                if self._pool is not None:
                    self._pool.shutdown()
                if owned:
                    await client.aclose()
        log.info("worker %s stopped: %s", self.worker_id, self.stats)
        return self.stats

    def stop(self, *, graceful: bool = True) -> None:
        """Stop leasing and shut down (from any thread). ``graceful=False``, or a second call,
        skips the grace period: running handlers are failed back at once."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        if threading.get_ident() == self._loop_thread:
            self._request_stop(graceful)
        else:
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nothing to stop
                loop.call_soon_threadsafe(self._request_stop, graceful)

    def _request_stop(self, graceful: bool) -> None:
        assert self._stopping is not None and self._changed is not None
        if self._stopping.is_set() or not graceful:
            self._hard_stop = True
        self._stopping.set()
        self._changed.set()

    def _on_signal(self, sig: signal.Signals) -> None:
        assert self._stopping is not None
        hard = self._stopping.is_set()
        log.warning(
            "%s: %s", sig.name, "stopping now" if hard else "finishing running tasks, then stopping"
        )
        self._request_stop(graceful=not hard)

    def _open_client(self) -> tuple[AsyncClient, bool]:
        if self._client is not None:
            return self._client, False
        from duetime.sdk.client import AsyncClient

        client = AsyncClient(
            self._url,
            self._api_key,
            timeout=self.config.request_timeout_seconds,
            retries=0,  # the lease and ack loops back off from outages themselves
        )
        return client, True

    # -- leasing -----------------------------------------------------------------------------

    async def _lease_loop(self, client: AsyncClient, until_empty: bool) -> None:
        assert self._stopping is not None and self._changed is not None
        cfg, queues, names = self.config, self.queues, self.handler_names
        turn = empty_streak = 0
        delay = cfg.backoff_seconds
        while not self._stopping.is_set():
            prefetch = self._prefetch()
            window = self.concurrency + prefetch
            # While more than half the prefetch still waits, leasing again would only fetch a
            # few tasks per call: wait for room for a fuller batch (the rest covers the trip).
            low_water = prefetch // 2
            if (self._busy + len(self._waiting) >= window or len(self._waiting) > low_water) or (
                until_empty and empty_streak >= len(queues) and self._held
            ):
                self._changed.clear()
                await self._changed.wait()  # a slot freed, a lease let go, or a stop
                empty_streak = 0
                continue
            if until_empty and empty_streak >= len(queues):
                return  # every queue came back empty with nothing in flight
            queue = queues[turn % len(queues)]
            turn += 1
            if until_empty or (len(queues) > 1 and empty_streak < len(queues)):
                wait = 0.0  # sweep every queue before long-polling one of them
            elif len(queues) > 1:
                wait = min(cfg.wait_seconds, 1.0)  # the other queues are polled again soon
            else:
                wait = cfg.wait_seconds
            want = min(window - self._busy - len(self._waiting), self._lease_batch())
            try:
                leases = await self._lease(client, queue, want, wait, names)
            except (ApiUnavailable, TransportError, ApiNotFound) as exc:
                self.stats.server_errors += 1
                log.warning("lease from %s failed (%s); retrying in %.1fs", queue, exc, delay)
                await self._sleep(getattr(exc, "retry_after", None) or delay)
                delay = min(delay * 2, cfg.max_backoff_seconds)
                continue
            except (ApiUnauthorized, ApiValidationError):
                raise
            except ApiError as exc:
                self.stats.server_errors += 1
                log.error("lease from %s refused (%s); retrying in %.1fs", queue, exc, delay)
                await self._sleep(delay)
                delay = min(delay * 2, cfg.max_backoff_seconds)
                continue
            delay = cfg.backoff_seconds
            empty_streak = 0 if leases else empty_streak + 1
            for lease in leases:
                self._accept(lease)

    def _prefetch(self) -> int:
        """How many leases may wait for a slot now (:meth:`WorkerConfig.prefetch_for`); the
        default one also no more than fit in ``PREFETCH_BYTES_FACTOR * max_lease_bytes`` at the
        size per lease of recent answers (at least ``concurrency``)."""
        cfg = self.config
        prefetch = cfg.prefetch_for(self.concurrency, self._finished_recently())
        if cfg.prefetch is None and self._lease_size > 0:
            fits = int(PREFETCH_BYTES_FACTOR * cfg.max_lease_bytes // self._lease_size)
            prefetch = min(prefetch, max(self.concurrency, fits))
        return prefetch

    def _lease_batch(self) -> int:
        """The most tasks one lease call asks for: ``max_lease_batch``, and no more than fit in
        ``max_lease_bytes`` at the size per lease of recent answers."""
        cfg = self.config
        if self._lease_size <= 0:
            return cfg.max_lease_batch
        return max(1, min(cfg.max_lease_batch, int(cfg.max_lease_bytes // self._lease_size)))

    def _lease_sized(self, body_bytes: int, leases: int) -> None:
        """A lease answer of ``body_bytes`` brought ``leases`` leases: follow their size (the
        last answers count most, so a change of payloads shows within a few calls)."""
        if leases:
            size = body_bytes / leases
            self._lease_size = size if self._lease_size <= 0 else (self._lease_size + size) / 2

    async def _lease(
        self, client: AsyncClient, queue: str, want: int, wait: float, names: list[str]
    ) -> list[dict[str, Any]]:
        assert self._stopping is not None
        call = client._lease_raw(
            queue,
            max_tasks=want,
            lease_seconds=self.config.lease_seconds,
            wait_seconds=wait,
            worker_id=self.worker_id,
            names=names,
            sizes=self._lease_sized,
        )
        if wait <= 0:
            return await call
        # A long poll must not hold up a stop: race it with the stop request. A lease the server
        # grants at the very instant of cancelling is not lost: it expires and is retried.
        poll = asyncio.ensure_future(call)
        stopped = asyncio.ensure_future(self._stopping.wait())
        try:
            await asyncio.wait({poll, stopped}, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:
            poll.cancel()
            raise
        finally:
            stopped.cancel()
        if not poll.done():
            poll.cancel()
            await asyncio.wait({poll})  # it may still have finished: then use its leases
        return [] if poll.cancelled() else poll.result()

    async def _sleep(self, seconds: float) -> None:
        assert self._stopping is not None
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds * random.uniform(0.8, 1.2)):
                await self._stopping.wait()

    # -- running handlers --------------------------------------------------------------------

    def _accept(self, lease: dict[str, Any]) -> None:
        """Take one lease (as the server sent it): start it in a free slot, or let it wait."""
        loop = self._loop
        assert loop is not None
        self.stats.leased += 1
        job = Job(
            lease["task"],
            lease["attempt"],
            lease["lease_id"],
            self.worker_id,
            lease.get("traceparent"),
            parents=lease.get("parents"),
            client=self._client_in_use,
        )
        if lease.get("payload_url") and self._client_in_use is not None:
            job._held = HeldPayload(lease["payload_url"], self._client_in_use)
        job._loop = loop
        held = _Held(job, loop.time() + self.config.heartbeat_interval)
        self._held[job.lease_id] = held
        registered = self._handlers.get(job.name or "")
        if registered is None:
            self._fail(held, f"no handler for task name {job.name!r}", retryable=False)
            return
        held.registered = registered
        held.is_async = registered.is_async
        if self._busy < self.concurrency and not self._waiting:
            self._begin(held)
        else:
            self._waiting.append(held)

    def _begin(self, held: _Held) -> None:
        loop = self._loop
        assert loop is not None and held.registered is not None
        self._busy += 1
        held.runner = loop.create_task(self._run(held, held.registered))
        timeout = held.job.timeout_seconds
        if timeout:
            # One timer handle per task: far cheaper than an asyncio.timeout() scope.
            held.timer = loop.call_later(timeout, self._expire, held)

    def _expire(self, held: _Held) -> None:
        if held.ended or held.runner is None or held.runner.done():
            return
        held.timed_out = True
        held.runner.cancel()  # a sync handler's thread runs on; only the wait for it ends

    async def _run(self, held: _Held, registered: _Registered) -> None:
        job = held.job
        future: asyncio.Future[Any] | None = None
        try:
            if registered.is_async:
                result = await registered.fn(job)
            else:
                assert self._pool is not None and self._loop is not None
                future = self._pool.submit(self._loop, registered.fn, job)
                result = await asyncio.shield(future)
        except asyncio.CancelledError:
            if not held.timed_out:
                if held.ended or held.lost:
                    return  # failed back at shutdown, or the lease was lost: we cancelled it
                raise  # cancelled by the loop itself
            self._timed_out(held)
            asyncio.current_task().uncancel()  # type: ignore[union-attr]
        except NonRetryable as exc:
            self._fail(held, _describe(exc, self.config.max_error_chars), retryable=False, exc=exc)
        except Retry as exc:  # the handler asks for its next attempt at a time of its choosing
            self._fail(held, exc.reason, retryable=True, retry_after_seconds=exc.after)
        except Exception as exc:
            if held.timed_out:  # e.g. the handler turned our cancellation into another error
                self._timed_out(held)
            else:
                log.warning("task %s (%s) failed", job.id, job.name, exc_info=True)
                error = _describe(exc, self.config.max_error_chars)
                self._fail(held, error, retryable=True, exc=exc)
        else:
            if held.timed_out:  # the handler swallowed the cancellation and returned
                self._timed_out(held)
            else:
                self._complete(held, result)
        finally:
            if held.timer is not None:
                held.timer.cancel()
            if future is not None and not future.done():
                future.add_done_callback(lambda _: self._free_slot())  # its thread still runs
            else:
                self._free_slot()

    def _timed_out(self, held: _Held) -> None:
        if not (held.ended or held.lost):
            self.stats.timed_out += 1
            self._fail(
                held,
                f"timed out after {held.job.timeout_seconds or 0:g}s",
                retryable=True,
                timed_out=True,
            )

    def _finished_recently(self) -> int:
        """Tasks the handlers finish in :data:`PREFETCH_HORIZON_SECONDS` at their recent pace
        (:func:`recent_pace`)."""
        finished = self._finished
        if not finished:
            return 0
        assert self._loop is not None
        return recent_pace(finished, self._loop.time())

    def _free_slot(self) -> None:
        assert self._changed is not None and self._stopping is not None and self._loop is not None
        self._busy -= 1
        if self.config.prefetch is None:
            self._finished.append(self._loop.time())
        self._start_waiting()
        self._changed.set()

    def _start_waiting(self) -> None:
        """Start prefetched leases in the free slots (at a stop only the last attempts are
        left waiting: see :meth:`_shut_down`)."""
        while self._waiting and self._busy < self.concurrency:
            held = self._waiting.popleft()
            if not (held.ended or held.lost):
                self._begin(held)

    def _complete(self, held: _Held, result: Any) -> None:
        if held.ended or held.lost:
            return
        try:
            encoded = encode_result(result)
        except TypeError as exc:
            error = f"result of handler is not JSON: {exc}"
            self._fail(held, error[: self.config.max_error_chars], retryable=False)
            return
        held.ended, held.kind = True, "complete"
        assert self._acks is not None
        self._acks.complete(held.job.lease_id, encoded, held.job.logs)

    def _fail(
        self,
        held: _Held,
        error: str,
        *,
        retryable: bool,
        timed_out: bool = False,
        retry_after_seconds: float | None = None,
        exc: BaseException | None = None,
    ) -> None:
        """Fail the lease with ``error``; ``exc``, the handler's exception, adds its traceback
        to the attempt's logs (:func:`logs_with_traceback`)."""
        if held.ended or held.lost:
            return
        held.ended = True
        held.kind = "release" if error == SHUTDOWN_ERROR else "fail"
        assert self._acks is not None
        self._acks.fail(
            held.job.lease_id,
            error,
            retryable=retryable,
            retry_after_seconds=retry_after_seconds,
            timed_out=timed_out,
            logs=held.job.logs if exc is None else logs_with_traceback(held.job.logs, exc),
        )

    def _ack_done(self, lease_id: str, outcome: AckOutcome) -> None:
        """The ack of ``lease_id`` landed (or was given up on): let go of the lease."""
        assert self._changed is not None
        held = self._held.pop(lease_id, None)
        if outcome == "failed_instead":  # the server refused the result; it failed the task
            self.stats.failed += 1
        elif outcome == "ok" and held is not None:
            if held.kind == "complete":
                self.stats.succeeded += 1
            elif held.kind == "release":
                self.stats.released += 1
            else:
                self.stats.failed += 1
        elif outcome == "stale":
            self.stats.stale_acks += 1
            log.warning("ack of lease %s refused: the lease is no longer current", lease_id)
        elif outcome == "error":
            self.stats.ack_errors += 1
        self._changed.set()

    # -- heartbeats --------------------------------------------------------------------------

    async def _heartbeat_loop(self, client: AsyncClient) -> None:
        """Extend every held lease each ``heartbeat_interval``; only leases held that long are
        ever beaten, so short tasks cost no heartbeat at all."""
        loop = self._loop
        assert loop is not None
        interval = self.config.heartbeat_interval
        while True:
            now = loop.time()
            due = [h for h in self._held.values() if h.next_beat <= now]
            if due:
                await asyncio.gather(*(self._beat(client, h) for h in due))
            now = loop.time()
            next_at = min((h.next_beat for h in self._held.values()), default=now + interval)
            await asyncio.sleep(max(0.0, min(next_at, now + interval) - now))

    async def _beat(self, client: AsyncClient, held: _Held) -> None:
        loop = self._loop
        assert loop is not None and self._changed is not None
        interval = self.config.heartbeat_interval
        lease_id = held.job.lease_id
        try:
            extension = await client.heartbeat(lease_id, self.config.lease_seconds)
        except (ApiConflict, ApiNotFound) as exc:
            if self._held.get(lease_id) is not held:
                return  # acked meanwhile: nothing was lost
            del self._held[lease_id]
            held.lost = True
            self.stats.lost_leases += 1
            log.warning("task %s lost its lease (%s); dropping its work", held.job.id, exc)
            if held.is_async and held.runner is not None:
                held.runner.cancel()  # someone else may run it now; a thread cannot be stopped
            self._changed.set()
        except Exception as exc:  # an outage, or an answer we cannot read: try again soon
            self.stats.server_errors += 1
            held.next_beat = loop.time() + min(interval, 1.0)
            log.warning("heartbeat of task %s failed (%s); retrying", held.job.id, exc)
        else:
            self.stats.heartbeats += 1
            held.next_beat = loop.time() + interval
            if extension.cancel_requested:
                self._cancelled(held)

    def _cancelled(self, held: _Held) -> None:
        """The task was cancelled while its handler runs: fail the lease for good (the task
        ends ``cancelled``) and cancel an async handler; a sync one cannot be stopped, so its
        thread runs on and its result is dropped."""
        if held.ended or held.lost:
            return
        log.info("task %s was cancelled; stopping its handler", held.job.id)
        self.stats.cancelled += 1
        self._fail(held, "cancelled while running", retryable=False)
        if held.is_async and held.runner is not None:
            held.runner.cancel()

    # -- stopping ----------------------------------------------------------------------------

    async def _shut_down(self) -> None:
        """Grace period, then fail back what still runs, then flush every ack."""
        loop, changed, acks = self._loop, self._changed, self._acks
        assert loop is not None and changed is not None and acks is not None
        deadline = loop.time() + self.config.shutdown_grace_seconds
        # Prefetched leases that never started are handed back (``/v1/leases/release``): the
        # tasks wait for another worker and their attempts are not spent.
        released = [h for h in self._waiting if not (h.ended or h.lost)]
        self._waiting = deque()
        if released:
            log.info("releasing %d prefetched tasks that had not started", len(released))
        for held in released:
            held.ended, held.kind = True, "release"
            acks.release(held.job.lease_id)
        if not self._hard_stop:
            self._start_waiting()
        while not self._hard_stop and any(not h.ended for h in self._held.values()):
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            changed.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(remaining):
                    await changed.wait()
        running = [h for h in self._held.values() if not h.ended]
        if running:
            log.warning("failing back %d running tasks as retryable", len(running))
        for held in running:
            self._fail(held, SHUTDOWN_ERROR, retryable=True)
            if held.runner is not None:
                held.runner.cancel()  # a sync handler's thread runs on; its result is dropped
        await acks.close(self.config.final_flush_seconds)
        runners = [h.runner for h in running if h.runner is not None]
        if runners:
            await asyncio.wait(runners, timeout=1.0)


def traceback_text(exc: BaseException) -> str:
    """``exc``'s traceback as Python prints it (chained exceptions included) from the handler's
    frame on (the worker's own frames that called it are left out), at most
    :data:`TRACEBACK_LIMIT_BYTES` of UTF-8: the innermost frames are kept, after the
    ``Traceback (most recent call last):`` line that marks where it starts."""
    found = traceback.TracebackException.from_exception(exc)
    frames = list(found.stack)
    skip = 0
    while skip < len(frames) - 1 and frames[skip].filename.startswith(_SDK_DIR):
        skip += 1
    found.stack = traceback.StackSummary.from_list(frames[skip:])
    text = "".join(found.format()).rstrip("\n")
    raw = text.encode("utf-8", errors="replace")
    if len(raw) <= TRACEBACK_LIMIT_BYTES:
        return text
    head = f"{TRACEBACK_HEAD}\n  ... (earlier lines cut)\n"
    tail = raw[len(raw) - TRACEBACK_LIMIT_BYTES + len(head.encode()) :]
    tail = tail[tail.find(b"\n") + 1 :]  # from a whole line
    return head + tail.decode("utf-8", errors="ignore")


def logs_with_traceback(logs: str | None, exc: BaseException) -> str:
    """The handler's logs, then the traceback of ``exc`` (:func:`traceback_text`) on the
    lines after them; the logs are cut first, so that both fit the 64 KiB the server keeps."""
    trace = traceback_text(exc)
    if not logs:
        return trace
    room = LOGS_LIMIT_BYTES - len(trace.encode("utf-8", errors="replace")) - 1
    raw = logs.encode("utf-8", errors="replace")
    if len(raw) > room:
        logs = raw[:room].decode("utf-8", errors="ignore")
    return f"{logs}\n{trace}"


def _describe(exc: BaseException, limit: int) -> str:
    """``"TypeName: message"``, cut to ``limit`` characters."""
    text = str(exc).strip()
    described = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return described[:limit]
