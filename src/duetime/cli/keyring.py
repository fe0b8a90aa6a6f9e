"""``duetime secrets rotate``: seal every stored credential again with the newest key of the
ring (:mod:`duetime.delivery.rotation`). Like ``migrate``, it opens the store itself (``--db``)
with the node's key settings (``DUETIME_SECRET_KEYS``...), so it runs beside live nodes."""

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
)
from duetime.cli.output import OutputFormat, OutputOption, emit

secrets_app = typer.Typer(
    help="The key ring that seals stored credentials (DUETIME_SECRET_KEYS).", no_args_is_help=True
)


@secrets_app.command("rotate")
def secrets_rotate(
    db: DbOption = None,
    data_dir: DataDirOption = None,
    batch: Annotated[
        int, typer.Option(min=1, max=10_000, help="Rows read and written per transaction.")
    ] = 500,
    output: OutputOption = OutputFormat.JSON,
) -> None:
    """Seal every stored credential with the first key of the ring (tasks, schedules,
    notification targets, named credentials), online and in batches; run it again after an
    interruption: what is done is skipped. Exits 1 when a value could not be opened or changed
    meanwhile (run it again; a value no key opens needs its key back in the ring)."""
    settings = settings_from(db=db, data_dir=data_dir)
    rotation = server_module("duetime.delivery.rotation")
    # The nodes' ring, never a key made here: a value sealed with it no node could open.
    sealer = server_module("duetime.delivery.sealing").sealer_for(settings, make_key=False)

    def progress(table: str, read: int, written: int) -> None:
        typer.echo(f"{table}: {read} read, {written} sealed again", err=True)

    async def run() -> Any:
        store = open_store_for(settings)
        await store.open()
        try:
            return await rotation.rotate(store, sealer, batch=batch, progress=progress)
        finally:
            await store.close()

    with errors_reported():
        sealer.ring  # noqa: B018 - the ring is checked before the store is opened
        report = asyncio.run(run())
    emit(output, report.as_json())
    if not report.complete:
        raise fail("some values were not sealed again (see changed and unopened); run it again")
