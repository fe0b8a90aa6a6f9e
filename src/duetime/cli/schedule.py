"""``duetime schedule ...``: recurring schedules through the HTTP API (SPEC §5).

::

    duetime schedule create --cron "0 2 * * *" --timezone America/New_York \\
        --target-url https://example.com/report --payload '{"kind": "daily"}'
    duetime schedule upcoming ID --count 5
    duetime schedule pause ID --note "db migration"; duetime schedule resume ID
    duetime schedule ticks nightly-report --outcome missed   # a key works where an id does

Every command prints JSON (or ``-o yaml|table``) and fails with one line and the exit status of
README's table. ``schedule backfill`` lives with the other bulk commands (:mod:`.bulk`).
"""

from __future__ import annotations

import functools
from enum import StrEnum
from typing import Annotated, Any, cast

import typer

from duetime.cli import resolve
from duetime.cli.common import (
    ApiKeyOption,
    UrlOption,
    fail,
    json_arg,
    pairs,
    when,
)
from duetime.cli.connection import connected
from duetime.cli.output import OutputFormat, OutputOption, Row, emit
from duetime.sdk.client import DEFAULT_URL
from duetime.sdk.models import ScheduleTask

__all__ = ["schedule_app"]

schedule_app = typer.Typer(help="Recurring schedules, through the HTTP API.", no_args_is_help=True)

IdArg = Annotated[
    str, typer.Argument(metavar="ID", help="The schedule's id, or its key (see --key).")
]


class Overlap(StrEnum):
    """``--overlap`` (shown as choices in ``--help``)."""

    ALLOW = "allow"
    SKIP = "skip"
    BUFFER_ONE = "buffer_one"


class Catchup(StrEnum):
    """``--catchup``."""

    NONE = "none"
    LATEST = "latest"
    ALL = "all"


class DstNonexistent(StrEnum):
    """``--dst-nonexistent``."""

    RUN_AFTER_GAP = "run_after_gap"
    SKIP = "skip"


class DstAmbiguous(StrEnum):
    """``--dst-ambiguous``."""

    FIRST = "first"
    BOTH = "both"


def _template(
    task: str | None,
    target_url: str | None,
    worker: bool,
    target: str | None,
    fields: dict[str, Any],
    payload: str | None,
) -> dict[str, Any] | None:
    """The task template from ``--task JSON`` or from the target and field flags (None when
    none of them is given)."""
    given = [x for x in (target_url, target) if x is not None] + ([True] if worker else [])
    if task is not None:
        if given or payload is not None or any(v is not None for v in fields.values()):
            raise fail("--task gives the whole template; drop the other task flags", 2)
        template = json_arg(task, "--task")
        if not isinstance(template, dict):
            raise fail("--task must be a JSON object", 2)
        return template
    if not given:
        if payload is not None or any(v is not None for v in fields.values()):
            raise fail("give the target: --target-url, --worker or --target", 2)
        return None
    if len(given) > 1:
        raise fail("give exactly one of --target-url, --worker or --target", 2)
    out: dict[str, Any] = {k: v for k, v in fields.items() if v is not None}
    if target_url is not None:
        out["target"] = {"type": "http", "url": target_url}
    elif worker:
        out["target"] = {"type": "worker"}
    else:
        out["target"] = json_arg(str(target), "--target")
    if payload is not None:
        out["payload"] = json_arg(payload, "--payload")
    return out


_TASK_HELP = "The whole task template as JSON, @file.json or -."


