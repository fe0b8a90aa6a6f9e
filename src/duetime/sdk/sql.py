"""Create tasks inside your own database transaction: the SQL API (docs/api.md "SQL API") from
Python, on the connection your application already holds.

::

    from duetime.sdk import sql

    async with pool.acquire() as conn, conn.transaction():          # asyncpg
        await conn.execute("INSERT INTO orders ...")
        made = await sql.create_task(conn, queue="emails", payload={"order": 42})

    with psycopg.connect(dsn) as conn:                               # psycopg 3, sync
        made = sql.create_task(conn, queue="emails", payload={"order": 42})

    with Session(engine) as session, session.begin():                # SQLAlchemy, sync
        made = sql.create_task(session, queue="emails", payload={"order": 42})

The task exists only if that transaction commits; a node is woken at commit. ``create_task``
takes the fields of :class:`~duetime.sdk.models.TaskSpec` (a spec or keywords, with the same
defaults; ``target`` defaults to a worker target, the only kind this path makes) and
``create_tasks`` up to 1,000 specs, all or nothing. On an async connection (asyncpg,
``psycopg.AsyncConnection``, SQLAlchemy's ``AsyncSession``/``AsyncConnection``) they return an
awaitable; on a sync one (``psycopg.Connection``, SQLAlchemy's ``Session``/``Connection``), the
result. A refusal is the driver's own error, with the SQLSTATE and field the SQL API documents.

``create_workflow`` requests a workflow (a :class:`~duetime.sdk.workflows.Flow` built with
``chain``/``group``/``chord``/``step``, or node objects, as ``client.create_workflow`` takes)
inside the transaction; after it commits, a node makes the workflow under the returned id, or
records why it would not (``workflow_request`` tells which)::

    made = await sql.create_workflow(conn, chain(step("fetch"), step("store")))
    ...                                                 # after the commit:
    state = await sql.workflow_request(conn, made.id)   # "pending", "made" or "refused"

The connection's login role must have been granted a tenant (``duetime tenant grant-sql``).
Nothing here imports a driver: each is used through the connection given (``pip install
duetime[sql]`` brings psycopg and SQLAlchemy; asyncpg needs nothing more).
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeAlias, Unpack, overload

import orjson
import pydantic

from duetime import errors
from duetime.sdk.models import TaskFields, TaskSpec, TaskSpecFields
from duetime.sdk.workflows import Flow, workflow_body

if TYPE_CHECKING:  # the drivers' types, for the overloads only: none is imported at run time
    import asyncpg
    import psycopg
    from asyncpg.pool import PoolConnectionProxy
    from sqlalchemy.engine import Connection as SAConnection
    from sqlalchemy.ext.asyncio import AsyncConnection as SAAsyncConnection
    from sqlalchemy.ext.asyncio import AsyncSession
    from sqlalchemy.orm import Session

    AsyncConn: TypeAlias = (
        asyncpg.Connection[Any]
        | PoolConnectionProxy[Any]
        | psycopg.AsyncConnection[Any]
        | AsyncSession
        | SAAsyncConnection
    )
    SyncConn: TypeAlias = psycopg.Connection[Any] | Session | SAConnection

__all__ = [
    "CreatedTask",
    "RequestedWorkflow",
    "WorkflowRequest",
    "create_task",
    "create_tasks",
    "create_workflow",
    "workflow_request",
]

DEFAULT_SCHEMA = "duetime"
_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,49}")
_JSON_FIELDS = frozenset({"payload", "retry", "labels", "target", "unique"})
_SPECS = pydantic.TypeAdapter(list[TaskSpec])


@dataclass(frozen=True, slots=True)
class CreatedTask:
    """One task as the SQL API answers a create: ``created`` is False when an
    ``idempotency_key`` met an existing task (then ``id`` is that task's)."""

    id: str
    created: bool
    status: str
    run_at: datetime


def _spec(spec: TaskSpec | None, fields: TaskSpecFields) -> TaskSpec:
    if spec is not None and fields:
        raise TypeError("create_task() takes a TaskSpec or keyword fields, not both")
    if spec is not None:
        return spec
    try:
        return TaskSpec.model_validate({"target": {"type": "worker"}, **fields})
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise errors.ValidationError(f"{where}: {first['msg']}", field=where) from exc


def _arguments(spec: TaskSpec) -> list[tuple[str, Any, str]]:
    """``create_task_v1``'s named arguments for ``spec``: (name, value, SQL type), only the
    fields set (the others take the function's defaults, the HTTP API's)."""
    data = spec.to_json()
    args: list[tuple[str, Any, str]] = []
    for name, value in data.items():
        if name in _JSON_FIELDS:
            args.append((name, orjson.dumps(value).decode(), "jsonb"))
        elif name == "run_at":
            args.append((name, spec.run_at, "timestamptz"))
        elif name == "depends_on":
            args.append((name, list(value), "text[]"))
        elif name in ("delay_seconds", "timeout_seconds"):
            args.append((name, float(value), "float8"))
        elif name == "priority":
            args.append((name, value, "int4"))
        else:
            args.append((name, value, "text"))
    return args


Placeholder = Callable[[int], str]


def _single_sql(schema: str, args: list[tuple[str, Any, str]], mark: Placeholder) -> str:
    named = ", ".join(
        f'"{name}" => CAST({mark(i)} AS {kind})' for i, (name, _, kind) in enumerate(args)
    )
    return f"SELECT id, created, status, run_at FROM {schema}.create_task_v1({named})"


def _batch_sql(schema: str, mark: Placeholder) -> str:
    call = f"{schema}.create_tasks_v1(CAST({mark(0)} AS jsonb))"
    return f"SELECT id, created, status, run_at FROM {call}"


def _batch_json(specs: Iterable[TaskSpec | TaskSpecFields]) -> str:
    items = [
        s if isinstance(s, TaskSpec) else {"target": {"type": "worker"}, **dict(s)} for s in specs
    ]
    try:
        checked = _SPECS.validate_python(items)
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(["tasks", *(str(p) for p in first["loc"])])
        raise errors.ValidationError(f"{where}: {first['msg']}", field=where) from exc
    return _SPECS.dump_json(checked, exclude_none=True).decode()


def _created(row: Sequence[Any]) -> CreatedTask:
    return CreatedTask(id=str(row[0]), created=bool(row[1]), status=str(row[2]), run_at=row[3])


class _Driver:
    """How one kind of connection runs a statement: its placeholders, whether it is async, and
    its calls for one row and all rows."""

    def __init__(self, conn: Any) -> None:
        kind = type(conn).__module__.split(".")[0]
        self.conn = conn
        self.kind = kind
        if kind == "asyncpg":
            self.is_async = True
        elif kind == "psycopg":
            self.is_async = inspect.iscoroutinefunction(type(conn).execute)
        elif kind == "sqlalchemy":
            self.is_async = type(conn).__module__.startswith("sqlalchemy.ext.asyncio")
        else:
            raise TypeError(
                f"duetime.sdk.sql needs an asyncpg connection, a psycopg 3 connection or a "
                f"SQLAlchemy session or connection, not {type(conn).__qualname__}"
            )

    def mark(self, i: int) -> str:
        if self.kind == "asyncpg":
            return f"${i + 1}"
        if self.kind == "psycopg":
            return "%s"
        return f":p{i}"

    def _params(self, values: list[Any]) -> Any:
        if self.kind == "sqlalchemy":
            return {f"p{i}": v for i, v in enumerate(values)}
        return values

    def _text(self, sql: str) -> Any:
        if self.kind != "sqlalchemy":
            return sql
        from sqlalchemy import text  # the caller's SQLAlchemy, present since it gave a session

        return text(sql)

    async def fetch_async(self, sql: str, values: list[Any]) -> list[Sequence[Any]]:
        conn = self.conn
        if self.kind == "asyncpg":
            return list(await conn.fetch(sql, *values))
        if self.kind == "psycopg":
            cursor = await conn.execute(sql, values)
            return list(await cursor.fetchall())
        result = await conn.execute(self._text(sql), self._params(values))
        return list(result.all())

    def fetch(self, sql: str, values: list[Any]) -> list[Sequence[Any]]:
        conn = self.conn
        if self.kind == "psycopg":
            return list(conn.execute(sql, values).fetchall())
        return list(conn.execute(self._text(sql), self._params(values)).all())


def _schema(schema: str) -> str:
    if not _SCHEMA_NAME.fullmatch(schema):
        raise ValueError(f"schema {schema!r} is not a duetime schema name")
    return schema


@overload
def create_task(
    conn: AsyncConn,
    spec: TaskSpec | None = None,
    /,
    *,
    schema: str = DEFAULT_SCHEMA,
    **fields: Unpack[TaskSpecFields],
) -> Awaitable[CreatedTask]: ...


@overload
def create_task(
    conn: SyncConn,
    spec: TaskSpec | None = None,
    /,
    *,
    schema: str = DEFAULT_SCHEMA,
    **fields: Unpack[TaskSpecFields],
) -> CreatedTask: ...


def create_task(
    conn: Any,
    spec: TaskSpec | None = None,
    /,
    *,
    schema: str = DEFAULT_SCHEMA,
    **fields: Unpack[TaskSpecFields],
) -> CreatedTask | Awaitable[CreatedTask]:
    """Create one task on ``conn``, inside the transaction it is in (``duetime.create_task_v1``):
    a :class:`~duetime.sdk.models.TaskSpec` or its fields as keywords; ``schema`` is the one the
    store lives in. An awaitable on an async connection, the :class:`CreatedTask` on a sync one.
    Raises :class:`~duetime.sdk.errors.ValidationError` for a malformed spec, before sending."""
    where = _schema(schema)
    args = _arguments(_spec(spec, fields))
    driver = _Driver(conn)
    sql = _single_sql(where, args, driver.mark)
    values = [value for _, value, _ in args]
    if driver.is_async:
        return _one_async(driver, sql, values)
    return _created(driver.fetch(sql, values)[0])


async def _one_async(driver: _Driver, sql: str, values: list[Any]) -> CreatedTask:
    return _created((await driver.fetch_async(sql, values))[0])


@overload
def create_tasks(
    conn: AsyncConn,
    specs: Iterable[TaskSpec | TaskSpecFields],
    /,
    *,
    schema: str = DEFAULT_SCHEMA,
) -> Awaitable[list[CreatedTask]]: ...


@overload
def create_tasks(
    conn: SyncConn,
    specs: Iterable[TaskSpec | TaskSpecFields],
    /,
    *,
    schema: str = DEFAULT_SCHEMA,
) -> list[CreatedTask]: ...


def create_tasks(
    conn: Any,
    specs: Iterable[TaskSpec | TaskSpecFields],
    /,
    *,
    schema: str = DEFAULT_SCHEMA,
) -> list[CreatedTask] | Awaitable[list[CreatedTask]]:
    """Create up to 1,000 tasks on ``conn`` all or nothing, inside its transaction
    (``duetime.create_tasks_v1``); results in input order. A repeated ``idempotency_key``
    answers the task it names, as ``POST /v1/tasks/batch`` does."""
    where = _schema(schema)
    body = _batch_json(specs)
    driver = _Driver(conn)
    sql = _batch_sql(where, driver.mark)
    if driver.is_async:
        return _many_async(driver, sql, [body])
    return [_created(row) for row in driver.fetch(sql, [body])]


async def _many_async(driver: _Driver, sql: str, values: list[Any]) -> list[CreatedTask]:
    return [_created(row) for row in await driver.fetch_async(sql, values)]


@dataclass(frozen=True, slots=True)
class RequestedWorkflow:
    """A workflow requested through the SQL API: ``id`` is the workflow's once a node made it
    (see :class:`WorkflowRequest`); ``created`` is False when an ``idempotency_key`` met an
    existing workflow or request (then ``id`` is that one's)."""

    id: str
    created: bool


@dataclass(frozen=True, slots=True)
class WorkflowRequest:
    """What became of a requested workflow: ``state`` is ``pending`` (no node has made it yet),
    ``made`` (``workflow_id`` is the workflow) or ``refused`` (``problem`` is the RFC 9457
    problem ``POST /v1/workflows`` would have answered, naming the field)."""

    id: str
    state: str
    workflow_id: str | None
    problem: dict[str, Any] | None
    requested_at: datetime
    ended_at: datetime | None


@overload
def create_workflow(
    conn: AsyncConn,
    flow: Flow | Sequence[Mapping[str, Any]],
    /,
    *,
    name: str | None = None,
    defaults: TaskFields | None = None,
    labels: Mapping[str, str] | None = None,
    idempotency_key: str | None = None,
    schema: str = DEFAULT_SCHEMA,
) -> Awaitable[RequestedWorkflow]: ...


@overload
def create_workflow(
    conn: SyncConn,
    flow: Flow | Sequence[Mapping[str, Any]],
    /,
    *,
    name: str | None = None,
    defaults: TaskFields | None = None,
    labels: Mapping[str, str] | None = None,
    idempotency_key: str | None = None,
    schema: str = DEFAULT_SCHEMA,
) -> RequestedWorkflow: ...


def create_workflow(
    conn: Any,
    flow: Flow | Sequence[Mapping[str, Any]],
    /,
    *,
    name: str | None = None,
    defaults: TaskFields | None = None,
    labels: Mapping[str, str] | None = None,
    idempotency_key: str | None = None,
    schema: str = DEFAULT_SCHEMA,
) -> RequestedWorkflow | Awaitable[RequestedWorkflow]:
    """Request the workflow ``flow`` on ``conn``, inside its transaction
    (``duetime.create_workflow_v1``), with the arguments of ``client.create_workflow``; a
    node makes it after the commit (see the module)."""
    where = _schema(schema)
    body = workflow_body(
        flow, name=name, defaults=defaults, labels=labels, idempotency_key=idempotency_key
    )
    driver = _Driver(conn)
    sql = f"SELECT id, created FROM {where}.create_workflow_v1(CAST({driver.mark(0)} AS jsonb))"
    values: list[Any] = [orjson.dumps(body).decode()]
    if driver.is_async:
        return _requested_async(driver, sql, values)
    return _requested(driver.fetch(sql, values)[0])


def _requested(row: Sequence[Any]) -> RequestedWorkflow:
    return RequestedWorkflow(id=str(row[0]), created=bool(row[1]))


async def _requested_async(driver: _Driver, sql: str, values: list[Any]) -> RequestedWorkflow:
    return _requested((await driver.fetch_async(sql, values))[0])


@overload
def workflow_request(
    conn: AsyncConn, request_id: str, /, *, schema: str = DEFAULT_SCHEMA
) -> Awaitable[WorkflowRequest]: ...


@overload
def workflow_request(
    conn: SyncConn, request_id: str, /, *, schema: str = DEFAULT_SCHEMA
) -> WorkflowRequest: ...


def workflow_request(
    conn: Any, request_id: str, /, *, schema: str = DEFAULT_SCHEMA
) -> WorkflowRequest | Awaitable[WorkflowRequest]:
    """What became of the workflow requested as ``request_id`` (``duetime.workflow_request_v1``;
    the driver's ``no_data_found`` error for no such request of the role's tenant)."""
    where = _schema(schema)
    driver = _Driver(conn)
    sql = (
        "SELECT id, state, workflow_id, problem::text, requested_at, ended_at "
        f"FROM {where}.workflow_request_v1(CAST({driver.mark(0)} AS uuid))"
    )
    if driver.is_async:
        return _request_async(driver, sql, [request_id])
    return _request(driver.fetch(sql, [request_id])[0])


def _request(row: Sequence[Any]) -> WorkflowRequest:
    return WorkflowRequest(
        id=str(row[0]),
        state=str(row[1]),
        workflow_id=None if row[2] is None else str(row[2]),
        problem=None if row[3] is None else orjson.loads(row[3]),
        requested_at=row[4],
        ended_at=row[5],
    )


async def _request_async(driver: _Driver, sql: str, values: list[Any]) -> WorkflowRequest:
    return _request((await driver.fetch_async(sql, values))[0])
