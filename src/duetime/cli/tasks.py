"""``duetime task ...``: one-time tasks through the HTTP API."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

import typer

from duetime.cli import resolve
from duetime.cli.common import (
    ApiKeyOption,
    ScheduleOption,
    UrlOption,
    fail,
    json_arg,
    pairs,
    task_app,
    when,
)
from duetime.cli.connection import connected
from duetime.cli.output import OutputFormat, OutputOption, emit, short_ids
from duetime.sdk.client import DEFAULT_URL
from duetime.target_types import BROKER_TYPES, TargetType
from duetime.types import TaskStatus

IdArg = Annotated[
    str,
    typer.Argument(metavar="ID", help="The task's id, or a unique start of it (4+ hex digits)."),
]
_BROKERS = ", ".join(t for t in TargetType if t in BROKER_TYPES)


@task_app.command("create")
def task_create(
    target_url: Annotated[
        str | None, typer.Option("--target-url", help="Deliver as a webhook to this URL.")
    ] = None,
    worker: Annotated[
        bool, typer.Option("--worker", help="No push: a worker leases it from its queue.")
    ] = False,
    target: Annotated[
        str | None, typer.Option("--target", help=f"Any target as JSON ({_BROKERS}).")
    ] = None,
    method: Annotated[str, typer.Option(help="HTTP method of a webhook.")] = "POST",
    header: Annotated[
        list[str] | None, typer.Option("--header", help="'Name: value' for the webhook; repeat.")
    ] = None,
    credential: Annotated[
        str | None,
        typer.Option(help="The webhook authenticates with this named credential (credential put)."),
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
        list[str] | None,
        typer.Option("--depends-on", help="Parent task id or a unique start of it; repeat."),
    ] = None,
    concurrency_key: Annotated[str | None, typer.Option()] = None,
    label: Annotated[list[str] | None, typer.Option(help="KEY=VALUE; repeat.")] = None,
    url: UrlOption = DEFAULT_URL,
    api_key: ApiKeyOption = None,
    output: OutputOption = OutputFormat.JSON,
) -> None:
    """Create a one-time task and print it."""
    from duetime.sdk.models import http_target, worker_target

    if sum((target_url is not None, worker, target is not None)) != 1:
        raise fail("give exactly one of --target-url, --worker or --target", 2)
    if credential is not None and target_url is None:
        raise fail("--credential goes with --target-url (a webhook)", 2)
    if target_url is not None:
        target_json: Mapping[str, Any] = http_target(
            target_url,
            method=method.upper(),
            headers=pairs(header, ":", "--header"),
            credential=credential,
        )
    elif worker:
        target_json = worker_target()
    else:
        target_json = json_arg(str(target), "--target")
    fields: dict[str, Any] = {
        "target": target_json,
        "name": name,
        "queue": queue,
        "run_at": when(run_at, "--run-at"),
        "delay_seconds": delay,
        "idempotency_key": idempotency_key,
        "priority": priority,
        "timeout_seconds": timeout,
        "depends_on": depends_on or None,
        "concurrency_key": concurrency_key,
        "labels": pairs(label, "=", "--label") or None,
        "retry": None if max_attempts is None else {"max_attempts": max_attempts},
    }
    fields = {k: v for k, v in fields.items() if v is not None}
    if payload is not None:
        fields["payload"] = json_arg(payload, "--payload")
    with connected(url, api_key) as client:
        if depends_on:
            fields["depends_on"] = [resolve.task_id(client, parent) for parent in depends_on]
        emit(output, client.create_task(**fields).to_json())


@task_app.command("get")
def task_get(
    task_id: IdArg,
    url: UrlOption = DEFAULT_URL,
    api_key: ApiKeyOption = None,
    output: OutputOption = OutputFormat.JSON,
) -> None:
    """Print one task."""
    with connected(url, api_key) as client:
        emit(output, client.get_task(resolve.task_id(client, task_id)).to_json())


@task_app.command("attempts")
def task_attempts(
    task_id: IdArg,
    url: UrlOption = DEFAULT_URL,
    api_key: ApiKeyOption = None,
    output: OutputOption = OutputFormat.JSON,
) -> None:
    """Print every attempt of a task."""
    with connected(url, api_key) as client:
        attempts = client.list_attempts(resolve.task_id(client, task_id))
        emit(output, {"items": [a.to_json() for a in attempts]})


@task_app.command("list")
def task_list(
    status: Annotated[
        list[TaskStatus] | None, typer.Option(help="Any of these statuses; repeat.")
    ] = None,
    queue: Annotated[str | None, typer.Option()] = None,
    name: Annotated[str | None, typer.Option()] = None,
    schedule_id: ScheduleOption = None,
    label: Annotated[list[str] | None, typer.Option(help="KEY=VALUE, all must match.")] = None,
    run_after: Annotated[str | None, typer.Option(help="run_at at or after (RFC 3339).")] = None,
    run_before: Annotated[str | None, typer.Option(help="run_at before (RFC 3339).")] = None,
    id_prefix: Annotated[
        str | None, typer.Option(help="Ids starting with this (4+ hex digits).")
    ] = None,
    limit: Annotated[int | None, typer.Option(help="Page size (≤ 1000).")] = None,
    cursor: Annotated[str | None, typer.Option(help="next_cursor of the previous page.")] = None,
    all_pages: Annotated[
        bool, typer.Option("--all", help="Follow cursors to the last page.")
    ] = False,
    output: OutputOption = OutputFormat.JSON,
    url: UrlOption = DEFAULT_URL,
    api_key: ApiKeyOption = None,
) -> None:
    """List tasks, newest first: one page ({"items", "next_cursor"}), or every page with --all."""
    filters: dict[str, Any] = {
        "status": status or None,
        "queue": queue,
        "name": name,
        "labels": pairs(label, "=", "--label") or None,
        "run_after": when(run_after, "--run-after"),
        "run_before": when(run_before, "--run-before"),
        "id_prefix": id_prefix,
    }
    if all_pages and cursor is not None:
        raise fail("--all starts at the first page; drop --cursor", 2)
    with connected(url, api_key) as client:
        if schedule_id is not None:
            filters["schedule_id"] = resolve.schedule_id(client, schedule_id)
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
    columns = ("id", "name", "queue", "status", "run_at", "attempts")
    shown = {"items": items, "next_cursor": next_cursor}
    emit(output, shown, columns, table=short_ids(items))


@task_app.command("cancel")
def task_cancel(
    task_id: IdArg,
    url: UrlOption = DEFAULT_URL,
    api_key: ApiKeyOption = None,
    output: OutputOption = OutputFormat.JSON,
) -> None:
    """Cancel a task that has not finished and print it."""
    with connected(url, api_key) as client:
        emit(output, client.cancel_task(resolve.task_id(client, task_id)).to_json())


@task_app.command("retry")
def task_retry(
    task_id: IdArg,
    url: UrlOption = DEFAULT_URL,
    api_key: ApiKeyOption = None,
    output: OutputOption = OutputFormat.JSON,
) -> None:
    """Replay a failed or cancelled task as a new attempt series and print it."""
    with connected(url, api_key) as client:
        emit(output, client.retry_task(resolve.task_id(client, task_id)).to_json())


@task_app.command("update")
def task_update(
    task_id: IdArg,
    run_at: Annotated[str | None, typer.Option(help="New RFC 3339 run time.")] = None,
    payload: Annotated[
        str | None, typer.Option(help="New JSON payload, @file.json, or - for stdin.")
    ] = None,
    priority: Annotated[int | None, typer.Option()] = None,
    label: Annotated[list[str] | None, typer.Option(help="KEY=VALUE; replaces the labels.")] = None,
    url: UrlOption = DEFAULT_URL,
    api_key: ApiKeyOption = None,
    output: OutputOption = OutputFormat.JSON,
) -> None:
    """Change a waiting task: only the options given change."""
    fields: dict[str, Any] = {
        "run_at": when(run_at, "--run-at"),
        "priority": priority,
        "labels": pairs(label, "=", "--label") if label else None,
    }
    fields = {k: v for k, v in fields.items() if v is not None}
    if payload is not None:
        fields["payload"] = json_arg(payload, "--payload")
    if not fields:
        raise fail("give at least one of --run-at, --payload, --priority, --label", 2)
    with connected(url, api_key) as client:
        emit(output, client.update_task(resolve.task_id(client, task_id), **fields).to_json())


@task_app.command("batch")
def task_batch(
    tasks: Annotated[
        str,
        typer.Argument(
            metavar="TASKS",
            help='A JSON list of create bodies (or {"tasks": [...]}), @file.json, or -.',
        ),
    ],
    url: UrlOption = DEFAULT_URL,
    api_key: ApiKeyOption = None,
    output: OutputOption = OutputFormat.JSON,
) -> None:
    """Create up to 1,000 tasks, all or nothing (errors name tasks.N.field)."""
    data = json_arg(tasks, "TASKS")
    if isinstance(data, dict) and "tasks" in data:
        data = data["tasks"]
    if not isinstance(data, list):
        raise fail("TASKS must be a JSON list of task bodies", 2)
    with connected(url, api_key) as client:
        emit(output, {"items": [t.to_json() for t in client.create_tasks(data)]})
