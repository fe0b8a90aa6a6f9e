"""``duetime keys``: the keys that sign the OIDC ID tokens webhooks present
(docs/security.md "Outbound identity"). Like ``tenant create`` they work on the store given by
``--db`` (no server needed) and need ``duetime[server]``, imported on use; the node's
``DUETIME_SECRET_KEY`` (or data directory key file) seals a new private key."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import typer

from duetime.cli.common import (
    DataDirOption,
    DbOption,
    errors_reported,
    open_store_for,
    server_module,
    settings_from,
)
from duetime.cli.output import OutputFormat, OutputOption, emit

keys_app = typer.Typer(help="OIDC signing keys (outbound identity).", no_args_is_help=True)


def _key(key: Any, published: list[Any], signing: Any) -> dict[str, Any]:
    return {
        "kid": key.kid,
        "generation": key.generation,
        "algorithm": key.algorithm,
        "created_at": key.created_at.isoformat(),
        "signs_from": key.signs_from.isoformat(),
        "signing": signing is not None and key.kid == signing.kid,
        "published": key in published,
    }


def _run(work: Callable[[Any, Any], Awaitable[Any]], db: str | None, data_dir: Any) -> Any:
    settings = settings_from(db=db, data_dir=data_dir)
    outbound = server_module("duetime.delivery.outbound")

    async def run() -> Any:
        store = open_store_for(settings)
        await store.open()
        try:
            await store.migrate()
            ring = outbound.OutboundIdentity.from_settings(store, settings).keys
            return await work(store, ring)
        finally:
            await store.close()

    with errors_reported():
        return asyncio.run(run())


async def _listing(store: Any, ring: Any) -> list[dict[str, Any]]:
    identity = server_module("duetime.delivery.identity")
    keys = await store.signing_key_list()
    now = await store.now()
    published = identity.published_at(keys, now)
    signing = identity.signing_key_at(keys, now)
    return [_key(k, published, signing) for k in keys]


@keys_app.command("rotate")
def rotate(
    db: DbOption = None, data_dir: DataDirOption = None, output: OutputOption = OutputFormat.JSON
) -> None:
    """Add a new signing key: published at once, signing after DUETIME_OIDC_KEY_PUBLISH_SECONDS;
    the old key stays published until the tokens it signed expired. Prints the keys."""

    async def work(store: Any, ring: Any) -> list[dict[str, Any]]:
        await ring.rotate()
        return await _listing(store, ring)

    emit(output, _run(work, db, data_dir))


@keys_app.command("list")
def list_keys(
    db: DbOption = None, data_dir: DataDirOption = None, output: OutputOption = OutputFormat.JSON
) -> None:
    """The stored signing keys: which signs now and which are published (none until a node
    first signs a token or serves its key set, or ``keys rotate`` makes one)."""
    emit(output, _run(_listing, db, data_dir))
