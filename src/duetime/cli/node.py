"""``duetime serve``, ``migrate`` and ``tenant create``: the commands that open the store
(they need ``duetime[server]``, imported on use)."""

from __future__ import annotations

import asyncio
from typing import Annotated

import typer

from duetime.cli.common import (
    DataDirOption,
    DbOption,
    errors_reported,
    fail,
    open_store_for,
    server_module,
    settings_from,
    tenant_app,
)
from duetime.cli.output import OutputFormat, OutputOption, emit

node_app = typer.Typer()
"""Holds ``serve`` and ``migrate`` until :mod:`duetime.cli` adds them to the root app."""


@node_app.command()
def serve(
    db: DbOption = None,
    host: Annotated[str | None, typer.Option(help="Bind address [env DUETIME_HOST]")] = None,
    port: Annotated[int | None, typer.Option(help="Port [env DUETIME_PORT]")] = None,
    data_dir: DataDirOption = None,
    no_engine: Annotated[
        bool, typer.Option("--no-engine", help="Serve the API only; run no engine here.")
    ] = False,
) -> None:
    """Run a node: the HTTP API and the engine, until SIGTERM or Ctrl-C."""
    settings = settings_from(
        db=db, host=host, port=port, data_dir=data_dir, engine=False if no_engine else None
    )
    serve_node = server_module("duetime.node.server").serve
    with errors_reported():
        serve_node(settings)


@node_app.command()
def migrate(db: DbOption = None, data_dir: DataDirOption = None) -> None:
    """Apply pending schema migrations to the store and say which."""
    settings = settings_from(db=db, data_dir=data_dir)

    async def run() -> list[str]:
        store = open_store_for(settings)
        await store.open()
        try:
            applied: list[str] = await store.migrate()
            return applied
        finally:
            await store.close()

    with errors_reported():
        applied = asyncio.run(run())
    for version in applied:
        typer.echo(f"applied {version}")
    if not applied:
        typer.echo("up to date: no pending migrations")


@tenant_app.command("create")
def tenant_create(
    name: Annotated[str, typer.Argument(help="The tenant's display name.")],
    db: DbOption = None,
    data_dir: DataDirOption = None,
    output: OutputOption = OutputFormat.JSON,
) -> None:
    """Create a tenant and its first API key directly in the store (no server needed).

    Prints {"id", "name", "api_key", "key_id"}; the key is shown only this once.
    """
    from duetime.auth import hash_api_key, new_api_key

    if not name.strip():
        raise fail("NAME must not be empty", 2)
    settings = settings_from(db=db, data_dir=data_dir)

    async def run() -> dict[str, str]:
        store = open_store_for(settings)
        await store.open()
        try:
            await store.migrate()
            tenant = await store.tenant_create(name)
            key_id, plaintext = new_api_key()
            await store.api_key_create(tenant.id, key_id, hash_api_key(plaintext))
            return {"id": tenant.id, "name": tenant.name, "api_key": plaintext, "key_id": key_id}
        finally:
            await store.close()

    with errors_reported():
        emit(output, asyncio.run(run()))
