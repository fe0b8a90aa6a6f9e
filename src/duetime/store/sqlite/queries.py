"""The SQLite store's SQL, loaded once from ``queries.sql`` into :data:`QUERIES`.

``queries.sql`` holds blocks that start with a ``-- name: <query_name>`` line; everything up to
the next such line (less trailing comment lines, which introduce the next query) is that query's
text. Keeping SQL in one ``.sql`` file lets it be read, reviewed and run by hand as SQL, and no
statement is ever assembled from strings at run time.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from importlib import resources

_NAME_LINE = re.compile(r"^--\s*name:\s*(?P<name>[a-z_][a-z0-9_]*)\s*$", re.MULTILINE)


def parse_queries(text: str) -> dict[str, str]:
    """Split ``-- name: foo`` blocks into ``{"foo": "<sql>"}``. A repeated name is an error."""
    queries: dict[str, str] = {}
    matches = list(_NAME_LINE.finditer(text))
    for match, following in zip(matches, [*matches[1:], None], strict=True):
        end = following.start() if following else len(text)
        name = match.group("name")
        if name in queries:
            raise ValueError(f"query {name!r} is defined twice in queries.sql")
        body = _strip_trailing_comments(text[match.end() : end])
        if not body:
            raise ValueError(f"query {name!r} in queries.sql is empty")
        queries[name] = body
    return queries


def _strip_trailing_comments(block: str) -> str:
    # Comments introducing the *next* query sit at the end of this block; they are not ours.
    lines = block.strip().splitlines()
    while lines and (not lines[-1].strip() or lines[-1].lstrip().startswith("--")):
        lines.pop()
    return "\n".join(lines)


def load_queries() -> dict[str, str]:
    """Read and parse this package's ``queries.sql``."""
    text = resources.files(__package__).joinpath("queries.sql").read_text(encoding="utf-8")
    return parse_queries(text)


QUERIES: Mapping[str, str] = load_queries()
"""Every named query of the SQLite store, by name."""
