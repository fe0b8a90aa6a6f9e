"""``duetime queue ...``: read and change queue settings through the HTTP API."""

from __future__ import annotations

from typing import Annotated

import typer

from duetime.cli import ApiKeyOption, UrlOption, api_client, errors_reported, print_json
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
def queue_list(url: UrlOption = DEFAULT_URL, api_key: ApiKeyOption = None) -> None:
    """Print every queue with its settings and figures."""
    with errors_reported(), api_client(url, api_key) as client:
        print_json([q.model_dump(mode="json") for q in client.list_queues()])


@queue_app.command("get")
def queue_get(name: NameArg, url: UrlOption = DEFAULT_URL, api_key: ApiKeyOption = None) -> None:
    """Print one queue."""
    with errors_reported(), api_client(url, api_key) as client:
        print_json(client.get_queue(name).model_dump(mode="json"))


@queue_app.command("pause")
def queue_pause(name: NameArg, url: UrlOption = DEFAULT_URL, api_key: ApiKeyOption = None) -> None:
    """Stop dispatching and leasing the queue's tasks (its concurrency limit is kept)."""
    with errors_reported(), api_client(url, api_key) as client:
        queue = client.put_queue(name, paused=True, max_concurrency=_limit(client, name))
        print_json(queue.model_dump(mode="json"))


@queue_app.command("resume")
def queue_resume(name: NameArg, url: UrlOption = DEFAULT_URL, api_key: ApiKeyOption = None) -> None:
    """Dispatch and lease the queue's tasks again."""
    with errors_reported(), api_client(url, api_key) as client:
        queue = client.put_queue(name, paused=False, max_concurrency=_limit(client, name))
        print_json(queue.model_dump(mode="json"))


@queue_app.command("set")
def queue_set(
    name: NameArg,
    max_concurrency: Annotated[
        int | None, typer.Option(help="Most tasks of the queue running at once; omit for none.")
    ] = None,
    paused: Annotated[bool, typer.Option("--paused/--active")] = False,
    url: UrlOption = DEFAULT_URL,
    api_key: ApiKeyOption = None,
) -> None:
    """Replace the queue's settings."""
    with errors_reported(), api_client(url, api_key) as client:
        queue = client.put_queue(name, paused=paused, max_concurrency=max_concurrency)
        print_json(queue.model_dump(mode="json"))
