"""The SQLite store's few statements outside the core's plans (``queries.sql``: transaction
control, pragmas, releasing dependents), read with the one loader,
:func:`duetime.store.sql.load`."""

from __future__ import annotations

from collections.abc import Mapping

from duetime.store.sql import load

QUERIES: Mapping[str, str] = {
    name: query.text for name, query in load(__package__ or "", "sqlite", "queries.sql").items()
}
"""Statement text by name (SQLite binds ``:name`` parameters itself)."""
