"""The PostgreSQL store's SQL: named queries from ``queries.sql`` and the migration files.

``queries.sql`` holds blocks that start with a ``-- name: <query>`` line (procrastinate's
convention); each block up to the next such line is one query. Migrations are
``migrations/NNNN_slug.sql``; a migration's version is its file stem (``0001_init``), applied in
name order.
"""

from __future__ import annotations

import re
from importlib import resources

_NAME = re.compile(r"^--\s*name:\s*(\w+)\s*$", re.MULTILINE)


def parse_queries(text: str) -> dict[str, str]:
    """Split ``-- name: x`` blocks into ``{"x": sql}``. Raises ``ValueError`` on a repeated name."""
    parts = _NAME.split(text)
    queries: dict[str, str] = {}
    # parts = [preamble, name1, body1, name2, body2, ...]
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        if name in queries:
            raise ValueError(f"query {name!r} is defined twice in queries.sql")
        queries[name] = body.strip()
    return queries


def _package_file(*parts: str) -> str:
    return resources.files(__package__).joinpath(*parts).read_text(encoding="utf-8")


QUERIES: dict[str, str] = parse_queries(_package_file("queries.sql"))
"""Every named query of the store."""
