"""The ``duetime`` command.

Store commands (``serve``, ``migrate``, ``tenant create``) take ``--db``/``--data-dir`` and build
:class:`~duetime.config.Settings` with :func:`~duetime.config.load_settings`: flags, then
``DUETIME_*`` variables, then defaults. API commands (``task ...``) talk to a running server
through the SDK, at ``--url`` (``DUETIME_URL``) with ``--api-key`` (``DUETIME_API_KEY``).

Output is JSON on stdout; an error is one line on stderr and a non-zero exit (1 for a refused or
failed call, 2 for bad usage). More command groups (``schedule``, ``queue``, ``worker``,
``bench``) are separate :class:`typer.Typer` apps registered at the bottom of this module; they
can reuse :data:`UrlOption`, :data:`ApiKeyOption`, :func:`api_client`, :func:`print_json` and
:func:`errors_reported`.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import orjson
import typer

from duetime.config import Settings, load_settings
from duetime.errors import DuetimeError
from duetime.sdk.client import DEFAULT_URL

if TYPE_CHECKING:
    from duetime.sdk.client import Client

__all__ = [
    "ApiKeyOption",
    "UrlOption",
    "api_client",
    "app",
    "errors_reported",
    "main",
    "print_json",
    "task_app",
    "tenant_app",
]

app = typer.Typer(
    name="duetime",
    help="A durable, distributed task scheduler.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
task_app = typer.Typer(help="One-time tasks, through the HTTP API.", no_args_is_help=True)
tenant_app = typer.Typer(help="Tenants and their API keys.", no_args_is_help=True)

# -- shared pieces ---------------------------------------------------------------------------

DbOption = Annotated[
    str | None,
    typer.Option("--db", help="Store URL: sqlite:///path or postgresql://... [env DUETIME_DB]"),
]
DataDirOption = Annotated[
    Path | None,
    typer.Option("--data-dir", help="Where the default SQLite file lives [env DUETIME_DATA_DIR]"),
]
UrlOption = Annotated[
    str,
    typer.Option("--url", envvar="DUETIME_URL", help="The duetime server to talk to."),
]
ApiKeyOption = Annotated[
    str | None,
    typer.Option("--api-key", envvar="DUETIME_API_KEY", help="Tenant API key (none in dev mode)."),
]


def _default_client(url: str, api_key: str | None) -> Client:
    from duetime.sdk.client import Client

    return Client(url, api_key)


client_factory: Callable[[str, str | None], Client] = _default_client
"""Builds the SDK client of every API command; tests replace it to inject a transport."""


def api_client(url: str, api_key: str | None) -> Client:
    """The SDK client API commands use (see :data:`client_factory`)."""
    return client_factory(url, api_key)


def fail(message: str, code: int = 1) -> typer.Exit:
    """Print ``error: message`` as one line on stderr; returns the Exit to raise."""
    typer.echo(f"error: {' '.join(message.split())}", err=True)
    return typer.Exit(code)


@contextlib.contextmanager
def errors_reported() -> Iterator[None]:
    """Turn duetime's errors (API problems, unreachable server, bad config) into one stderr line
    and exit status 1, instead of a traceback."""
    try:
        yield
    except DuetimeError as exc:
        raise fail(str(exc)) from None


def print_json(data: Any) -> None:
    """Pretty JSON on stdout."""
    typer.echo(orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode())


def _settings(**flags: Any) -> Settings:
    with errors_reported():
        return load_settings(flags)


def _open_store_for(settings: Settings) -> Any:
    from duetime.store import store_from_url

    if not settings.db:  # the default SQLite file: make its directory on first use
        settings.data_dir.mkdir(parents=True, exist_ok=True)
    return store_from_url(settings.db_url, data_dir=settings.data_dir)


def _pairs(values: list[str] | None, sep: str, what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in values or ():
        key, found, value = item.partition(sep)
        if not found or not key.strip():
            raise fail(f"{what} {item!r} must look like KEY{sep}VALUE", 2)
        out[key.strip()] = value.strip()
    return out


def _when(value: str | None, flag: str) -> datetime | None:
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise fail(f"{flag} {value!r} is not an RFC 3339 time", 2) from None
    if parsed.tzinfo is None:
        raise fail(f"{flag} {value!r} needs an offset, e.g. 2026-12-01T15:00:00Z", 2)
    return parsed


def _json_arg(value: str, flag: str) -> Any:
    """``--flag JSON``, ``--flag @file.json`` or ``--flag -`` (stdin)."""
    if value == "-":
        value = sys.stdin.read()
    elif value.startswith("@"):
        try:
            value = Path(value[1:]).read_text()
        except OSError as exc:
            raise fail(f"{flag}: cannot read {value[1:]}: {exc.strerror}", 2) from None
    try:
        return orjson.loads(value)
    except orjson.JSONDecodeError as exc:
        raise fail(f"{flag} is not valid JSON: {exc}", 2) from None


# -- node and store --------------------------------------------------------------------------


@app.command()
def serve(
    db: DbOption = None,
    host: Annotated[str | None, typer.Option(help="Bind address [env DUETIME_HOST]")] = None,
    port: Annotated[int | None, typer.Option(help="Port [env DUETIME_PORT]")] = None,
    data_dir: DataDirOption = None,
    no_engine: Annotated[
        bool, typer.Option("--no-engine", help="Serve the API only; run no engine here.")
    ] = False,
) -> None:
    """Run a node: the HTTP API and the engine, until SIGTERM or Ctrl-C."""
    settings = _settings(
        db=db, host=host, port=port, data_dir=data_dir, engine=False if no_engine else None
    )
    from duetime.server import serve as serve_node

    with errors_reported():
        serve_node(settings)


@app.command()
def migrate(db: DbOption = None, data_dir: DataDirOption = None) -> None:
    """Apply pending schema migrations to the store and say which."""
    settings = _settings(db=db, data_dir=data_dir)

    async def run() -> list[str]:
        store = _open_store_for(settings)
        await store.open()
        try:
            applied: list[str] = await store.migrate()
            return applied
        finally:
            await store.close()

    with errors_reported():
        applied = asyncio.run(run())
    for version in applied:
        typer.echo(f"applied {version}")
    if not applied:
        typer.echo("up to date: no pending migrations")


@tenant_app.command("create")
def tenant_create(
    name: Annotated[str, typer.Argument(help="The tenant's display name.")],
    db: DbOption = None,
    data_dir: DataDirOption = None,
) -> None:
    """Create a tenant and its first API key directly in the store (no server needed).

    Prints {"id", "name", "api_key", "key_id"}; the key is shown only this once.
    """
    from duetime.auth import hash_api_key, new_api_key

    if not name.strip():
        raise fail("NAME must not be empty", 2)
    settings = _settings(db=db, data_dir=data_dir)

    async def run() -> dict[str, str]:
        store = _open_store_for(settings)
        await store.open()
        try:
            await store.migrate()
            tenant = await store.tenant_create(name)
            key_id, plaintext = new_api_key()
            await store.api_key_create(tenant.id, key_id, hash_api_key(plaintext))
            return {"id": tenant.id, "name": tenant.name, "api_key": plaintext, "key_id": key_id}
        finally:
            await store.close()

    with errors_reported():
        print_json(asyncio.run(run()))


# -- tasks, through the API ------------------------------------------------------------------


class OutputFormat(StrEnum):
    JSON = "json"
    JSONL = "jsonl"
    TABLE = "table"


@task_app.command("create")
def task_create(
    target_url: Annotated[
        str | None, typer.Option("--target-url", help="Deliver as a webhook to this URL.")
    ] = None,
    worker: Annotated[
        bool, typer.Option("--worker", help="No push: a worker leases it from its queue.")
    ] = False,
    target: Annotated[
        str | None, typer.Option("--target", help="Any target as JSON (amqp, nats, redis).")
    ] = None,
    method: Annotated[str, typer.Option(help="HTTP method of a webhook.")] = "POST",
    header: Annotated[
        list[str] | None, typer.Option("--header", help="'Name: value' for the webhook; repeat.")
    ] = None,
    payload: Annotated[
        str | None, typer.Option(help="JSON payload, @file.json, or - for stdin.")
    ] = None,
    run_at: Annotated[
        str | None, typer.Option(help="RFC 3339 time, e.g. 2026-12-01T15:00Z.")
    ] = None,
    delay: Annotated[float | None, typer.Option(help="Seconds from now.")] = None,
    name: Annotated[str | None, typer.Option(help="Kind of work (worker dispatch key).")] = None,
    queue: Annotated[str | None, typer.Option()] = None,
    idempotency_key: Annotated[str | None, typer.Option()] = None,
    priority: Annotated[int | None, typer.Option(help="Higher runs first.")] = None,
    max_attempts: Annotated[int | None, typer.Option()] = None,
    timeout: Annotated[float | None, typer.Option(help="One attempt's limit, seconds.")] = None,
    depends_on: Annotated[
        list[str] | None, typer.Option("--depends-on", help="Parent task id; repeat.")
    ] = None,
    concurrency_key: Annotated[str | None, typer.Option()] = None,
    label: Annotated[list[str] | None, typer.Option(help="KEY=VALUE; repeat.")] = None,
    url: UrlOption = DEFAULT_URL,
    api_key: ApiKeyOption = None,
) -> None:
    """Create a one-time task and print it."""
    from duetime.sdk.models import http_target, worker_target

    if sum((target_url is not None, worker, target is not None)) != 1:
        raise fail("give exactly one of --target-url, --worker or --target", 2)
    if target_url is not None:
        target_json: Mapping[str, Any] = http_target(
            target_url, method=method.upper(), headers=_pairs(header, ":", "--header")
        )
    elif worker:
        target_json = worker_target()
    else:
        target_json = _json_arg(str(target), "--target")
    fields: dict[str, Any] = {
        "target": target_json,
        "name": name,
        "queue": queue,
        "run_at": _when(run_at, "--run-at"),
        "delay_seconds": delay,
        "idempotency_key": idempotency_key,
        "priority": priority,
        "timeout_seconds": timeout,
        "depends_on": depends_on or None,
        "concurrency_key": concurrency_key,
        "labels": _pairs(label, "=", "--label") or None,
        "retry": None if max_attempts is None else {"max_attempts": max_attempts},
    }
    fields = {k: v for k, v in fields.items() if v is not None}
    if payload is not None:
        fields["payload"] = _json_arg(payload, "--payload")
    with errors_reported(), api_client(url, api_key) as client:
        print_json(client.create_task(**fields).to_json())


@task_app.command("get")
def task_get(
    task_id: Annotated[str, typer.Argument(metavar="ID")],
    url: UrlOption = DEFAULT_URL,
    api_key: ApiKeyOption = None,
) -> None:
    """Print one task."""
    with errors_reported(), api_client(url, api_key) as client:
        print_json(client.get_task(task_id).to_json())


@task_app.command("attempts")
def task_attempts(
    task_id: Annotated[str, typer.Argument(metavar="ID")],
    url: UrlOption = DEFAULT_URL,
    api_key: ApiKeyOption = None,
) -> None:
    """Print every attempt of a task."""
    with errors_reported(), api_client(url, api_key) as client:
        print_json({"items": [a.to_json() for a in client.list_attempts(task_id)]})


@task_app.command("list")
def task_list(
    status: Annotated[list[str] | None, typer.Option(help="Any of these statuses; repeat.")] = None,
    queue: Annotated[str | None, typer.Option()] = None,
    name: Annotated[str | None, typer.Option()] = None,
    schedule_id: Annotated[str | None, typer.Option()] = None,
    label: Annotated[list[str] | None, typer.Option(help="KEY=VALUE, all must match.")] = None,
    run_after: Annotated[str | None, typer.Option(help="run_at at or after (RFC 3339).")] = None,
    run_before: Annotated[str | None, typer.Option(help="run_at before (RFC 3339).")] = None,
    limit: Annotated[int | None, typer.Option(help="Page size (≤ 1000).")] = None,
    cursor: Annotated[str | None, typer.Option(help="next_cursor of the previous page.")] = None,
    all_pages: Annotated[
        bool, typer.Option("--all", help="Follow cursors to the last page.")
    ] = False,
    output: Annotated[OutputFormat, typer.Option("--output", "-o")] = OutputFormat.JSON,
    url: UrlOption = DEFAULT_URL,
    api_key: ApiKeyOption = None,
) -> None:
    """List tasks, newest first: one page ({"items", "next_cursor"}), or every page with --all."""
    filters: dict[str, Any] = {
        "status": status or None,
        "queue": queue,
        "name": name,
        "schedule_id": schedule_id,
        "labels": _pairs(label, "=", "--label") or None,
        "run_after": _when(run_after, "--run-after"),
        "run_before": _when(run_before, "--run-before"),
    }
    if all_pages and cursor is not None:
        raise fail("--all starts at the first page; drop --cursor", 2)
    with errors_reported(), api_client(url, api_key) as client:
        if all_pages:
            items = [t.to_json() for t in client.iter_tasks(page_size=limit, **filters)]
            next_cursor = None
        else:
            page = client.list_tasks(limit=limit, cursor=cursor, **filters)
            items, next_cursor = [t.to_json() for t in page.items], page.next_cursor
    _print_tasks(items, next_cursor, output)


def _print_tasks(
    items: list[dict[str, Any]], next_cursor: str | None, output: OutputFormat
) -> None:
    if output is OutputFormat.JSON:
        print_json({"items": items, "next_cursor": next_cursor})
        return
    if output is OutputFormat.JSONL:
        for item in items:
            typer.echo(orjson.dumps(item).decode())
        return
    columns = ("id", "status", "name", "queue", "run_at", "attempts")
    rows = [[c.upper() for c in columns]]
    rows += [["-" if item.get(c) is None else str(item[c]) for c in columns] for item in items]
    widths = [max(len(row[i]) for row in rows) for i in range(len(columns))]
    for row in rows:
        typer.echo("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    if next_cursor:
        typer.echo(f"next cursor: {next_cursor}", err=True)


@task_app.command("cancel")
def task_cancel(
    task_id: Annotated[str, typer.Argument(metavar="ID")],
    url: UrlOption = DEFAULT_URL,
    api_key: ApiKeyOption = None,
) -> None:
    """Cancel a task that has not finished and print it."""
    with errors_reported(), api_client(url, api_key) as client:
        print_json(client.cancel_task(task_id).to_json())


@task_app.command("retry")
def task_retry(
    task_id: Annotated[str, typer.Argument(metavar="ID")],
    url: UrlOption = DEFAULT_URL,
    api_key: ApiKeyOption = None,
) -> None:
    """Replay a failed or cancelled task as a new attempt series and print it."""
    with errors_reported(), api_client(url, api_key) as client:
        print_json(client.retry_task(task_id).to_json())


# -- registration: one line per command group ------------------------------------------------

app.add_typer(task_app, name="task")
app.add_typer(tenant_app, name="tenant")


def _add_bench() -> None:
    from duetime.bench.cli import bench_app

    app.add_typer(bench_app, name="bench")


_add_bench()


def _add_worker() -> None:
    from duetime.worker_cli import worker

    app.command("worker")(worker)


_add_worker()


def _add_schedule() -> None:
    from duetime.schedule_cli import schedule_app

    app.add_typer(schedule_app, name="schedule")


_add_schedule()


def _add_queue() -> None:
    from duetime.queue_cli import queue_app

    app.add_typer(queue_app, name="queue")


_add_queue()


def _add_bulk() -> None:
    import duetime.bulk_cli  # noqa: F401  (registers task replay / cancel-matching)


_add_bulk()


def _add_history() -> None:
    from duetime.history_cli import history

    app.command("history")(history)


_add_history()


def main() -> None:
    """Entry point of the ``duetime`` console script."""
    app()
