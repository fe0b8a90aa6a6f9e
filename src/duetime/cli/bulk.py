"""``duetime task replay`` and ``duetime task cancel-matching``: replay or cancel every task
matching a filter, throttled by the server (``POST /v1/tasks/replay`` / ``/cancel``)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from duetime.cli.common import (
    ApiKeyOption,
    UrlOption,
    api_client,
    errors_reported,
    pairs,
    print_json,
    task_app,
    when,
)
from duetime.sdk.client import DEFAULT_URL

StatusOption = Annotated[list[str] | None, typer.Option(help="Any of these statuses; repeat.")]
LabelOption = Annotated[list[str] | None, typer.Option(help="KEY=VALUE, all must match.")]
MaxOption = Annotated[int, typer.Option(help="Change at most this many tasks.")]
RateOption = Annotated[float, typer.Option(help="Changes per second at most.")]


def _filters(
    status: list[str] | None,
    queue: str | None,
    name: str | None,
    schedule_id: str | None,
    label: list[str] | None,
    run_after: str | None,
    run_before: str | None,
) -> dict[str, Any]:
    return {
        "status": status or None,
        "queue": queue,
        "name": name,
        "schedule_id": schedule_id,
        "labels": pairs(label, "=", "--label") or None,
        "run_after": when(run_after, "--run-after"),
        "run_before": when(run_before, "--run-before"),
    }


@task_app.command("replay")
def task_replay(
    status: StatusOption = None,
    queue: Annotated[str | None, typer.Option()] = None,
    name: Annotated[str | None, typer.Option()] = None,
    schedule_id: Annotated[str | None, typer.Option()] = None,
    label: LabelOption = None,
    run_after: Annotated[str | None, typer.Option(help="run_at at or after (RFC 3339).")] = None,
    run_before: Annotated[str | None, typer.Option(help="run_at before (RFC 3339).")] = None,
    max_tasks: MaxOption = 1000,
    rate: RateOption = 100.0,
    url: UrlOption = DEFAULT_URL,
    api_key: ApiKeyOption = None,
) -> None:
    """Replay failed (or, with --status, cancelled) tasks matching the filters, throttled;
    prints {"matched", "changed"}."""
    filters = _filters(status, queue, name, schedule_id, label, run_after, run_before)
    with errors_reported(), api_client(url, api_key) as client:
        done = client.replay_tasks(max_tasks=max_tasks, rate_per_second=rate, **filters)
        print_json(done.model_dump(mode="json"))


@task_app.command("cancel-matching")
def task_cancel_matching(
    status: StatusOption = None,
    queue: Annotated[str | None, typer.Option()] = None,
    name: Annotated[str | None, typer.Option()] = None,
    schedule_id: Annotated[str | None, typer.Option()] = None,
    label: LabelOption = None,
    run_after: Annotated[str | None, typer.Option(help="run_at at or after (RFC 3339).")] = None,
    run_before: Annotated[str | None, typer.Option(help="run_at before (RFC 3339).")] = None,
    max_tasks: MaxOption = 1000,
    rate: RateOption = 100.0,
    url: UrlOption = DEFAULT_URL,
    api_key: ApiKeyOption = None,
) -> None:
    """Cancel unfinished tasks matching the filters, throttled; prints {"matched", "changed"}."""
    filters = _filters(status, queue, name, schedule_id, label, run_after, run_before)
    with errors_reported(), api_client(url, api_key) as client:
        done = client.cancel_tasks(max_tasks=max_tasks, rate_per_second=rate, **filters)
        print_json(done.model_dump(mode="json"))
