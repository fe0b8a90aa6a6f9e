"""The PostgreSQL store's few statements outside the core's plans (``queries.sql``: ping, the
clock, notify), read with the one loader, :func:`duetime.store.sql.load`."""

from __future__ import annotations

from duetime.store.sql import load

QUERIES: dict[str, str] = {
    name: query.text for name, query in load(__package__ or "", "postgres", "queries.sql").items()
}
"""Statement text by name; parameters in the order each statement names them."""
