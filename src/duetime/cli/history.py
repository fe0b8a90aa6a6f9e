"""``duetime history``: the tenant's audit trail over the hot and cold tiers, through the API."""

from __future__ import annotations

from typing import Annotated, Any

import orjson
import typer

from duetime.cli.common import (
    ApiKeyOption,
    UrlOption,
    api_client,
    errors_reported,
    fail,
    pairs,
    print_json,
    when,
)
from duetime.sdk.client import DEFAULT_URL


def history(
    task_id: Annotated[str | None, typer.Option(help="One task's records.")] = None,
    schedule_id: Annotated[str | None, typer.Option()] = None,
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
) -> None:
    """Print the audit trail, newest first: one page ({"items", "next_cursor"}), or with --all
    every record as a JSON line."""
    filters: dict[str, Any] = {
        "task_id": task_id,
        "schedule_id": schedule_id,
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
    with errors_reported(), api_client(url, api_key) as client:
        if all_pages:
            for event in client.iter_history(page_size=limit, **filters):
                typer.echo(orjson.dumps(event.to_json()).decode())
            return
        page = client.list_history(limit=limit, cursor=cursor, **filters)
        print_json({"items": [e.to_json() for e in page.items], "next_cursor": page.next_cursor})