@schedule_app.command("create")
def create(
    cron: Annotated[str | None, typer.Option(help="5-field cron, e.g. '0 2 * * *'.")] = None,
    every: Annotated[str | None, typer.Option(help="ISO 8601 duration, e.g. PT15M.")] = None,
    rrule: Annotated[str | None, typer.Option(help="RFC 5545 rule.")] = None,
    timezone: Annotated[str | None, typer.Option(help="IANA zone (default UTC).")] = None,
    start_at: Annotated[str | None, typer.Option(help="RFC 3339.")] = None,
    end_at: Annotated[str | None, typer.Option(help="RFC 3339.")] = None,
    jitter: Annotated[int | None, typer.Option(help="Seconds of deterministic jitter.")] = None,
    overlap: Annotated[Overlap | None, typer.Option(help="While one runs, the next one.")] = None,
    catchup: Annotated[Catchup | None, typer.Option(help="After downtime.")] = None,
    catchup_window: Annotated[int | None, typer.Option(help="Seconds.")] = None,
    catchup_max_runs: Annotated[int | None, typer.Option()] = None,
    dst_nonexistent: Annotated[
        DstNonexistent | None, typer.Option(help="A local time a DST jump skips.")
    ] = None,
    dst_ambiguous: Annotated[
        DstAmbiguous | None, typer.Option(help="A local time that occurs twice.")
    ] = None,
    task: Annotated[str | None, typer.Option(help=_TASK_HELP)] = None,
    target_url: Annotated[str | None, typer.Option(help="Webhook target URL.")] = None,
    worker: Annotated[bool, typer.Option("--worker", help="A pull-worker target.")] = False,
    target: Annotated[str | None, typer.Option(help="Any target as JSON.")] = None,
    name: Annotated[str | None, typer.Option(help="The tasks' name.")] = None,
    queue: Annotated[str | None, typer.Option()] = None,
    payload: Annotated[str | None, typer.Option(help="JSON, @file.json or -.")] = None,
    priority: Annotated[int | None, typer.Option()] = None,
    max_attempts: Annotated[int | None, typer.Option()] = None,
    timeout: Annotated[float | None, typer.Option(help="One attempt's limit, seconds.")] = None,
    label: Annotated[list[str] | None, typer.Option(help="KEY=VALUE; repeat.")] = None,
    key: Annotated[
        str | None,
        typer.Option(help="Declare by this key: create, or change to match (safe to repeat)."),
    ] = None,
    url: UrlOption = DEFAULT_URL,
    api_key: ApiKeyOption = None,
    output: OutputOption = OutputFormat.JSON,
) -> None:
    """Create a schedule and print it; with --key, declare it (PUT /v1/schedules/by-key/KEY:
    made once, then changed to match or left as it is)."""
    fields = {
        "name": name,
        "queue": queue,
        "priority": priority,
        "timeout_seconds": timeout,
        "retry": None if max_attempts is None else {"max_attempts": max_attempts},
        "labels": pairs(label, "=", "--label") or None,
    }
    template = _template(task, target_url, worker, target, fields, payload)
    if template is None:
        raise fail("give the task: --target-url, --worker, --target or --task", 2)
    dst = {k: v for k, v in (("nonexistent", dst_nonexistent), ("ambiguous", dst_ambiguous)) if v}
    with connected(url, api_key) as client:
        call = client.create_schedule
        if key is not None:
            call = functools.partial(client.ensure_schedule, key)
        made = call(
            task=cast(ScheduleTask, template),  # built from flags and JSON: the server checks it
            cron=cron,
            every=every,
            rrule=rrule,
            timezone=timezone,
            start_at=when(start_at, "--start-at"),
            end_at=when(end_at, "--end-at"),
            jitter_seconds=jitter,
            overlap=overlap,
            catchup=catchup,
            catchup_window_seconds=catchup_window,
            catchup_max_runs=catchup_max_runs,
            dst=dst or None,
        )
        emit(output, made.to_json())


@schedule_app.command("update")
def update(
    schedule_id: IdArg,
    cron: Annotated[str | None, typer.Option()] = None,
    every: Annotated[str | None, typer.Option()] = None,
    rrule: Annotated[str | None, typer.Option()] = None,
    timezone: Annotated[str | None, typer.Option()] = None,
    jitter: Annotated[int | None, typer.Option()] = None,
    overlap: Annotated[Overlap | None, typer.Option()] = None,
    catchup: Annotated[Catchup | None, typer.Option()] = None,
    task: Annotated[str | None, typer.Option(help=_TASK_HELP)] = None,
    url: UrlOption = DEFAULT_URL,
    api_key: ApiKeyOption = None,
    output: OutputOption = OutputFormat.JSON,
) -> None:
    """Change a schedule (only the options given) and print it."""
    changes: dict[str, Any] = {
        "cron": cron, "every": every, "rrule": rrule, "timezone": timezone,
        "jitter_seconds": jitter, "overlap": overlap, "catchup": catchup,
    }  # fmt: skip
    given = {k: v for k, v in changes.items() if v is not None}
    if task is not None:
        given["task"] = _template(task, None, False, None, {}, None)
    if not given:
        raise fail("give at least one option to change", 2)
    with connected(url, api_key) as client:
        emit(
            output,
            client.update_schedule(resolve.schedule_id(client, schedule_id), **given).to_json(),
        )


@schedule_app.command("get")
def get(
    schedule_id: IdArg,
    url: UrlOption = DEFAULT_URL,
    api_key: ApiKeyOption = None,
    output: OutputOption = OutputFormat.JSON,
) -> None:
    """Print one schedule."""
    with connected(url, api_key) as client:
        emit(output, client.get_schedule(resolve.schedule_id(client, schedule_id)).to_json())


@schedule_app.command("list")
def list_(
    paused: Annotated[bool | None, typer.Option("--paused/--active")] = None,
    queue: Annotated[str | None, typer.Option()] = None,
    name: Annotated[str | None, typer.Option()] = None,
    limit: Annotated[int | None, typer.Option(help="Page size (≤ 1000).")] = None,
    cursor: Annotated[str | None, typer.Option()] = None,
    url: UrlOption = DEFAULT_URL,
    api_key: ApiKeyOption = None,
    output: OutputOption = OutputFormat.JSON,
) -> None:
    """List schedules, newest first: one page ({"items", "next_cursor"})."""
    with connected(url, api_key) as client:
        page = client.list_schedules(
            paused=paused, queue=queue, name=name, limit=limit, cursor=cursor
        )
    items = [s.to_json() for s in page.items]
    emit(output, {"items": items, "next_cursor": page.next_cursor}, _LIST_COLUMNS, table=_list_row)


