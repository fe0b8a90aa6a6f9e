"""``duetime queue ...``: read and change queue settings through the HTTP API.

``PUT /v1/queues/{name}`` replaces every setting at once, so each command here that changes one
(``pause``, ``resume``, ``set``) reads the queue first and writes the others back unchanged.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from duetime.cli.common import (
    EXIT_USAGE,
    ApiKeyOption,
    UrlOption,
    fail,
)
from duetime.cli.connection import connected
from duetime.cli.output import OutputFormat, OutputOption, Row, emit
from duetime.errors import NotFound
from duetime.sdk.client import DEFAULT_URL, Client
from duetime.sdk.queues import QueueInfo

queue_app = typer.Typer(help="Queues: settings and live figures.", no_args_is_help=True)

NameArg = Annotated[str, typer.Argument(metavar="NAME", help="The queue's name.")]

_COLUMNS = (
    "name",
    "paused",
    "ready",
    "running",
    "oldest_due_lag_seconds",
    "max_concurrency",
    "rate_limit_per_second",
    "tokens",
    "held_by",
)
"""``queue list -o table``: how much waits and runs, how late, and what limits or holds it
(``queue get`` shows every setting)."""


def _list_row(queue: Row) -> Row:
    """A queue as a ``list`` table row: its ready tasks brought up from ``counts``."""
    counts = queue.get("counts") or {}
    return {**queue, "ready": counts.get("ready", 0)}


_SETTINGS = (
    "paused",
    "max_concurrency",
    "rate_limit_per_second",
    "burst",
    "max_concurrency_per_key",
    "retention",
    "key_limit",
    "unique",
    "debounce",
    "throttle",
)
"""What ``PUT /v1/queues/{name}`` replaces: the ``put_queue`` arguments (keyed flow rules as
the server shows them, which it reads back unchanged)."""


def _settings(client: Client, name: str) -> dict[str, Any]:
    """The queue's current settings as ``put_queue`` arguments (the defaults for a queue never
    seen), so a command that changes one keeps the others."""
    try:
        current = client.get_queue(name)
    except NotFound:
        current = QueueInfo(name=name)
    return {key: getattr(current, key) for key in _SETTINGS}


def _shown(queue: QueueInfo) -> dict[str, Any]:
    return queue.model_dump(mode="json")


@queue_app.command("list")
def queue_list(
    url: UrlOption = DEFAULT_URL,
    api_key: ApiKeyOption = None,
    output: OutputOption = OutputFormat.JSON,
) -> None:
    """Print every queue with its settings and figures (tokens: the rate limit's bucket now;
    held_by: what keeps its ready tasks waiting)."""
    with connected(url, api_key) as client:
        emit(output, [_shown(q) for q in client.list_queues()], _COLUMNS, table=_list_row)


@queue_app.command("get")
def queue_get(
    name: NameArg,
    url: UrlOption = DEFAULT_URL,
    api_key: ApiKeyOption = None,
    output: OutputOption = OutputFormat.JSON,
) -> None:
    """Print one queue: its settings and figures (tokens, held_by as in list)."""
    with connected(url, api_key) as client:
        emit(output, _shown(client.get_queue(name)))


@queue_app.command("pause")
def queue_pause(
    name: NameArg,
    url: UrlOption = DEFAULT_URL,
    api_key: ApiKeyOption = None,
    output: OutputOption = OutputFormat.JSON,
) -> None:
    """Stop dispatching and leasing the queue's tasks (its limits and retention are kept)."""
    with connected(url, api_key) as client:
        settings = {**_settings(client, name), "paused": True}
        emit(output, _shown(client.put_queue(name, **settings)))


@queue_app.command("resume")
def queue_resume(
    name: NameArg,
    url: UrlOption = DEFAULT_URL,
    api_key: ApiKeyOption = None,
    output: OutputOption = OutputFormat.JSON,
) -> None:
    """Dispatch and lease the queue's tasks again (its limits and retention are kept)."""
    with connected(url, api_key) as client:
        settings = {**_settings(client, name), "paused": False}
        emit(output, _shown(client.put_queue(name, **settings)))


