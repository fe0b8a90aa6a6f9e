"""``duetime worker APP:OBJECT``: import a :class:`~duetime.Worker` and run it until SIGTERM or
Ctrl-C (a second signal skips the grace period).

``APP`` is a module importable from the current directory (``myapp.tasks``); ``OBJECT`` names a
``Worker`` in it, or a callable taking no arguments that returns one (a factory), with dots for
attributes (``myapp.tasks:workers.mail``). Flags (or ``DUETIME_URL`` / ``DUETIME_API_KEY``)
override what the code set.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import importlib
import os
import sys
from collections.abc import Callable
from typing import Annotated

import typer

from duetime.cli.common import ApiKeyOption, errors_reported, fail
from duetime.cli.connection import api_key_given, check_client_environment, server_url
from duetime.cli.output import OutputFormat, OutputOption, emit
from duetime.errors import ConfigError
from duetime.loglevels import check_log_level
from duetime.observe.logs import configure_logging
from duetime.sdk.worker import Worker

__all__ = ["load_worker", "worker"]


def load_worker(spec: str) -> Worker:
    """The object ``spec`` (``module:attr.path``) names, called first if it is a factory; it
    must be (or return) a :class:`duetime.Worker`. Raises ``typer.Exit`` (status 2) with a clear
    message otherwise."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise fail(f"{spec!r} must look like MODULE:OBJECT, e.g. myapp.tasks:worker", 2)
    if os.getcwd() not in sys.path:  # as `python -m` would: modules of the current directory
        sys.path.insert(0, os.getcwd())
    try:
        obj: object = importlib.import_module(module_name)
    except ImportError as exc:
        raise fail(f"cannot import {module_name!r}: {exc}", 2) from None
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise fail(f"{module_name!r} has no attribute {attr!r}", 2) from None
    if not isinstance(obj, Worker) and callable(obj):
        obj = obj()
    if not isinstance(obj, Worker):
        raise fail(f"{spec} is a {type(obj).__name__}, not a duetime.Worker (or a factory)", 2)
    return obj


def worker(
    app: Annotated[str, typer.Argument(metavar="APP:OBJECT", help="e.g. myapp.tasks:worker")],
    url: Annotated[
        str | None,
        typer.Option(
            "--url",
            envvar="DUETIME_URL",
            help="The duetime server, http://host:port (overrides code).",
        ),
    ] = None,
    api_key: ApiKeyOption = None,
    concurrency: Annotated[
        int | None, typer.Option("--concurrency", "-c", min=1, help="Tasks run at once.")
    ] = None,
    queue: Annotated[
        list[str] | None, typer.Option("--queue", "-q", help="Queue to lease from; repeat.")
    ] = None,
    worker_id: Annotated[str | None, typer.Option(help="Name in GET /v1/workers.")] = None,
    until_empty: Annotated[
        bool, typer.Option("--until-empty", help="Drain the queues, then exit.")
    ] = False,
    log_level: Annotated[str, typer.Option(envvar="DUETIME_LOG_LEVEL")] = "info",
    output: OutputOption = OutputFormat.JSON,
) -> None:
    """Run an SDK worker: lease tasks, run their handlers, until SIGTERM or Ctrl-C.

    Prints the worker's counts when it stops (JSON unless -o says otherwise).
    """
    with errors_reported():
        check_client_environment()
        api_key = api_key_given(api_key)
    if url is not None:
        url = server_url(url)
    try:
        level = check_log_level(log_level)
        configure_logging(level, os.environ.get("DUETIME_LOG_FORMAT") or "text")
    except (ConfigError, ValueError) as exc:
        raise fail(f"logging: {exc}", 2) from None
    found = load_worker(app)
    # The process is the worker's alone: keep the garbage collector from re-scanning every
    # module object loaded so far on each full collection (a measurable cost per task).
    gc.freeze()
    try:
        found.configure(
            url=url, api_key=api_key, concurrency=concurrency, queues=queue, worker_id=worker_id
        )
    except ValueError as exc:
        raise fail(str(exc), 2) from None
    with errors_reported():
        stats = found.run_sync(until_empty=until_empty, loop_factory=_loop_factory())
    emit(output, {"worker_id": found.worker_id, **dataclasses.asdict(stats)})


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop]:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency on every supported platform
        return asyncio.new_event_loop
    return uvloop.new_event_loop
