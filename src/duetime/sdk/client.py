"""The duetime API client: :class:`AsyncClient` (async first) and :class:`Client` (a thin sync
facade over it, generated rather than written twice).

::

    async with AsyncClient("http://127.0.0.1:8080", api_key="dt_...") as client:
        task = await client.create_task(target=http_target("https://example.com/hook"),
                                        payload={"report": 42}, delay_seconds=30)

    with Client("http://127.0.0.1:8080", api_key="dt_...") as client:
        for task in client.iter_tasks(status="failed"):
            client.retry_task(task.id)

Every call raises a typed error from :mod:`duetime.sdk.errors` on a non-2xx answer, and
:class:`~duetime.sdk.errors.TransportError` when the server cannot be reached.

Adding calls (schedules, queues, leases): write them as ``async`` methods on a subclass of
:class:`duetime.sdk._http._Api` (using its ``_request``), add that class to
:class:`AsyncClient`'s bases, and add a one-line ``name = _blocking(AsyncClient.name)`` to
:class:`Client` for typed sync access (without it the call still works on :class:`Client`,
untyped, through ``__getattr__``).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import threading
import weakref
from collections.abc import (
    AsyncIterator,
    Callable,
    Coroutine,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, Self, TypeVar, Unpack, cast

import httpx
import orjson
import pydantic

from duetime import errors
from duetime.collector import collector_paused
from duetime.sdk._http import (
    DEFAULT_RETRIES,
    DEFAULT_URL,
    UNSET,
    _Api,
    _decoded,
    _segment,
)
from duetime.sdk.bulk import BulkCalls
from duetime.sdk.credentials import CredentialCalls
from duetime.sdk.history import HistoryCalls
from duetime.sdk.http import Params
from duetime.sdk.leases import LeaseCalls
from duetime.sdk.models import (
    ApiKeyCreated,
    Attempt,
    Page,
    TargetCircuit,
    Task,
    TaskFields,
    TaskSpec,
    TaskSpecFields,
    Tenant,
    TenantAdmin,
    TenantCreated,
)
from duetime.sdk.notifications import NotificationCalls
from duetime.sdk.queues import QueueCalls
from duetime.sdk.runs import SyncTaskRun, WaitCalls
from duetime.sdk.schedules import ScheduleCalls
from duetime.sdk.workflows import Flow, SyncWorkflowRun, WorkflowCalls
from duetime.types import TaskStatus

__all__ = ["DEFAULT_URL", "AsyncClient", "Client"]

P = ParamSpec("P")
R = TypeVar("R")
Y = TypeVar("Y")


_END = object()


def _rfc3339(value: datetime, name: str) -> str:
    if value.tzinfo is None:
        raise errors.ValidationError(f"{name} must be timezone-aware", field=name)
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _spec_from(spec: TaskSpec | TaskSpecFields) -> TaskSpec:
    if isinstance(spec, TaskSpec):
        return spec
    try:
        return TaskSpec.model_validate(dict(spec))
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise errors.ValidationError(f"{where}: {first['msg']}", field=where) from exc


_SPECS = pydantic.TypeAdapter(list[TaskSpec])


class _Created(pydantic.BaseModel):
    """The answer of ``POST /v1/tasks/batch``, validated from its JSON in one pass."""

    model_config = pydantic.ConfigDict(frozen=True, extra="ignore")

    items: list[Task]


def _batch_body(specs: Iterable[TaskSpec | TaskSpecFields]) -> orjson.Fragment:
    """The body of ``POST /v1/tasks/batch``: the specs checked and written as JSON by
    pydantic-core in one pass each (per-batch work, not per-item calls; ~1.3 us a task less
    than dumping them to dicts and those to JSON); a
    malformed item is a ValidationError naming ``tasks.<index>.<field>`` and nothing is sent.
    As :meth:`TaskSpec.to_json`, None means "server default": the server reads a missing
    payload as null, so leaving out every None (nested ones too, as in ``retry``) sends the same
    request; None inside a payload is JSON null and stays."""
    items = [s if isinstance(s, TaskSpec) else dict(s) for s in specs]
    try:
        checked = _SPECS.validate_python(items)
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(["tasks", *(str(p) for p in first["loc"])])
        raise errors.ValidationError(f"{where}: {first['msg']}", field=where) from exc
    return orjson.Fragment(b'{"tasks":' + _SPECS.dump_json(checked, exclude_none=True) + b"}")


_FLOW_RULES = ("unique", "debounce", "throttle")
"""The rules whose ``Duetime-<Rule>`` header a create may answer with."""


class _TaskCalls(_Api):
    """``/v1/tasks``: create, read, list, change, cancel and replay one-time tasks."""

    async def create_task(
        self, spec: TaskSpec | None = None, /, **fields: Unpack[TaskSpecFields]
    ) -> Task:
        """Create one task from a :class:`TaskSpec` or its fields as keywords (not both).

        With an ``idempotency_key`` already used by this tenant, nothing is created and the
        existing task is returned; the result's ``created`` tells which happened. So does a
        uniqueness window or a debounce (its queue's, or the spec's ``unique``), and ``flow``
        tells which rule answered (``{"unique": "existing"}``). Raises ``ValidationError``
        (locally for a malformed spec, or from the server), ``Unauthorized``, and
        :class:`duetime.errors.UniqueHeld` (a ``Conflict``) when a window holds the key but its
        task has left the server's hot store.
        """
        if spec is not None and fields:
            raise TypeError("create_task() takes a TaskSpec or keyword fields, not both")
        response = await self._send("POST", "/v1/tasks", body=_spec_from(spec or fields).to_json())
        data = _decoded(response)
        if data.get("retired") is True:
            until = data.get("unique_until")
            raise errors.UniqueHeld(
                f"a uniqueness window holds the key until {until}: its task {data.get('id')} "
                "has left the server's hot store",
                str(data.get("id")),
                until,
            )
        data["created"] = response.status_code == 201
        flow = {
            rule: response.headers[f"duetime-{rule}"]
            for rule in _FLOW_RULES
            if f"duetime-{rule}" in response.headers
        }
        if flow:
            data["flow"] = flow
        return Task.model_validate(data)

    async def create_tasks(self, specs: Iterable[TaskSpec | TaskSpecFields]) -> list[Task]:
        """Create up to 1,000 tasks in one call, all or nothing; results in input order. Each
        item is a :class:`TaskSpec` or a dict of its fields (:class:`TaskSpecFields`, checked by
        type checkers; a dict built at run time: ``TaskSpec.model_validate(d)``)."""
        with collector_paused():
            body = _batch_body(specs)
        response = await self._send("POST", "/v1/tasks/batch", body=body)
        with collector_paused():
            return _Created.model_validate_json(response.content).items

    async def get_task(self, task_id: str) -> Task:
        """One task. Raises ``NotFound``."""
        return Task.model_validate(await self._request("GET", f"/v1/tasks/{_segment(task_id)}"))

    async def list_tasks(
        self,
        *,
        status: TaskStatus | str | Iterable[TaskStatus | str] | None = None,
        queue: str | None = None,
        name: str | None = None,
        schedule_id: str | None = None,
        labels: Mapping[str, str] | None = None,
        run_after: datetime | None = None,
        run_before: datetime | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        id_prefix: str | None = None,
    ) -> Page[Task]:
        """One page of the tenant's tasks, newest first, matching every filter given.

        ``status`` is one status or several (any of them matches); ``labels`` must all match;
        ``run_after`` (inclusive) and ``run_before`` (exclusive) bound ``run_at``; ``id_prefix``
        keeps the ids that start with it (at least 4 hex digits; dashes where ids have them);
        ``limit`` is at most 1000. Pass the returned ``next_cursor`` as ``cursor`` for the next
        page, or use :meth:`iter_tasks`.
        """
        params: Params = []
        if status is not None:
            statuses = [status] if isinstance(status, str) else list(status)
            params += [("status", str(s)) for s in statuses]
        optional = (("queue", queue), ("name", name), ("schedule_id", schedule_id))
        for key, value in (*optional, ("id_prefix", id_prefix)):
            if value is not None:
                params.append((key, value))
        params += [("label", f"{k}:{v}") for k, v in (labels or {}).items()]
        if run_after is not None:
            params.append(("run_after", _rfc3339(run_after, "run_after")))
        if run_before is not None:
            params.append(("run_before", _rfc3339(run_before, "run_before")))
        if limit is not None:
            params.append(("limit", str(limit)))
        if cursor is not None:
            params.append(("cursor", cursor))
        data = await self._request("GET", "/v1/tasks", params=params)
        return Page[Task].model_validate(data)

    async def iter_tasks(
        self,
        *,
        status: TaskStatus | str | Iterable[TaskStatus | str] | None = None,
        queue: str | None = None,
        name: str | None = None,
        schedule_id: str | None = None,
        labels: Mapping[str, str] | None = None,
        run_after: datetime | None = None,
        run_before: datetime | None = None,
        page_size: int | None = None,
        id_prefix: str | None = None,
    ) -> AsyncIterator[Task]:
        """Every matching task, newest first, following cursors page by page (``page_size``
        tasks per request). Filters as in :meth:`list_tasks`."""
        if status is not None and not isinstance(status, str):
            status = list(status)  # an iterator would be used up by the first page
        cursor: str | None = None
        while True:
            page = await self.list_tasks(
                status=status,
                queue=queue,
                name=name,
                schedule_id=schedule_id,
                labels=labels,
                run_after=run_after,
                run_before=run_before,
                limit=page_size,
                cursor=cursor,
                id_prefix=id_prefix,
            )
            for task in page.items:
                yield task
            if not page.next_cursor or not page.items:
                return
            cursor = page.next_cursor

    async def update_task(
        self,
        task_id: str,
        *,
        run_at: datetime | None = None,
        payload: Any = UNSET,
        priority: int | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> Task:
        """Change a waiting task (``scheduled``, ``blocked``, ``ready`` or ``retrying``); only
        the arguments given are changed (``payload=None`` sets JSON ``null``). Raises
        ``NotFound``, ``Conflict`` in any other status."""
        body: dict[str, Any] = {}
        if run_at is not None:
            body["run_at"] = _rfc3339(run_at, "run_at")
        if payload is not UNSET:
            body["payload"] = payload
        if priority is not None:
            body["priority"] = priority
        if labels is not None:
            body["labels"] = dict(labels)
        data = await self._request("PATCH", f"/v1/tasks/{_segment(task_id)}", body=body)
        return Task.model_validate(data)

    async def cancel_task(self, task_id: str) -> Task:
        """Cancel a task that has not finished; a running one ends ``cancelled`` when its attempt
        does and is not retried. Raises ``NotFound``, ``Conflict`` on a finished task."""
        data = await self._request("POST", f"/v1/tasks/{_segment(task_id)}/cancel")
        return Task.model_validate(data)

    async def retry_task(self, task_id: str) -> Task:
        """Replay a ``failed`` or ``cancelled`` task as a new attempt series, due now.
        Raises ``NotFound``, ``Conflict`` in any other status."""
        data = await self._request("POST", f"/v1/tasks/{_segment(task_id)}/retry")
        return Task.model_validate(data)

    async def list_attempts(self, task_id: str) -> Page[Attempt]:
        """Every attempt of the task, by number, in one page. Raises ``NotFound``."""
        data = await self._request("GET", f"/v1/tasks/{_segment(task_id)}/attempts")
        return Page[Attempt].model_validate(data)


class _TenantCalls(_Api):
    """``/v1/tenant`` (the caller's own tenant), admin calls, and health."""

    async def get_tenant(self) -> Tenant:
        """The calling tenant with its live signing secrets."""
        return Tenant.model_validate(await self._request("GET", "/v1/tenant"))

    async def rotate_signing_secret(self, overlap_seconds: float | None = None) -> Tenant:
        """Add a new ``whsec_`` secret; older secrets expire after ``overlap_seconds`` (server
        default 86400), during which deliveries carry one signature per live secret. Returns the
        tenant with its live secrets, newest last."""
        body = {} if overlap_seconds is None else {"overlap_seconds": overlap_seconds}
        data = await self._request("POST", "/v1/tenant/signing-secrets/rotate", body=body)
        return Tenant.model_validate(data)

    async def create_tenant(self, name: str) -> TenantCreated:
        """Admin (``api_key`` = the admin token): a new tenant and its first API key."""
        return TenantCreated.model_validate(
            await self._request("POST", "/v1/admin/tenants", body={"name": name})
        )

    async def create_api_key(self, tenant_id: str) -> ApiKeyCreated:
        """Admin: a new API key for ``tenant_id``. Raises ``NotFound``."""
        path = f"/v1/admin/tenants/{_segment(tenant_id)}/keys"
        return ApiKeyCreated.model_validate(await self._request("POST", path, body={}))

    async def delete_api_key(self, key_id: str) -> None:
        """Admin: revoke a key at once. Raises ``NotFound`` for an unknown key."""
        await self._request("DELETE", f"/v1/admin/keys/{_segment(key_id)}")

    async def list_tenants(self) -> Page[TenantAdmin]:
        """Admin: every tenant, oldest first, with its quotas and usage, in one page."""
        data = await self._request("GET", "/v1/admin/tenants")
        return Page[TenantAdmin].model_validate(data)

    async def get_tenant_admin(self, tenant_id: str) -> TenantAdmin:
        """Admin: one tenant with its quotas and usage. Raises ``NotFound``."""
        data = await self._request("GET", f"/v1/admin/tenants/{_segment(tenant_id)}")
        return TenantAdmin.model_validate(data)

    async def set_tenant_quotas(
        self,
        tenant_id: str,
        *,
        max_pending_tasks: int | None = UNSET,
        max_creates_per_second: float | None = UNSET,
        max_concurrency: int | None = UNSET,
        max_schedules: int | None = UNSET,
        weight: int | None = UNSET,
    ) -> TenantAdmin:
        """Admin: change quotas; a quota given as None is removed (``weight``: back to 1), one
        not given keeps its value. Raises ``NotFound``, ``ValidationError``."""
        given = {
            "max_pending_tasks": max_pending_tasks,
            "max_creates_per_second": max_creates_per_second,
            "max_concurrency": max_concurrency,
            "max_schedules": max_schedules,
            "weight": weight,
        }
        body = {name: value for name, value in given.items() if value is not UNSET}
        path = f"/v1/admin/tenants/{_segment(tenant_id)}"
        return TenantAdmin.model_validate(await self._request("PATCH", path, body=body))

    async def delete_tenant(self, tenant_id: str) -> None:
        """Admin: delete a tenant with no work left (keys, secrets, queues go with it). Raises
        ``NotFound``; ``Conflict`` while it has tasks not ended or schedules."""
        await self._request("DELETE", f"/v1/admin/tenants/{_segment(tenant_id)}")

    async def list_targets(self) -> Page[TargetCircuit]:
        """The calling tenant's webhook origins whose circuit breaker ever opened, in one page."""
        data = await self._request("GET", "/v1/targets")
        return Page[TargetCircuit].model_validate(data)

    async def is_ready(self) -> bool:
        """Whether the server answers ``/readyz`` with success (store reachable, migrations
        current). Never raises for an unreachable or unready server."""
        try:
            await self._request("GET", "/readyz", retries=0)
        except (errors.DuetimeError, pydantic.ValidationError):
            return False
        return True


class AsyncClient(
    _TaskCalls,
    WaitCalls,
    WorkflowCalls,
    BulkCalls,
    HistoryCalls,
    _TenantCalls,
    LeaseCalls,
    QueueCalls,
    ScheduleCalls,
    NotificationCalls,
    CredentialCalls,
):
    """Async client for the duetime HTTP API.

    ``AsyncClient(base_url=None, api_key=None, *, timeout=10.0, retries=3, transport=None)``:
    ``base_url`` defaults to ``DUETIME_URL``, then ``http://127.0.0.1:8080``; ``api_key`` is a
    tenant key (or the admin token for admin calls; None in dev mode), defaulting to
    ``DUETIME_API_KEY``; ``timeout`` applies to each request; ``retries`` bounds how often a
    transient failure is tried again (see :class:`_Api`); ``transport`` replaces the network, e.g.
    ``httpx.MockTransport(handler)`` or ``httpx.ASGITransport(app)`` in tests. Use it as an
    ``async with`` block or call :meth:`aclose`.
    """


# -- the sync facade -------------------------------------------------------------------------


def _blocking(
    method: Callable[Concatenate[AsyncClient, P], Coroutine[Any, Any, R]],
) -> Callable[Concatenate[Client, P], R]:
    """A blocking method of :class:`Client` that runs ``method`` on the client's loop."""

    def call(self: Client, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return self._run(method(self._async, *args, **kwargs))

    functools.update_wrapper(call, method)
    return call


def _blocking_iter(
    method: Callable[Concatenate[AsyncClient, P], AsyncIterator[Y]],
) -> Callable[Concatenate[Client, P], Iterator[Y]]:
    """A plain iterator method of :class:`Client` driving an async iterator of AsyncClient."""

    def call(self: Client, /, *args: P.args, **kwargs: P.kwargs) -> Iterator[Y]:
        return self._iterate(method(self._async, *args, **kwargs))

    functools.update_wrapper(call, method)
    return call


def _shutdown(loop: asyncio.AbstractEventLoop, thread: threading.Thread, api: AsyncClient) -> None:
    if loop.is_closed():
        return
    if loop.is_running() and thread.is_alive():
        try:
            asyncio.run_coroutine_threadsafe(api.aclose(), loop).result(timeout=5)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=5)
    if not loop.is_running():
        loop.close()


class Client:
    """Blocking client: the same calls as :class:`AsyncClient`, same arguments and results.

    It runs an :class:`AsyncClient` on a private event loop in a daemon thread, so it works in
    plain scripts and also inside code that already runs an event loop (a notebook, an async
    test), where :func:`asyncio.run` would refuse. Use it as a ``with`` block or call
    :meth:`close`. Safe to share between threads; calls made from several threads run
    concurrently on the one connection pool.
    """

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float = 10.0,
        retries: int = DEFAULT_RETRIES,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._async = AsyncClient(
            base_url, api_key, timeout=timeout, retries=retries, transport=transport
        )
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="duetime-client", daemon=True
        )
        self._thread.start()
        self._finalizer = weakref.finalize(self, _shutdown, self._loop, self._thread, self._async)

    @property
    def base_url(self) -> str:
        return self._async.base_url

    def close(self) -> None:
        """Close the connection pool and stop the private loop; idempotent."""
        self._finalizer()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _run(self, coro: Coroutine[Any, Any, R]) -> R:
        if not self._finalizer.alive:
            coro.close()
            raise RuntimeError("the duetime Client is closed")
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError("a Client call cannot be made from its own event loop")
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return future.result()
        except BaseException:
            future.cancel()  # e.g. KeyboardInterrupt while waiting: stop the request too
            raise

    def _iterate(self, agen: AsyncIterator[Y]) -> Iterator[Y]:
        async def step() -> object:
            try:
                return await anext(agen)
            except StopAsyncIteration:
                return _END

        try:
            while True:
                item = self._run(step())
                if item is _END:
                    return
                yield cast(Y, item)
        finally:
            close = getattr(agen, "aclose", None)
            if close is not None and self._finalizer.alive:
                self._run(close())

    def __getattr__(self, name: str) -> Any:
        # Calls added to AsyncClient without a typed line below still work, untyped.
        if name.startswith("_"):
            raise AttributeError(name)
        method = getattr(self._async, name)
        func = getattr(type(self._async), name, None)
        if inspect.isasyncgenfunction(func):
            return functools.partial(_blocking_iter(func), self)
        if inspect.iscoroutinefunction(func):
            return functools.partial(_blocking(func), self)
        return method

    def submit(
        self, spec: TaskSpec | None = None, /, **fields: Unpack[TaskSpecFields]
    ) -> SyncTaskRun:
        """Create a task and return a handle whose ``result(timeout=...)`` waits for it
        (:meth:`AsyncClient.submit`)."""
        return SyncTaskRun(self._run(self._async.submit(spec, **fields)), self._run)

    def task_run(self, task_id: str) -> SyncTaskRun:
        """A handle on the task ``task_id`` (:meth:`AsyncClient.task_run`)."""
        return SyncTaskRun(self._async.task_run(task_id), self._run)

    def create_workflow(
        self,
        flow: Flow | Sequence[Mapping[str, Any]],
        *,
        name: str | None = None,
        defaults: TaskFields | None = None,
        labels: Mapping[str, str] | None = None,
        idempotency_key: str | None = None,
    ) -> SyncWorkflowRun:
        """Create a workflow and return a handle on it (:meth:`AsyncClient.create_workflow`)."""
        made = self._async.create_workflow(
            flow, name=name, defaults=defaults, labels=labels, idempotency_key=idempotency_key
        )
        return SyncWorkflowRun(self._run(made), self._run)

    def workflow_run(self, workflow_id: str) -> SyncWorkflowRun:
        """A handle on the workflow ``workflow_id`` (:meth:`AsyncClient.workflow_run`)."""
        return SyncWorkflowRun(self._async.workflow_run(workflow_id), self._run)

    wait_task = _blocking(AsyncClient.wait_task)
    task_result = _blocking(AsyncClient.task_result)
    get_workflow = _blocking(AsyncClient.get_workflow)
    wait_workflow = _blocking(AsyncClient.wait_workflow)
    list_workflows = _blocking(AsyncClient.list_workflows)
    cancel_workflow = _blocking(AsyncClient.cancel_workflow)
    replay_workflow = _blocking(AsyncClient.replay_workflow)
    task_parents = _blocking(AsyncClient.task_parents)
    task_children = _blocking(AsyncClient.task_children)
    spawn_children = _blocking(AsyncClient.spawn_children)
    read_result = _blocking(AsyncClient.read_result)
    create_task = _blocking(AsyncClient.create_task)
    create_tasks = _blocking(AsyncClient.create_tasks)
    get_task = _blocking(AsyncClient.get_task)
    list_tasks = _blocking(AsyncClient.list_tasks)
    iter_tasks = _blocking_iter(AsyncClient.iter_tasks)
    update_task = _blocking(AsyncClient.update_task)
    cancel_task = _blocking(AsyncClient.cancel_task)
    retry_task = _blocking(AsyncClient.retry_task)
    list_attempts = _blocking(AsyncClient.list_attempts)
    replay_tasks = _blocking(AsyncClient.replay_tasks)
    cancel_tasks = _blocking(AsyncClient.cancel_tasks)
    list_history = _blocking(AsyncClient.list_history)
    iter_history = _blocking_iter(AsyncClient.iter_history)
    get_tenant = _blocking(AsyncClient.get_tenant)
    rotate_signing_secret = _blocking(AsyncClient.rotate_signing_secret)
    create_tenant = _blocking(AsyncClient.create_tenant)
    create_api_key = _blocking(AsyncClient.create_api_key)
    delete_api_key = _blocking(AsyncClient.delete_api_key)
    list_tenants = _blocking(AsyncClient.list_tenants)
    get_tenant_admin = _blocking(AsyncClient.get_tenant_admin)
    set_tenant_quotas = _blocking(AsyncClient.set_tenant_quotas)
    delete_tenant = _blocking(AsyncClient.delete_tenant)
    list_targets = _blocking(AsyncClient.list_targets)
    is_ready = _blocking(AsyncClient.is_ready)
    lease_tasks = _blocking(AsyncClient.lease_tasks)
    heartbeat = _blocking(AsyncClient.heartbeat)
    complete_lease = _blocking(AsyncClient.complete_lease)
    fail_lease = _blocking(AsyncClient.fail_lease)
    complete_leases = _blocking(AsyncClient.complete_leases)
    fail_leases = _blocking(AsyncClient.fail_leases)
    release_lease = _blocking(AsyncClient.release_lease)
    release_leases = _blocking(AsyncClient.release_leases)
    list_workers = _blocking(AsyncClient.list_workers)
    list_queues = _blocking(AsyncClient.list_queues)
    get_queue = _blocking(AsyncClient.get_queue)
    put_queue = _blocking(AsyncClient.put_queue)
    create_schedule = _blocking(AsyncClient.create_schedule)
    ensure_schedule = _blocking(AsyncClient.ensure_schedule)
    get_schedule = _blocking(AsyncClient.get_schedule)
    get_schedule_by_key = _blocking(AsyncClient.get_schedule_by_key)
    list_schedules = _blocking(AsyncClient.list_schedules)
    iter_schedules = _blocking_iter(AsyncClient.iter_schedules)
    update_schedule = _blocking(AsyncClient.update_schedule)
    delete_schedule = _blocking(AsyncClient.delete_schedule)
    pause_schedule = _blocking(AsyncClient.pause_schedule)
    resume_schedule = _blocking(AsyncClient.resume_schedule)
    trigger_schedule = _blocking(AsyncClient.trigger_schedule)
    backfill_schedule = _blocking(AsyncClient.backfill_schedule)
    list_upcoming = _blocking(AsyncClient.list_upcoming)
    list_ticks = _blocking(AsyncClient.list_ticks)
    iter_ticks = _blocking_iter(AsyncClient.iter_ticks)
    list_revisions = _blocking(AsyncClient.list_revisions)
    set_notifications = _blocking(AsyncClient.set_notifications)
    get_notifications = _blocking(AsyncClient.get_notifications)
    delete_notifications = _blocking(AsyncClient.delete_notifications)
    put_credential = _blocking(AsyncClient.put_credential)
    list_credentials = _blocking(AsyncClient.list_credentials)
    get_credential = _blocking(AsyncClient.get_credential)
    delete_credential = _blocking(AsyncClient.delete_credential)