def _either(value: object, clear: bool, option: str, clear_option: str) -> None:
    if clear and value is not None:
        raise fail(f"give {option} or {clear_option}, not both", EXIT_USAGE)


@queue_app.command("set")
def queue_set(
    name: NameArg,
    max_concurrency: Annotated[
        int | None, typer.Option(help="Most tasks of the queue running at once.")
    ] = None,
    no_max_concurrency: Annotated[
        bool,
        typer.Option("--unlimited", "--no-max-concurrency", help="Remove the concurrency limit."),
    ] = False,
    rate: Annotated[
        float | None,
        typer.Option(
            "--rate", help="Most task starts per second (rate_limit_per_second, a token bucket)."
        ),
    ] = None,
    no_rate: Annotated[
        bool, typer.Option("--no-rate", help="Remove the rate limit (and its burst).")
    ] = False,
    burst: Annotated[
        int | None,
        typer.Option(help="The rate limit's bucket: starts allowed at once (needs a rate)."),
    ] = None,
    no_burst: Annotated[
        bool,
        typer.Option("--no-burst", help="Burst back to its default: one second's worth."),
    ] = False,
    per_key: Annotated[
        int | None,
        typer.Option(
            "--per-key",
            help="Most tasks of one concurrency_key running at once (max_concurrency_per_key; "
            "1 runs a key's tasks one at a time).",
        ),
    ] = None,
    no_per_key: Annotated[
        bool, typer.Option("--no-per-key", help="Remove the per-key concurrency limit.")
    ] = False,
    paused: Annotated[
        bool | None,
        typer.Option("--paused/--active", help="Pause or resume."),
    ] = None,
    url: UrlOption = DEFAULT_URL,
    api_key: ApiKeyOption = None,
    output: OutputOption = OutputFormat.JSON,
) -> None:
    """Change the settings given; every other one keeps its current value (a paused queue stays
    paused when only --max-concurrency is given; --rate keeps the burst set before)."""
    _either(max_concurrency, no_max_concurrency, "--max-concurrency N", "--unlimited")
    _either(rate, no_rate, "--rate R", "--no-rate")
    _either(burst, no_burst, "--burst N", "--no-burst")
    _either(burst, no_rate, "--burst N", "--no-rate")
    _either(per_key, no_per_key, "--per-key N", "--no-per-key")
    changes: dict[str, Any] = {}
    for key, value, clear in (
        ("max_concurrency", max_concurrency, no_max_concurrency),
        ("rate_limit_per_second", rate, no_rate),
        ("burst", burst, no_burst or no_rate),
        ("max_concurrency_per_key", per_key, no_per_key),
        ("paused", paused, False),
    ):
        if clear or value is not None:
            changes[key] = value
    if not changes:
        raise fail(
            "give at least one of --max-concurrency/--unlimited, --rate/--no-rate, "
            "--burst/--no-burst, --per-key/--no-per-key, --paused/--active",
            EXIT_USAGE,
        )
    with connected(url, api_key) as client:
        settings = {**_settings(client, name), **changes}
        if "max_concurrency_per_key" in changes:
            settings["key_limit"] = _per_key(settings["key_limit"], per_key)
        emit(output, _shown(client.put_queue(name, **settings)))


def _per_key(key_limit: dict[str, Any] | None, most: int | None) -> dict[str, Any] | None:
    """A queue's ``key_limit`` whose ``max_concurrency`` (the queue's
    ``max_concurrency_per_key``) follows ``--per-key``; without a rate left, it goes."""
    if key_limit is None or "max_concurrency" not in key_limit:
        return key_limit
    kept = {k: v for k, v in key_limit.items() if k != "max_concurrency"}
    if most is not None:
        return {**kept, "max_concurrency": most}
    return kept if "rate" in kept else None
