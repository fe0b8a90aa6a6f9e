"""Producer ergonomics: task handles (``@worker.task``) and ``Retry`` from a handler.

::

    worker = duetime.Worker(queues=["reports"])

    @worker.task(queue="reports", retry={"max_attempts": 3}, timeout_seconds=60)
    async def send_report(job: duetime.Job) -> dict[str, int]:
        report = job.payload_as(Report)          # typed payloads (any pydantic-validatable type)
        if not ready(report):
            raise duetime.Retry(after=300)       # try again in five minutes
        return {"pages": 3}

    send_report.defer(Report(day="2026-12-01"), delay_seconds=30)   # from any process
    await send_report.defer_async({"day": "2026-12-01"}, idempotency_key="r-1")
    send_report.schedule("0 2 * * *", key="nightly-report", tz="America/New_York")

A handle registers the function as the worker's handler for its name (default: the function's
name) and keeps per-handler defaults (``queue``, ``retry``, ``timeout_seconds``, ``priority``,
``labels``, ``concurrency_key``, ``unique``) that every ``defer`` uses unless told otherwise.
``defer`` creates a ``worker`` task through a client: the one given, else the worker's own, else
one built from the worker's URL and key (or ``$DUETIME_URL``/``$DUETIME_API_KEY``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar, Unpack, cast

from pydantic import BaseModel

from duetime.sdk.models import DeferFields, ScheduleSettings, Task, TaskSpecFields, TemplateFields
from duetime.sdk.workflows import Flow, step

if TYPE_CHECKING:
    from collections.abc import Awaitable

    from duetime.sdk.client import AsyncClient, Client
    from duetime.sdk.runs import SyncTaskRun, TaskRun
    from duetime.sdk.sql import CreatedTask

__all__ = ["Retry", "TaskHandle"]

R = TypeVar("R")

TASK_DEFAULT_FIELDS = (
    "queue", "retry", "timeout_seconds", "priority", "labels", "concurrency_key", "unique",
)  # fmt: skip
"""Fields a handle may set for every task it defers."""


class Retry(Exception):
    """Raise from a handler to fail this attempt and ask for the next one ``after`` seconds from
    now (instead of the task's backoff). Retries still count against ``max_attempts``."""

    def __init__(self, after: float, reason: str = "retry requested") -> None:
        if not after >= 0:
            raise ValueError("Retry(after=...) needs a number of seconds >= 0")
        super().__init__(f"{reason} (in {after:g}s)")
        self.after = float(after)
        self.reason = reason


class Owner(Protocol):
    """What a handle uses of the :class:`~duetime.sdk.worker.Worker` that made it (the worker
    imports this module, so the handle names the worker by what it needs)."""

    @property
    def queues(self) -> tuple[str, ...]:
        """The worker's queues; a handle's tasks go to the first unless it names one."""

    @property
    def url(self) -> str | None:
        """The server URL, for a client the handle makes itself."""

    @property
    def api_key(self) -> str | None:
        """The API key, for a client the handle makes itself."""

    def async_client(self) -> AsyncClient | None:
        """The client the worker was given, if any."""

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
        """Declare a recurring schedule, applied when the worker starts."""


def _payload(value: Any) -> Any:
    """A payload as JSON-able data: a pydantic model is dumped in JSON mode."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    return value


class TaskHandle(Generic[R]):
    """What ``@worker.task`` returns: call it like the function, ``defer`` it as a task."""

    def __init__(
        self, worker: Owner, fn: Callable[..., R], name: str, defaults: Mapping[str, Any]
    ) -> None:
        unknown = set(defaults) - set(TASK_DEFAULT_FIELDS)
        if unknown:
            raise TypeError(f"@worker.task does not take {', '.join(sorted(unknown))}")
        self.worker = worker
        self.fn = fn
        self.name = name
        self.defaults = {k: v for k, v in defaults.items() if v is not None}
        self.__doc__ = fn.__doc__
        self.__name__ = getattr(fn, "__name__", name)
        self._client: Client | None = None
        self._lock = threading.Lock()

    def __call__(self, *args: Any, **kwargs: Any) -> R:
        return self.fn(*args, **kwargs)

    def fields(self, payload: Any = None, **overrides: Unpack[DeferFields]) -> dict[str, Any]:
        """The ``create_task`` fields of one deferral: the handle's defaults, then
        ``overrides`` (``delay_seconds``, ``run_at``, ``idempotency_key``, ...; typed by
        :class:`~duetime.sdk.models.DeferFields`)."""
        fields: dict[str, Any] = {"name": self.name, "target": {"type": "worker"}}
        fields.update(self.defaults)
        fields.setdefault("queue", self.worker.queues[0])
        fields.update({k: v for k, v in overrides.items() if v is not None})
        if payload is not None:
            fields["payload"] = _payload(payload)
        return fields

    async def defer_async(
        self,
        payload: Any = None,
        *,
        client: AsyncClient | None = None,
        **overrides: Unpack[DeferFields],
    ) -> Task:
        """Create one task for this handler (async). ``overrides`` are ``create_task`` fields."""
        fields = self.fields(payload, **overrides)
        given = client or self.worker.async_client()
        if given is not None:
            return await given.create_task(**fields)
        from duetime.sdk.client import AsyncClient

        async with AsyncClient(self.worker.url, self.worker.api_key) as own:
            return await own.create_task(**fields)

    def defer(
        self, payload: Any = None, *, client: Client | None = None, **overrides: Unpack[DeferFields]
    ) -> Task:
        """Create one task for this handler (blocking; not from the worker's event loop)."""
        return (client or self._sync_client()).create_task(**self.fields(payload, **overrides))

    def defer_in(
        self,
        conn: Any,
        payload: Any = None,
        *,
        schema: str = "duetime",
        **overrides: Unpack[DeferFields],
    ) -> CreatedTask | Awaitable[CreatedTask]:
        """Create one task for this handler inside ``conn``'s own transaction, through the SQL
        API (:func:`duetime.sdk.sql.create_task`: an asyncpg, psycopg or SQLAlchemy connection
        or session; await the result on an async one). It exists only if that transaction
        commits."""
        from duetime.sdk.sql import create_task

        fields = cast(TaskSpecFields, self.fields(payload, **overrides))
        made: CreatedTask | Awaitable[CreatedTask] = create_task(conn, schema=schema, **fields)
        return made

    def submit(
        self, payload: Any = None, *, client: Client | None = None, **overrides: Unpack[DeferFields]
    ) -> SyncTaskRun:
        """:meth:`defer`, returning a handle whose ``result(timeout=...)`` waits for the
        task's result (blocking)."""
        return (client or self._sync_client()).submit(**self.fields(payload, **overrides))

    async def submit_async(
        self,
        payload: Any = None,
        *,
        client: AsyncClient | None = None,
        **overrides: Unpack[DeferFields],
    ) -> TaskRun:
        """:meth:`defer_async`, returning a handle: ``await (await h.submit_async(p)).result()``.
        Needs a client: the one given, else the worker's."""
        given = client or self.worker.async_client()
        if given is None:
            raise RuntimeError("submit_async() needs a client (give one, or the worker one)")
        return await given.submit(**self.fields(payload, **overrides))

    def step(
        self,
        ref: str,
        payload: Any = None,
        **overrides: Unpack[DeferFields],
    ) -> Flow:
        """This handler as one node of a workflow (:func:`duetime.sdk.workflows.step`), with
        the handle's defaults (``depends_on`` names refs here):
        ``chain(fetch.step("a", 1), report.step("b"))``."""
        return step(ref, **self.fields(payload, **overrides))

    def schedule(
        self,
        cron: str | None = None,
        *,
        key: str,
        every: str | None = None,
        rrule: str | None = None,
        tz: str | None = None,
        payload: Any = None,
        task: TemplateFields | None = None,
        **settings: Unpack[ScheduleSettings],
    ) -> None:
        """Declare a recurring schedule of this handler (:meth:`Worker.schedule` with this
        handle's name, queue and task defaults, then ``task``), applied when the worker
        starts."""
        # A uniqueness window belongs to a create, not to a schedule's template.
        template: dict[str, Any] = {
            k: v for k, v in self.defaults.items() if k not in ("queue", "unique")
        }
        template.update(task or {})
        self.worker.schedule(
            cron,
            key=key,
            name=self.name,
            every=every,
            rrule=rrule,
            tz=tz,
            queue=self.defaults.get("queue"),
            payload=payload,
            task=cast(TemplateFields, template),
            **settings,
        )

    def _sync_client(self) -> Client:
        with self._lock:
            if self._client is None:
                from duetime.sdk.client import Client

                self._client = Client(self.worker.url, self.worker.api_key)
            return self._client
