"""The commands that change many tasks at once: ``task replay`` and ``task cancel-matching``
(every task matching a filter, throttled by the server: ``POST /v1/tasks/replay`` /
``/cancel``) and ``schedule backfill`` (an occurrence per fire time of a past range).

Each asks first (:func:`go_ahead`): ``--dry-run`` counts what the call would work on and changes
nothing; otherwise the count is shown and a ``y`` awaited on the terminal, which ``--yes``
skips — without a terminal to ask on (a script, a pipe) the command refuses unless ``--yes`` is
given. The counts come from listings (``GET /v1/tasks`` with the call's filters and its default
statuses; ``GET /v1/schedules/{id}/upcoming`` over the range), up to the call's own limit.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Annotated, Any

import typer

from duetime.cli import resolve
from duetime.cli.common import (
    EXIT_ERROR,
    EXIT_USAGE,
    ApiKeyOption,
    ScheduleOption,
    UrlOption,
    fail,
    pairs,
    task_app,
    when,
)
from duetime.cli.connection import connected
from duetime.cli.output import OutputFormat, OutputOption, emit
from duetime.cli.schedule import IdArg, schedule_app
from duetime.sdk.client import DEFAULT_URL, Client
from duetime.types import TaskStatus

StatusOption = Annotated[list[str] | None, typer.Option(help="Any of these statuses; repeat.")]
LabelOption = Annotated[list[str] | None, typer.Option(help="KEY=VALUE, all must match.")]
MaxOption = Annotated[int, typer.Option(help="Change at most this many tasks.")]
RateOption = Annotated[float, typer.Option(help="Changes per second at most.")]
AfterOption = Annotated[str | None, typer.Option(help="run_at at or after (RFC 3339).")]
BeforeOption = Annotated[str | None, typer.Option(help="run_at before (RFC 3339).")]
DryRunOption = Annotated[
    bool, typer.Option("--dry-run", help="Count what it would change, and change nothing.")
]
YesOption = Annotated[
    bool, typer.Option("--yes", "-y", help="Do not ask first (needed without a terminal).")
]

COUNT_PAGE = 1000
"""Tasks per listing page while counting (the API's largest page)."""
MAX_UPCOMING = 1000
"""The most fire times one ``upcoming`` call answers: a backfill's count stops there."""


def interactive() -> bool:
    """Whether there is someone to ask: standard input is a terminal."""
    return sys.stdin.isatty()


def refuse_unasked(command: str, dry_run: bool, yes: bool) -> None:
    """Without ``--yes`` or ``--dry-run``, a bulk command must ask on a terminal: refuse (exit 2)
    when there is none (:func:`interactive`), before any call."""
    if not (dry_run or yes or interactive()):
        raise fail(
            f"{command} changes many tasks: add --yes to go ahead unasked (there is no terminal "
            "to ask on), or --dry-run to count them",
            EXIT_USAGE,
        )


def go_ahead(what: str, counted: tuple[int, bool], dry_run: bool, output: OutputFormat) -> bool:
    """After counting (``counted``: how many, and whether more lie past the limit): print the
    dry run's answer and stop (False), or ask on the terminal — ``what`` with ``{}`` for the
    count, ``replay {} tasks`` — and go ahead on a ``y`` (True; nothing counted goes ahead
    unasked). A ``n`` exits 1, nothing changed."""
    count, more = counted
    if dry_run:
        emit(output, {"matched": count, "changed": 0, "more": more, "dry_run": True})
        return False
    many = f"{count}{' or more' if more else ''}"
    if count and not typer.confirm(f"{what.format(many)}?", default=False, err=True):
        raise fail("not confirmed: nothing changed", EXIT_ERROR)
    return True


def count_up_to(found: Iterator[Any], limit: int) -> tuple[int, bool]:
    """How many of ``found`` there are, counting at most ``limit``, and whether there are more."""
    counted = 0
    for _ in found:
        if counted == limit:
            return counted, True
        counted += 1
    return counted, False


def _filters(
    status: list[str] | None,
    queue: str | None,
    name: str | None,
    label: list[str] | None,
    run_after: str | None,
    run_before: str | None,
) -> dict[str, Any]:
    return {
        "status": status or None,
        "queue": queue,
        "name": name,
        "labels": pairs(label, "=", "--label") or None,
        "run_after": when(run_after, "--run-after"),
        "run_before": when(run_before, "--run-before"),
    }


def _matching(
    client: Client, filters: dict[str, Any], statuses: list[str], limit: int
) -> tuple[int, bool]:
    """The tasks a bulk call with ``filters`` finds, with its default ``statuses`` spelt out."""
    listing = {**filters, "status": filters["status"] or statuses}
    return count_up_to(client.iter_tasks(page_size=min(COUNT_PAGE, limit + 1), **listing), limit)


@task_app.command("replay")
def task_replay(
    status: StatusOption = None,
    queue: Annotated[str | None, typer.Option()] = None,
    name: Annotated[str | None, typer.Option()] = None,
    schedule_id: ScheduleOption = None,
    label: LabelOption = None,
    run_after: AfterOption = None,
    run_before: BeforeOption = None,
    max_tasks: MaxOption = 1000,
    rate: RateOption = 100.0,
    dry_run: DryRunOption = False,
    yes: YesOption = False,
    url: UrlOption = DEFAULT_URL,
    api_key: ApiKeyOption = None,
    output: OutputOption = OutputFormat.JSON,
) -> None:
    """Replay failed (or, with --status, cancelled) tasks matching the filters, throttled;
    asks first unless --yes; prints {"matched", "changed"}."""
    refuse_unasked("task replay", dry_run, yes)
    filters = _filters(status, queue, name, label, run_after, run_before)
    with connected(url, api_key) as client:
        if schedule_id is not None:
            filters["schedule_id"] = resolve.schedule_id(client, schedule_id)
        if not yes or dry_run:
            counted = _matching(client, filters, [TaskStatus.FAILED.value], max_tasks)
            if not go_ahead("replay {} tasks", counted, dry_run, output):
                return
        done = client.replay_tasks(max_tasks=max_tasks, rate_per_second=rate, **filters)
        emit(output, done.model_dump(mode="json"))


@task_app.command("cancel-matching")
def task_cancel_matching(
    status: StatusOption = None,
    queue: Annotated[str | None, typer.Option()] = None,
    name: Annotated[str | None, typer.Option()] = None,
    schedule_id: ScheduleOption = None,
    label: LabelOption = None,
    run_after: AfterOption = None,
    run_before: BeforeOption = None,
    max_tasks: MaxOption = 1000,
    rate: RateOption = 100.0,
    dry_run: DryRunOption = False,
    yes: YesOption = False,
    url: UrlOption = DEFAULT_URL,
    api_key: ApiKeyOption = None,
    output: OutputOption = OutputFormat.JSON,
) -> None:
    """Cancel unfinished tasks matching the filters, throttled; asks first unless --yes;
    prints {"matched", "changed"}."""
    refuse_unasked("task cancel-matching", dry_run, yes)
    filters = _filters(status, queue, name, label, run_after, run_before)
    with connected(url, api_key) as client:
        if schedule_id is not None:
            filters["schedule_id"] = resolve.schedule_id(client, schedule_id)
        if not yes or dry_run:
            unfinished = [s.value for s in TaskStatus if not s.terminal]
            counted = _matching(client, filters, unfinished, max_tasks)
            if not go_ahead("cancel {} tasks", counted, dry_run, output):
                return
        done = client.cancel_tasks(max_tasks=max_tasks, rate_per_second=rate, **filters)
        emit(output, done.model_dump(mode="json"))


@schedule_app.command("backfill")
def schedule_backfill(
    schedule_id: IdArg,
    start: Annotated[str, typer.Option(help="RFC 3339, inclusive.")],
    end: Annotated[str, typer.Option(help="RFC 3339, inclusive; not in the future.")],
    max_runs: Annotated[int | None, typer.Option(help="Default 1000.")] = None,
    rate: Annotated[float | None, typer.Option(help="Tasks released per second.")] = None,
    dry_run: DryRunOption = False,
    yes: YesOption = False,
    url: UrlOption = DEFAULT_URL,
    api_key: ApiKeyOption = None,
    output: OutputOption = OutputFormat.JSON,
) -> None:
    """Make the occurrences of a past range, throttled; asks first unless --yes."""
    begin, finish = when(start, "--start"), when(end, "--end")
    assert begin is not None and finish is not None
    refuse_unasked("schedule backfill", dry_run, yes)
    with connected(url, api_key) as client:
        sid = resolve.schedule_id(client, schedule_id)
        if not yes or dry_run:
            counted = _occurrences(client, sid, begin, finish, max_runs or 1000)
            if not go_ahead("make {} occurrences", counted, dry_run, output):
                return
        made = client.backfill_schedule(
            sid, start=begin, end=finish, max_runs=max_runs, rate_per_second=rate
        )
        emit(output, made.to_json())


def _occurrences(
    client: Client, schedule_id: str, start: datetime, end: datetime, limit: int
) -> tuple[int, bool]:
    """The schedule's fire times in ``[start, end]``, counted up to ``limit`` (and at most
    :data:`MAX_UPCOMING`, past which the count says there are more)."""
    asked = min(limit, MAX_UPCOMING)
    after = start - timedelta(microseconds=1)  # `after` is exclusive, the range's start is not
    times = client.list_upcoming(schedule_id, after=after, count=min(asked + 1, MAX_UPCOMING))
    within = iter([t for t in times if t.at <= end])
    counted, more = count_up_to(within, asked)
    return counted, more or (counted == MAX_UPCOMING and len(times) == MAX_UPCOMING)
