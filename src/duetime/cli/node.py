"""``duetime serve``, ``migrate``, ``tenant create`` and ``tenant grant-sql``/``revoke-sql``: the
commands that open the store (they need ``duetime[server]``, imported on use)."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

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


@tenant_app.command("grant-sql")
def tenant_grant_sql(
    tenant: Annotated[str, typer.Argument(help="The tenant's id.")],
    role: Annotated[str, typer.Argument(help="An existing PostgreSQL login role.")],
    db: DbOption = None,
    data_dir: DataDirOption = None,
) -> None:
    """Let a PostgreSQL login role create tasks for TENANT through the SQL API, and nothing else.

    ROLE gets USAGE on duetime's schema and EXECUTE on its API functions (create_task_v1,
    create_tasks_v1, cancel_task_v1, create_workflow_v1, workflow_request_v1, api_version): no
    table privilege. A role has one tenant;
    granting another replaces it. Also records max_payload_bytes [env DUETIME_MAX_PAYLOAD_BYTES]
    for the functions to check payloads against. Migrates the store first.
    """
    settings = settings_from(db=db, data_dir=data_dir)

    async def run() -> None:
        store = _sql_store(settings)
        await store.open()
        try:
            await store.migrate()
            await store.sql_grant(tenant, role, max_payload_bytes=settings.max_payload_bytes)
        finally:
            await store.close()

    with errors_reported():
        asyncio.run(run())
    typer.echo(f"granted: role {role} creates tasks for tenant {tenant} through the SQL API")


@tenant_app.command("revoke-sql")
def tenant_revoke_sql(
    role: Annotated[str, typer.Argument(help="A role granted the SQL API.")],
    db: DbOption = None,
    data_dir: DataDirOption = None,
) -> None:
    """Take the SQL API away from a PostgreSQL role (its EXECUTE and USAGE grants too)."""
    settings = settings_from(db=db, data_dir=data_dir)

    async def run() -> bool:
        store = _sql_store(settings)
        await store.open()
        try:
            had: bool = await store.sql_revoke(role)
            return had
        finally:
            await store.close()

    with errors_reported():
        had = asyncio.run(run())
    if not had:
        raise fail(f"role {role} had no SQL API grant", 3)
    typer.echo(f"revoked: role {role} no longer uses the SQL API")


def _sql_store(settings: Any) -> Any:
    store = open_store_for(settings)
    if not hasattr(store, "sql_grant"):
        raise fail("the SQL API needs a PostgreSQL store (--db postgresql://...)", 2)
    return store
