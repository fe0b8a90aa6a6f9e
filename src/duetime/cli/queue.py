"""``duetime queue ...``: read and change queue settings through the HTTP API."""

from __future__ import annotations

from typing import Annotated

import typer

from duetime.cli.common import ApiKeyOption, UrlOption, api_client, errors_reported, fail
from duetime.cli.output import OutputFormat, OutputOption, emit
from duetime.errors import NotFound
from duetime.sdk.client import DEFAULT_URL, Client

queue_app = typer.Typer(help="Queues: settings and live figures.", no_args_is_help=True)

NameArg = Annotated[str, typer.Argument(metavar="NAME", help="The queue's name.")]


def _limit(client: Client, name: str) -> int | None:
    """The queue's concurrency limit, kept across pause/resume (None for a queue never seen)."""
    try:
        return client.get_queue(name).max_concurrency
    except NotFound:
        return None


@queue_app.command("list")
def queue_list(
    url: UrlOption = DEFAULT_URL,
    api_key: ApiKeyOption = None,
    output: OutputOption = OutputFormat.JSON,
) -> None:
    """Print every queue with its settings and figures."""
    with errors_reported(), api_client(url, api_key) as client:
        emit(output, [q.model_dump(mode="json") for q in client.list_queues()])


@queue_app.command("get")
def queue_get(
    name: NameArg,
    url: UrlOption = DEFAULT_URL,
    api_key: ApiKeyOption = None,
    output: OutputOption = OutputFormat.JSON,
) -> None:
    """Print one queue."""
    with errors_reported(), api_client(url, api_key) as client:
        emit(output, client.get_queue(name).model_dump(mode="json"))


@queue_app.command("pause")
def queue_pause(
    name: NameArg,
    url: UrlOption = DEFAULT_URL,
    api_key: ApiKeyOption = None,
    output: OutputOption = OutputFormat.JSON,
) -> None:
    """Stop dispatching and leasing the queue's tasks (its concurrency limit is kept)."""
    with errors_reported(), api_client(url, api_key) as client:
        queue = client.put_queue(name, paused=True, max_concurrency=_limit(client, name))
        emit(output, queue.model_dump(mode="json"))


@queue_app.command("resume")
def queue_resume(
    name: NameArg,
    url: UrlOption = DEFAULT_URL,
    api_key: ApiKeyOption = None,
    output: OutputOption = OutputFormat.JSON,
) -> None:
    """Dispatch and lease the queue's tasks again."""
    with errors_reported(), api_client(url, api_key) as client:
        queue = client.put_queue(name, paused=False, max_concurrency=_limit(client, name))
        emit(output, queue.model_dump(mode="json"))


@queue_app.command("set")
def queue_set(
    name: NameArg,
    max_concurrency: Annotated[
        int | None,
        typer.Option(help="Most tasks of the queue running at once (kept when omitted)."),
    ] = None,
    unlimited: Annotated[
        bool, typer.Option("--unlimited", help="Remove the concurrency limit.")
    ] = False,
    paused: Annotated[
        bool | None,
        typer.Option("--paused/--active", help="Pause or resume (kept when omitted)."),
    ] = None,
    url: UrlOption = DEFAULT_URL,
    api_key: ApiKeyOption = None,
    output: OutputOption = OutputFormat.JSON,
) -> None:
    """Change the settings given; the others keep their current values (a paused queue stays
    paused when only --max-concurrency is given)."""
    if unlimited and max_concurrency is not None:
        raise fail("give --max-concurrency N or --unlimited, not both", 2)
    if not unlimited and max_concurrency is None and paused is None:
        raise fail("give at least one of --max-concurrency, --unlimited, --paused/--active", 2)
    with errors_reported(), api_client(url, api_key) as client:
        try:
            current = client.get_queue(name)
            keep_paused, keep_limit = current.paused, current.max_concurrency
        except NotFound:
            keep_paused, keep_limit = False, None
        queue = client.put_queue(
            name,
            paused=keep_paused if paused is None else paused,
            max_concurrency=None
            if unlimited
            else (keep_limit if max_concurrency is None else max_concurrency),
        )
        emit(output, queue.model_dump(mode="json"))
