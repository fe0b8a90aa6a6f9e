"""``duetime history``: the tenant's audit trail over the hot and cold tiers, through the API."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from duetime.cli import resolve
from duetime.cli.common import (
    ApiKeyOption,
    ScheduleOption,
    UrlOption,
    fail,
    pairs,
    when,
)
from duetime.cli.connection import connected
from duetime.cli.output import OutputFormat, emit, short_ids, to_compact
from duetime.sdk.client import DEFAULT_URL


def history(
    task_id: Annotated[
        str | None, typer.Option(help="One task's records: its id, or a unique start of it.")
    ] = None,
    schedule_id: ScheduleOption = None,
    name: Annotated[str | None, typer.Option()] = None,
    queue: Annotated[str | None, typer.Option()] = None,
    kind: Annotated[list[str] | None, typer.Option(help="task, attempt, schedule; repeat.")] = None,
    outcome: Annotated[list[str] | None, typer.Option(help="Attempt outcomes; repeat.")] = None,
    label: Annotated[list[str] | None, typer.Option(help="KEY=VALUE, all must match.")] = None,
    since: Annotated[str | None, typer.Option(help="At or after (RFC 3339).")] = None,
    until: Annotated[str | None, typer.Option(help="Before (RFC 3339).")] = None,
    limit: Annotated[int | None, typer.Option(help="Page size (≤ 1000).")] = None,
    cursor: Annotated[str | None, typer.Option(help="next_cursor of the previous page.")] = None,
    all_pages: Annotated[
        bool, typer.Option("--all", help="Follow cursors to the last page (JSON lines).")
    ] = False,
    url: UrlOption = DEFAULT_URL,
    api_key: ApiKeyOption = None,
    output: Annotated[
        OutputFormat | None,
        typer.Option(
            "--output", "-o", help="json (one page; jsonl with --all), yaml, table, jsonl."
        ),
    ] = None,
) -> None:
    """Print the audit trail, newest first: one page ({"items", "next_cursor"}), or with --all
    every record (as JSON lines unless -o says otherwise)."""
    filters: dict[str, Any] = {
        "name": name,
        "queue": queue,
        "kind": kind or None,
        "outcome": outcome or None,
        "labels": pairs(label, "=", "--label") or None,
        "since": when(since, "--since"),
        "until": when(until, "--until"),
    }
    if all_pages and cursor is not None:
        raise fail("--all starts at the first page; drop --cursor", 2)
    with connected(url, api_key) as client:
        if task_id is not None:
            filters["task_id"] = resolve.task_id(client, task_id)
        if schedule_id is not None:
            filters["schedule_id"] = resolve.schedule_id(client, schedule_id)
        if all_pages:
            if output is None or output is OutputFormat.JSONL:  # record by record, as they come
                for event in client.iter_history(page_size=limit, **filters):
                    typer.echo(to_compact(event.to_json()))
                return
            items = [e.to_json() for e in client.iter_history(page_size=limit, **filters)]
            next_cursor = None
        else:
            page = client.list_history(limit=limit, cursor=cursor, **filters)
            items, next_cursor = [e.to_json() for e in page.items], page.next_cursor
    shown = {"items": items, "next_cursor": next_cursor}
    emit(output or OutputFormat.JSON, shown, _COLUMNS, table=short_ids(items, "task_id"))


_COLUMNS = ("at", "kind", "task_id", "name", "from_status", "to_status", "outcome", "actor")
"""``history -o table``: when, what happened to which task, and who did it."""