_LIST_COLUMNS = ("id", "key", "name", "schedule", "timezone", "next_run_at", "paused")
"""``schedule list -o table``: what tells schedules apart, and when each fires next. Ids are
shown whole: a schedule is named by its id or its key, not by a part of its id."""


def _list_row(item: Row) -> Row:
    """A schedule as a ``list`` table row: its task's name, its expression under one column."""
    task = item.get("task") or {}
    expression = next((item[k] for k in ("cron", "every", "rrule") if item.get(k)), None)
    return {**item, "name": task.get("name"), "schedule": expression}


@schedule_app.command("delete")
def delete(
    schedule_id: IdArg,
    url: UrlOption = DEFAULT_URL,
    api_key: ApiKeyOption = None,
    output: OutputOption = OutputFormat.JSON,
) -> None:
    """Delete a schedule; its pending occurrences are cancelled."""
    with connected(url, api_key) as client:
        emit(output, client.delete_schedule(resolve.schedule_id(client, schedule_id)).to_json())


@schedule_app.command("pause")
def pause(
    schedule_id: IdArg,
    note: Annotated[str | None, typer.Option(help="Why (shown on the schedule).")] = None,
    url: UrlOption = DEFAULT_URL,
    api_key: ApiKeyOption = None,
    output: OutputOption = OutputFormat.JSON,
) -> None:
    """Stop making occurrences."""
    with connected(url, api_key) as client:
        emit(
            output,
            client.pause_schedule(resolve.schedule_id(client, schedule_id), note=note).to_json(),
        )


@schedule_app.command("resume")
def resume(
    schedule_id: IdArg,
    catchup: Annotated[
        Catchup | None, typer.Option(help="Run occurrences missed while paused.")
    ] = None,
    url: UrlOption = DEFAULT_URL,
    api_key: ApiKeyOption = None,
    output: OutputOption = OutputFormat.JSON,
) -> None:
    """Make occurrences again from now on."""
    with connected(url, api_key) as client:
        emit(
            output,
            client.resume_schedule(
                resolve.schedule_id(client, schedule_id), catchup=catchup
            ).to_json(),
        )


@schedule_app.command("trigger")
def trigger(
    schedule_id: IdArg,
    url: UrlOption = DEFAULT_URL,
    api_key: ApiKeyOption = None,
    output: OutputOption = OutputFormat.JSON,
) -> None:
    """Run one occurrence now and print its task."""
    with connected(url, api_key) as client:
        emit(output, client.trigger_schedule(resolve.schedule_id(client, schedule_id)).to_json())


@schedule_app.command("upcoming")
def upcoming(
    schedule_id: IdArg,
    after: Annotated[str | None, typer.Option(help="RFC 3339 (default now).")] = None,
    count: Annotated[int | None, typer.Option(help="How many (≤ 1000, default 10).")] = None,
    url: UrlOption = DEFAULT_URL,
    api_key: ApiKeyOption = None,
    output: OutputOption = OutputFormat.JSON,
) -> None:
    """Print the next fire times in the schedule's zone, with DST notes."""
    with connected(url, api_key) as client:
        items = client.list_upcoming(
            resolve.schedule_id(client, schedule_id), after=when(after, "--after"), count=count
        )
        emit(output, {"items": [i.to_json() for i in items]})


@schedule_app.command("ticks")
def ticks(
    schedule_id: IdArg,
    outcome: Annotated[list[str] | None, typer.Option(help="Only these outcomes; repeat.")] = None,
    limit: Annotated[int | None, typer.Option()] = None,
    cursor: Annotated[str | None, typer.Option()] = None,
    url: UrlOption = DEFAULT_URL,
    api_key: ApiKeyOption = None,
    output: OutputOption = OutputFormat.JSON,
) -> None:
    """Print the tick ledger, newest instant first: one page."""
    with connected(url, api_key) as client:
        page = client.list_ticks(
            resolve.schedule_id(client, schedule_id),
            outcome=outcome or None,
            limit=limit,
            cursor=cursor,
        )
        emit(output, {"items": [t.to_json() for t in page.items], "next_cursor": page.next_cursor})


@schedule_app.command("revisions")
def revisions(
    schedule_id: IdArg,
    limit: Annotated[int | None, typer.Option()] = None,
    cursor: Annotated[str | None, typer.Option()] = None,
    url: UrlOption = DEFAULT_URL,
    api_key: ApiKeyOption = None,
    output: OutputOption = OutputFormat.JSON,
) -> None:
    """Print every change to the schedule, newest first: one page."""
    with connected(url, api_key) as client:
        page = client.list_revisions(
            resolve.schedule_id(client, schedule_id), limit=limit, cursor=cursor
        )
        emit(output, {"items": [r.to_json() for r in page.items], "next_cursor": page.next_cursor})
