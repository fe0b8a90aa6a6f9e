"""Stores: where all of duetime's state lives. See :mod:`duetime.store.protocols`."""

from __future__ import annotations

from pathlib import Path

from duetime.clock import Clock
from duetime.errors import ConfigError
from duetime.store.protocols import Signal, Store

__all__ = ["Signal", "Store", "open_store", "store_from_url"]


def store_from_url(url: str, *, clock: Clock | None = None, data_dir: Path | None = None) -> Store:
    """Build (not open) the store a URL names.

    ``sqlite:///relative/or/absolute.db`` (``sqlite://`` alone = ``duetime.db`` in ``data_dir``),
    ``postgresql://...`` or ``postgres://...``.
    """
    if url.startswith(("postgresql://", "postgres://")):
        from duetime.store.postgres.backend import PostgresStore

        return PostgresStore(url, clock=clock)
    if url.startswith("sqlite:"):
        from duetime.store.sqlite.backend import SqliteStore

        # SQLAlchemy's convention: sqlite:///rel.db is relative, sqlite:////abs/x.db absolute.
        rest = url.removeprefix("sqlite:").removeprefix("//")
        path = rest[1:] if rest.startswith("/") else rest
        if not path:
            path = str((data_dir or Path(".duetime")) / "duetime.db")
        return SqliteStore(Path(path), clock=clock)
    raise ConfigError(f"unsupported store URL {url!r}: use sqlite:///path or postgresql://...")


async def open_store(
    url: str, *, clock: Clock | None = None, data_dir: Path | None = None, migrate: bool = False
) -> Store:
    """Build and open a store; optionally apply pending migrations."""
    store = store_from_url(url, clock=clock, data_dir=data_dir)
    await store.open()
    if migrate:
        await store.migrate()
    return store
