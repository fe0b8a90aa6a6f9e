"""The ``duetime`` command: the root app, ``--version``, and every command group.

Store commands (``serve``, ``migrate``, ``tenant create``) take ``--db``/``--data-dir`` and build
:class:`~duetime.config.Settings` with :func:`~duetime.config.load_settings`: flags, then
``DUETIME_*`` variables, then defaults. API commands talk to a running server through the SDK,
at ``--url`` (``DUETIME_URL``) with ``--api-key`` (``DUETIME_API_KEY``), and print JSON, YAML or a
table (``-o``). An error is one line on stderr and a distinct exit status (see
:data:`duetime.cli.common.EXIT_CODES`).

Layout: :mod:`.common` (shared options and helpers), :mod:`.connection` (how an API command
reaches the server and reports what goes wrong), :mod:`.resolve` (task ids by prefix, schedules
by key), :mod:`.output` (``-o``), one module per command group (:mod:`.node`, :mod:`.tasks`,
:mod:`.schedule`, :mod:`.queue`, :mod:`.worker`, :mod:`.api`, :mod:`.doctor`,
:mod:`.dev_receiver`, :mod:`.bench`, :mod:`.credentials`, :mod:`.keyring`), and :mod:`.bulk`
(the commands that change many tasks at once, which ask first); this module only assembles
them. Shell completion is typer's
(``--install-completion``, ``--show-completion``).
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from duetime.cli import (
    bulk,  # noqa: F401 - registers task replay / cancel-matching, schedule backfill
    common,
)
from duetime.cli.api import admin_app, lease_app, targets, workers
from duetime.cli.bench import bench_app
from duetime.cli.common import task_app, tenant_app
from duetime.cli.credentials import credential_app
from duetime.cli.dev_receiver import dev_receiver
from duetime.cli.doctor import doctor
from duetime.cli.history import history
from duetime.cli.keyring import secrets_app
from duetime.cli.keys import keys_app
from duetime.cli.node import node_app
from duetime.cli.queue import queue_app
from duetime.cli.schedule import schedule_app
from duetime.cli.tasks import task_create  # noqa: F401 - registers the task commands
from duetime.cli.worker import worker
from duetime.version import __version__

__all__ = ["app", "common", "main"]

app = typer.Typer(
    name="duetime",
    help="A durable, distributed task scheduler.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"duetime {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """A durable, distributed task scheduler."""


# -- registration: one line per command group ------------------------------------------------

for command in node_app.registered_commands:
    app.registered_commands.append(command)
app.add_typer(task_app, name="task")
app.add_typer(tenant_app, name="tenant")
app.add_typer(keys_app, name="keys")
app.add_typer(schedule_app, name="schedule")
app.add_typer(queue_app, name="queue")
app.add_typer(admin_app, name="admin")
app.add_typer(lease_app, name="lease")
app.add_typer(credential_app, name="credential")
app.add_typer(secrets_app, name="secrets")
app.command("workers")(workers)
app.command("targets")(targets)
app.command("worker")(worker)
app.command("doctor")(doctor)
app.command("history")(history)
app.command("dev-receiver")(dev_receiver)


app.add_typer(bench_app, name="bench")  # imports the scenarios (the service) only to run one


def main() -> None:
    """Entry point of the ``duetime`` console script. A usage error (an unknown flag or command,
    a malformed value) is one line on stderr naming the help to read, with exit code 2, like
    every other error of the CLI (``common.fail``): never a boxed panel or a traceback."""
    try:
        code = app(standalone_mode=False)
    except typer.Abort:
        typer.echo("Aborted.", err=True)
        sys.exit(1)
    except Exception as exc:
        # click's exceptions (typer vendors its own copy of click): a message and an exit code.
        message = getattr(exc, "format_message", None)
        status = getattr(exc, "exit_code", None)
        if not callable(message) or not isinstance(status, int):
            raise
        text = " ".join(str(message()).split())
        ctx = getattr(exc, "ctx", None)
        if text:  # empty: a group called without a command, its help printed already
            if status == 2 and ctx is not None:  # a usage error: name the help to read
                text += f" (see '{ctx.command_path} --help')"
            typer.echo(f"error: {text}", err=True)
        sys.exit(status)
    sys.exit(code if isinstance(code, int) else 0)
