"""Schema migrations, one runner for both backends.

Each backend ships ``migrations/NNNN_slug.sql`` (:func:`duetime.store.sql.migrations`); a
version is a file stem. :func:`migrate` applies every pending script and its bookkeeping row in
ONE write transaction (both backends' DDL is transactional), so a crash leaves the schema before
or after, never half-way. Nodes migrating at once serialize: SQLite on its write lock, PostgreSQL
on a transaction-scoped advisory lock (``migrations_lock``); the later one finds nothing to do.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from duetime.store.core.plan import Decode, Plan, Row, Script, all_, execute, value
from duetime.store.core.runner import Runs


def _version(r: Row, d: type[Decode]) -> Any:
    return r["version"]


def _applied() -> Plan[set[str]]:
    if not (yield value("schema_migrations_exists")):
        return set()
    return set((yield all_("schema_migrations_list", _version)))


def migrate(available: Mapping[str, str]) -> Plan[list[str]]:
    """Apply the scripts of ``available`` (version → SQL, in order) not applied yet."""
    yield execute("migrations_lock")
    yield execute("schema_migrations_create")
    done = yield from _applied()
    ran: list[str] = []
    for version, script in available.items():
        if version not in done:
            yield Script(script)
            yield execute("schema_migrations_insert", version=version)
            ran.append(version)
    return ran


def pending(available: Mapping[str, str]) -> Plan[list[str]]:
    done = yield from _applied()
    return [version for version in available if version not in done]


class MigrationMethods(Runs):
    """``migrate`` and ``migrations_pending`` of both backends; each names its package's
    scripts in :attr:`_migrations`."""

    _migrations: Mapping[str, str]

    async def migrate(self) -> list[str]:
        """Apply pending migrations in order; returns the versions applied (empty when
        current). Concurrent nodes are safe: the later one waits, then finds nothing to do."""
        return await self._run(migrate(self._migrations), write=True, long=True)

    async def migrations_pending(self) -> list[str]:
        """Versions not yet applied (empty when current)."""
        return await self._run(pending(self._migrations))
